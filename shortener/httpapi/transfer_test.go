package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/testdep"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/httpapi"
	"github.com/linkgate/linkgate/shortener/pebble"
	"github.com/linkgate/linkgate/shortener/storetest"
)

func client(t *testing.T, s *testServer, key string) *httpapi.Client {
	t.Helper()
	c, err := httpapi.NewClient(s.URL, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The client speaks the real API: links and keys round-trip through it,
// and error answers come back as the domain's errors.
func TestClient(t *testing.T) {
	s := start(t, setup{cfg: httpapi.Config{AdminKey: "k"}})
	c := client(t, s, "k")
	ctx := context.Background()
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	l, err := c.CreateLink(ctx, shortener.CreateRequest{URL: "https://client.example/", Slug: "client", ExpiresAt: exp, MaxVisits: 3,
		Tags: []string{"b", "a"}, ForwardQuery: shortener.ForwardOn})
	if err != nil || l.ID != "client" || l.URL != "https://client.example/" || *l.ExpiresAt != exp.Format(time.RFC3339) ||
		*l.MaxVisits != 3 || strings.Join(l.Tags, ",") != "a,b" || !*l.ForwardQuery || l.ShortURL != s.URL+"/client" {
		t.Fatalf("create: %+v %v", l, err)
	}
	if _, err := c.CreateLink(ctx, shortener.CreateRequest{URL: "https://client.example/2", Slug: "client"}); !errors.Is(err, shortener.ErrConflict) {
		t.Errorf("create on a taken slug: %v, want a conflict", err)
	}
	if _, err := c.CreateLink(ctx, shortener.CreateRequest{URL: "ftp://x"}); shortener.ErrorCode(err) != shortener.InvalidURL && shortener.ErrorCode(err) != shortener.SchemeNotAllowed {
		t.Errorf("create of a bad URL: %v (%s)", err, shortener.ErrorCode(err))
	}
	if g, err := c.GetLink(ctx, "", "client"); err != nil || g.URL != l.URL {
		t.Errorf("get: %+v %v", g, err)
	}
	if _, err := c.GetLink(ctx, "", "nope000"); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("get of a missing link: %v", err)
	}
	url, none, off := "https://edited.example/", int64(0), shortener.ForwardDefault
	tags := []string{}
	e, err := c.UpdateLink(ctx, "", "client", shortener.LinkUpdate{URL: &url, MaxVisits: &none, ExpiresAt: &time.Time{}, Tags: &tags, ForwardQuery: &off})
	if err != nil || e.URL != url || e.MaxVisits != nil || e.ExpiresAt != nil || len(e.Tags) != 0 || e.ForwardQuery != nil {
		t.Errorf("update: %+v %v", e, err)
	}
	for i := range 3 {
		if _, err := c.CreateLink(ctx, shortener.CreateRequest{URL: fmt.Sprintf("https://page.example/%d", i), Tags: []string{"page"}}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	cursor := ""
	for range 10 {
		page, next, err := c.ListLinks(ctx, httpapi.ListQuery{Cursor: cursor, Limit: 2, Filter: shortener.ListFilter{Tag: "page"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range page {
			ids = append(ids, l.ID)
		}
		if cursor = next; cursor == "" {
			break
		}
	}
	if len(ids) != 3 {
		t.Errorf("listed %v, want the 3 links tagged page", ids)
	}
	if err := c.DeleteLink(ctx, "", "client"); err != nil {
		t.Error(err)
	}
	if err := c.DeleteLink(ctx, "", "client"); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("delete again: %v", err)
	}
	k, err := c.CreateKey(ctx, "ci", []shortener.Scope{shortener.ScopeCreate})
	if err != nil || !strings.HasPrefix(k.Token, "lgk_") {
		t.Fatalf("create key: %+v %v", k, err)
	}
	limited := client(t, s, k.Token)
	if _, err := limited.ListKeys(ctx); err == nil || err.(*httpapi.APIError).Status != 403 {
		t.Errorf("list keys with a links:create key: %v", err)
	}
	if keys, err := c.ListKeys(ctx); err != nil || len(keys) != 1 || keys[0].ID != k.ID || keys[0].Token != "" {
		t.Errorf("list keys: %+v %v", keys, err)
	}
	if err := c.DeleteKey(ctx, k.ID); err != nil {
		t.Error(err)
	}
	if _, err := client(t, s, "wrong").ListKeys(ctx); err == nil || err.(*httpapi.APIError).Code != "unauthorized" {
		t.Errorf("a wrong key: %v", err)
	}
}

// linesOf is JSON Lines of n links with ids prefix0…, generated as read:
// the test holds none of it.
type linesOf struct {
	prefix string
	n, i   int
	buf    []byte
}

func (g *linesOf) Read(p []byte) (int, error) {
	for len(g.buf) < len(p) && g.i < g.n {
		g.buf = fmt.Appendf(g.buf, `{"id":"%s%d","url":"https://bulk.example/%d","created_at":"2030-01-01T00:00:00Z","stats":{"Total":%d}}`+"\n", g.prefix, g.i, g.i, g.i%7)
		g.i++
	}
	if len(g.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, g.buf)
	g.buf = g.buf[n:]
	return n, nil
}

// Export and import through the API: what the export streams, an import
// into another server reads back whole (statistics too); an import run
// again changes nothing; bad and conflicting lines are answered with
// their number and the others imported; only admin keys may.
func TestExportImport(t *testing.T) {
	ctx := context.Background()
	src := start(t, setup{cfg: httpapi.Config{AdminKey: "k"}, transfer: true})
	recs := []shortener.LinkRecord{
		{Link: shortener.Link{ID: "one", URL: "https://one.example/", CreatedAt: time.Unix(1.9e9, 0).UTC(), Tags: []string{"t"}},
			Stats: shortener.VisitStats{Total: 5, Bots: 1, Browsers: shortener.Breakdown{"Firefox": 4}}},
		{Link: shortener.Link{ID: "two", URL: "https://two.example/", CreatedAt: time.Unix(1.9e9, 0).UTC(), MaxVisits: 9}},
	}
	if _, err := src.Store.ImportRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	var export bytes.Buffer
	if err := client(t, src, "k").Export(ctx, "jsonl", &export); err != nil || strings.Count(export.String(), "\n") != 2 {
		t.Fatalf("export: %v\n%s", err, export.String())
	}
	var csv bytes.Buffer
	if err := client(t, src, "k").Export(ctx, "csv", &csv); err != nil || !strings.HasPrefix(csv.String(), "id,url,") || !strings.Contains(csv.String(), "\none,https://one.example/,") {
		t.Errorf("CSV export: %v\n%s", err, csv.String())
	}

	dst := start(t, setup{cfg: httpapi.Config{AdminKey: "k"}, transfer: true})
	c := client(t, dst, "k")
	sum, err := c.Import(ctx, bytes.NewReader(export.Bytes()), nil)
	if err != nil || sum != (httpapi.ImportSummary{Lines: 2, Imported: 2}) {
		t.Fatalf("import: %+v %v", sum, err)
	}
	var got []shortener.LinkRecord
	dst.Store.ExportRecords(ctx, func(r shortener.LinkRecord) error { got = append(got, r); return nil })
	if len(got) != 2 || !storetest.Equal(got[0].Link, recs[0].Link) || !storetest.EqualStats(got[0].Stats, recs[0].Stats) || !storetest.Equal(got[1].Link, recs[1].Link) {
		t.Errorf("imported %+v\nwant %+v", got, recs)
	}

	again := strings.Replace(export.String(), "https://two.example/", "https://other.example/", 1) +
		"\nnot json\n" + `{"id":"three","url":"https://three.example/"}` + "\n"
	var refused []string
	sum, err = c.Import(ctx, strings.NewReader(again), func(l httpapi.ImportLine) error {
		if l.Result != "" {
			refused = append(refused, fmt.Sprintf("%d %s %s", l.Line, l.Result, l.ID))
		}
		return nil
	})
	if err != nil || sum != (httpapi.ImportSummary{Lines: 5, Imported: 1, Unchanged: 1, Conflicts: 1, Invalid: 1}) ||
		strings.Join(refused, "|") != "4 invalid |2 conflict two" {
		t.Errorf("import again: %+v %v, refused %q", sum, err, refused)
	}
	if l, err := c.GetLink(ctx, "", "two"); err != nil || l.URL != "https://two.example/" {
		t.Errorf("a conflicting line changed the link: %+v %v", l, err)
	}

	for _, key := range []string{"", "wrong"} {
		if _, err := client(t, dst, key).Import(ctx, strings.NewReader(export.String()), nil); err == nil || err.(*httpapi.APIError).Status != 401 {
			t.Errorf("import with key %q: %v", key, err)
		}
		if err := client(t, dst, key).Export(ctx, "jsonl", io.Discard); err == nil || err.(*httpapi.APIError).Status != 401 {
			t.Errorf("export with key %q: %v", key, err)
		}
	}
	if err := c.Export(ctx, "xml", io.Discard); shortener.ErrorCode(err) != shortener.InvalidParameter {
		t.Errorf("export as xml: %v", err)
	}
	none := start(t, setup{cfg: httpapi.Config{AdminKey: "k"}})
	if _, err := client(t, none, "k").Import(ctx, strings.NewReader(export.String()), nil); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("import on a server without Records: %v", err)
	}
}

// A backup through the API is a consistent copy of the store that opens
// as one.
func TestBackupAPI(t *testing.T) {
	ctx := context.Background()
	s := start(t, setup{cfg: httpapi.Config{AdminKey: "k"}, transfer: true})
	c := client(t, s, "k")
	if _, err := c.CreateLink(ctx, shortener.CreateRequest{URL: "https://backup.example/", Slug: "backup"}); err != nil {
		t.Fatal(err)
	}
	var tarball bytes.Buffer
	if err := c.Backup(ctx, &tarball); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	if err := pebble.Unpack(&tarball, dir); err != nil {
		t.Fatal(err)
	}
	b, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if l, err := b.Get(ctx, "backup"); err != nil || l.URL != "https://backup.example/" {
		t.Errorf("the backup's link: %+v %v", l, err)
	}
	if err := pebble.Unpack(strings.NewReader("not a tar"), filepath.Join(t.TempDir(), "x")); err == nil {
		t.Error("unpacked garbage")
	}
}

// An import that keeps sending is never cut off, however long it takes
// (here longer than the server's read timeout, in pauses shorter than
// the stream timeout); its answer starts before the body ends; one that
// stalls past the stream timeout is ended, and the lines it sent before
// are imported and counted.
func TestImportTimeouts(t *testing.T) {
	ctx := context.Background()
	h, store := newHandler(t, setup{cfg: httpapi.Config{AdminKey: "k", StreamTimeout: 3 * time.Second}, transfer: true})
	addr := serve(t, h, httpapi.ServerConfig{ReadTimeout: time.Second, WriteTimeout: time.Second})
	s := &testServer{URL: "http://" + addr, Store: store}
	c := client(t, s, "k")

	pr, pw := io.Pipe()
	done := make(chan error, 1)
	var sum httpapi.ImportSummary
	go func() {
		var err error
		sum, err = c.Import(ctx, pr, nil)
		done <- err
	}()
	for i := range 6 { // 6 × 400 ms: more than twice the read timeout
		fmt.Fprintf(pw, `{"id":"slow%d","url":"https://slow.example/%d"}`+"\n", i, i)
		time.Sleep(400 * time.Millisecond) // a slow client's deliberate pace
	}
	pw.Close()
	if err := <-done; err != nil || sum.Imported != 6 {
		t.Fatalf("slow import: %+v %v", sum, err)
	}

	// The answer's status arrives while the body is still open.
	pr, pw = io.Pipe()
	defer pw.Close()
	req, _ := http.NewRequest("POST", s.URL+"/api/v1/import", pr)
	req.Header.Set("Authorization", "Bearer k")
	respc := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			close(respc)
			return
		}
		respc <- resp
	}()
	fmt.Fprintf(pw, `{"id":"stall","url":"https://stall.example/"}`+"\n")
	resp := <-respc // the body is open: the status came first
	if resp == nil {
		t.FailNow()
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// Then nothing more: after the stream timeout the answer ends with the
	// timeout, and the line sent is imported.
	var last string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		last = sc.Text()
	}
	if !strings.Contains(last, `"code":"request_timeout"`) || !strings.Contains(last, `"imported":1`) {
		t.Errorf("the stalled import's last line: %s", last)
	}
	if _, err := store.Get(ctx, "stall"); err != nil {
		t.Errorf("the line sent before the stall: %v", err)
	}
}

// countingRecords is a RecordStore that keeps nothing and counts what it
// is given, so that the memory an import takes is the import's alone.
type countingRecords struct{ n atomic.Int64 }

func (c *countingRecords) ImportRecords(_ context.Context, recs []shortener.LinkRecord) ([]shortener.ImportResult, error) {
	c.n.Add(int64(len(recs)))
	return make([]shortener.ImportResult, len(recs)), nil
}

func (c *countingRecords) ExportRecords(context.Context, func(shortener.LinkRecord) error) error {
	return nil
}

// An import holds a bounded amount of memory whatever the size of its
// body: the heap's peak while 200,000 lines (25 MB) are imported is no
// more than 8 MiB above its peak for 20,000. (A body read whole holds
// it all; so did decoding every record before storing them.)
//
// The race detector makes it slow (a minute), and its shadow memory is
// not the import's: it skips under -race, and the test command runs it
// again without (scripts/test-isolated.sh).
func TestImportMemoryBounded(t *testing.T) {
	if testdep.Race {
		t.Skip("slow under the race detector; run without -race")
	}
	// Collect garbage early (the heap's goal 10 % above what is live), so
	// that the peak is what the import holds, not when the collector ran.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	records := &countingRecords{}
	s := start(t, setup{cfg: httpapi.Config{AdminKey: "k", Records: records}})
	c := client(t, s, "k")
	peak := func(n int) uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapInuse
		var max atomic.Uint64
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			var ms runtime.MemStats
			for {
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > max.Load() {
					max.Store(ms.HeapInuse)
				}
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
			}
		}()
		before := records.n.Load()
		sum, err := c.Import(context.Background(), &linesOf{prefix: fmt.Sprint("m", n, "-"), n: n}, nil)
		close(stop)
		<-sampled
		if err != nil || sum.Imported != n || records.n.Load()-before != int64(n) {
			t.Fatalf("import of %d lines: %+v %v", n, sum, err)
		}
		return max.Load() - min(base, max.Load())
	}
	peak(2000) // warm the pools
	small, large := peak(20_000), peak(200_000)
	t.Logf("heap in use above the start: %.1f MiB for 20,000 lines, %.1f MiB for 200,000", float64(small)/(1<<20), float64(large)/(1<<20))
	if large > small+8<<20 {
		t.Errorf("the heap grew with the body: %.1f MiB for 20,000 lines, %.1f MiB for 200,000", float64(small)/(1<<20), float64(large)/(1<<20))
	}
}
