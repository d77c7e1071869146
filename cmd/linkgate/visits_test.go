package main

import (
	"context"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

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
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, metrics := call(t, "GET", c.URL+"/metrics", "")
		if m := flushedRE.FindStringSubmatch(metrics); m != nil && m[1] == strconv.Itoa(4) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("visits not flushed within 10s:\n%s", metrics)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.cmd.Process.Kill()
	c.cmd.Wait()
	if got := storedVisits(t, db, id); got != 4 {
		t.Errorf("%d visits stored after SIGKILL, want the 4 flushed", got)
	}
}
