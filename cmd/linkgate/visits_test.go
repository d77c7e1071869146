package main

import (
	"context"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/shortener/dynamodb"
	"github.com/linkgate/linkgate/shortener/pebble"
)

// visit follows the short link id once (GET, not following the redirect).
func visit(t *testing.T, base, method, id string) {
	t.Helper()
	if status, _, body := call(t, method, base+"/"+id, "", "User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0"); status != http.StatusFound {
		t.Fatalf("%s /%s: %d %s", method, id, status, body)
	}
}

func storedVisits(t *testing.T, db, id string) int64 {
	t.Helper()
	st, err := pebble.Open(db, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stats, err := st.VisitStats(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return stats.Total
}

// A clean stop (SIGTERM) flushes every counted visit, however long the
// flush interval.
func TestVisitsFlushedOnSIGTERM(t *testing.T) {
	bin, err := buildLinkgate()
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "links")
	c := startChild(t, []string{bin}, db, "--visits-flush-interval", "1h", "--stats-public")
	id := shorten(t, c.URL, "https://visits.example/")
	for range 5 {
		visit(t, c.URL, "GET", id)
	}
	visit(t, c.URL, "HEAD", id) // not a visit
	if status, _, body := call(t, "GET", c.URL+"/api/v1/links/"+id+"/stats", ""); status != 200 || !regexp.MustCompile(`"total":5\b`).MatchString(body) {
		t.Errorf("live stats before stop: %d %s", status, body)
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, c.logs)
	}
	if got := storedVisits(t, db, id); got != 5 {
		t.Errorf("%d visits stored after SIGTERM, want 5\n%s", got, c.logs)
	}
}

// On DynamoDB too, a clean stop writes every counted visit: the
// aggregator's last batch, then the visit log's buffer, however long both
// intervals; a link with a visit limit has them on its item.
func TestVisitsFlushedOnSIGTERMDynamoDB(t *testing.T) {
	localAWSEnv(t)
	table := createTable(t)
	bin, err := buildLinkgate()
	if err != nil {
		t.Fatal(err)
	}
	c := startChild(t, []string{bin}, "", "--store", "dynamodb:"+table, "--store-timeout", "10s",
		"--visits-flush-interval", "1h", "--dynamodb-visit-interval", "1h", "--shutdown-timeout", "3s")
	id := shorten(t, c.URL, "https://visits.example/")
	status, _, body := call(t, "POST", c.URL+"/api/v1/links", `{"url":"https://limited.example/","slug":"sigterm-limited","max_visits":10}`)
	if status != 201 {
		t.Fatalf("create limited link: %d %s", status, body)
	}
	for range 5 {
		visit(t, c.URL, "GET", id)
	}
	for range 2 {
		visit(t, c.URL, "GET", "sigterm-limited")
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, c.logs)
	}
	s, err := dynamodb.Open(context.Background(), dynamodb.Options{Table: table, ManualVisits: true, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for id, want := range map[string]int64{id: 5, "sigterm-limited": 2} {
		st, err := s.VisitStats(context.Background(), id)
		if err != nil || st.Total != want || st.Browsers["Firefox"] != want {
			t.Errorf("%s after SIGTERM: %+v, %v; want %d visits by Firefox\n%s", id, st, err, want, c.logs)
		}
	}
	if l, err := s.Get(context.Background(), "sigterm-limited"); err != nil || l.Visits != 2 {
		t.Errorf("limited link after SIGTERM: %+v, %v; want Visits 2 on its item", l, err)
	}
}

var flushedRE = regexp.MustCompile(`(?m)^linkgate_visits_flushed_total (\d+)`)

// A crash (SIGKILL) loses only what was not flushed yet: visits the
// server reported flushed are on disk.
func TestVisitsFlushedSurviveCrash(t *testing.T) {
	bin, err := buildLinkgate()
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "links")
	c := startChild(t, []string{bin}, db, "--visits-flush-interval", "50ms")
	id := shorten(t, c.URL, "https://crash.example/")
	for range 4 {
		visit(t, c.URL, "GET", id)
	}
	eventually.True(t, 10*time.Second, "the 4 visits flushed", func() bool {
		_, _, metrics := call(t, "GET", c.URL+"/metrics", "")
		m := flushedRE.FindStringSubmatch(metrics)
		return m != nil && m[1] == strconv.Itoa(4)
	})
	c.cmd.Process.Kill()
	c.cmd.Wait()
	if got := storedVisits(t, db, id); got != 4 {
		t.Errorf("%d visits stored after SIGKILL, want the 4 flushed", got)
	}
}

// max_visits on DynamoDB keeps the rules docs/serve.md states, with visit
// statistics in the log rather than on the items: on one instance a link
// closes at its limit (the live count: stored plus not yet flushed); its
// visits reach its item every flush (1 s), not with the visit log's 30 s
// records, so another instance that reads the link after that flush
// refuses it too; and its statistics count each visit once.
func TestMaxVisitsOnDynamoDB(t *testing.T) {
	localAWSEnv(t)
	table := createTable(t)
	args := []string{"--store", "dynamodb:" + table, "--store-timeout", "10s", "--stats-public", "--admin-key", "root", "--dynamodb-visit-interval", "2s"}
	a := startServe(t, nil, args...)
	status, _, body := call(t, "POST", a.URL+"/api/v1/links", `{"url":"https://limited.example/","slug":"max-visits-3","max_visits":3}`, "Authorization", "Bearer root")
	if status != 201 {
		t.Fatalf("create: %d %s", status, body)
	}
	for range 3 {
		visit(t, a.URL, "GET", "max-visits-3")
	}
	if status, _, body := call(t, "GET", a.URL+"/max-visits-3", ""); status != http.StatusGone {
		t.Errorf("4th visit on the same instance: %d %s, want 410 at once", status, body)
	}
	var metrics string
	if !eventually.Within(20*time.Second, func() bool {
		_, _, metrics = call(t, "GET", a.URL+"/metrics", "")
		m := flushedRE.FindStringSubmatch(metrics)
		return m != nil && m[1] == "3"
	}) {
		t.Fatalf("visits not flushed within 20s:\n%s", grep(metrics, "linkgate_visits"))
	}
	b := startServe(t, nil, args...)
	if status, _, body := call(t, "GET", b.URL+"/max-visits-3", ""); status != http.StatusGone {
		t.Errorf("another instance after the flush: %d %s, want 410", status, body)
	}
	// Statistics by range: at once on the instance that counted the
	// visits; on another once the first has written its visit log
	// (--dynamodb-visit-interval, 2 s here).
	if status, _, body := call(t, "GET", a.URL+"/api/v1/links/max-visits-3/stats", ""); status != 200 || !regexp.MustCompile(`"total":3\b`).MatchString(body) {
		t.Errorf("stats: %d %s, want total 3", status, body)
	}
	var body3 string
	if !eventually.Within(20*time.Second, func() bool {
		var status int
		status, _, body3 = call(t, "GET", b.URL+"/api/v1/links/max-visits-3/stats", "")
		return status == 200 && regexp.MustCompile(`"total":3\b`).MatchString(body3)
	}) {
		t.Errorf("stats on another instance: %s, want total 3 within 20 s", body3)
	}
	// Across links, on the instance that counted them (the others read
	// the visit log, written every --dynamodb-visit-interval).
	if status, _, body := call(t, "GET", a.URL+"/api/v1/stats", "", "Authorization", "Bearer root"); status != 200 || !regexp.MustCompile(`"total":3\b`).MatchString(body) ||
		!strings.Contains(body, `"max-visits-3"`) {
		t.Errorf("stats across links: %d %s, want total 3 and the link among the top links", status, body)
	}
}
