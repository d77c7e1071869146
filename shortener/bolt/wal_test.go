package bolt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/bolt"
	"github.com/linkgate/linkgate/shortener/bolt/bolttest"
	"github.com/linkgate/linkgate/shortener/storetest"
)

// createMany creates n links concurrently and returns them by id.
func createMany(t *testing.T, s *bolt.Store, prefix string, n int) map[string]shortener.Link {
	t.Helper()
	links := make(map[string]shortener.Link, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				l := shortener.Link{ID: fmt.Sprintf("%s%07d", prefix, i), URL: fmt.Sprintf("https://wal.example/%s/%d", prefix, i),
					CreatedAt: time.Unix(1700000000+int64(i), 0).UTC(), MaxVisits: int64(i % 3)}
				if err := s.Create(context.Background(), l); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				links[l.ID] = l
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return links
}

// crashCopy copies the store's files as a crash (of the process, not of
// the machine) would leave them: whatever was written, without Close. No
// apply runs meanwhile (the test holds applies off), so the bbolt file is
// not being written.
func crashCopy(t *testing.T, path string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "crashed", "links.db")
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal.0", "-wal.1"} {
		in, err := os.Open(path + suffix)
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(dst + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		out.Close()
	}
	return dst
}

func checkLinks(t *testing.T, s *bolt.Store, want map[string]shortener.Link) {
	t.Helper()
	for id, l := range want {
		got, err := s.Get(context.Background(), id)
		if err != nil || !storetest.Equal(got, l) {
			t.Fatalf("Get(%s) = %+v, %v; want %+v", id, got, err, l)
		}
	}
}

// Every acknowledged create survives a crash before it was applied to the
// bbolt file: Open replays the log.
func TestCrashReplaysLog(t *testing.T) {
	defer bolt.SetApplyDelay(time.Hour)()
	s, path := bolttest.Open(t)
	links := createMany(t, s, "crash", 500)
	if s.Pending() != len(links) {
		t.Fatalf("%d links pending, want all %d (nothing applied yet)", s.Pending(), len(links))
	}
	checkLinks(t, s, links)      // readable while pending
	defer bolt.SetMaxApply(64)() // replay in several transactions
	crashed, err := bolt.Open(crashCopy(t, path))
	if err != nil {
		t.Fatal(err)
	}
	defer crashed.Close()
	if crashed.Pending() != 0 {
		t.Errorf("%d links pending after Open, want 0 (replayed into the file)", crashed.Pending())
	}
	checkLinks(t, crashed, links)
	// New creates continue after the replayed ones, and a duplicate of a
	// replayed id is refused.
	if err := crashed.Create(context.Background(), shortener.Link{ID: "crash0000007", URL: "https://other.example/"}); !errors.Is(err, shortener.ErrConflict) {
		t.Errorf("Create of a replayed id = %v, want ErrConflict", err)
	}
	more := createMany(t, crashed, "after", 50)
	checkLinks(t, crashed, more)
}

// A record torn by the crash (the tail of the log) is ignored, along with
// anything after it; the records before it are replayed.
func TestCrashTornTail(t *testing.T) {
	defer bolt.SetApplyDelay(time.Hour)()
	ctx := context.Background()
	s, path := bolttest.Open(t)
	links := createMany(t, s, "torn", 100)
	last := shortener.Link{ID: "torn-last", URL: "https://torn.example/last-one-written"}
	if err := s.Create(ctx, last); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		damage func(f *os.File, size int64) error
		lost   bool // the last record is gone
	}{
		{"cut in the payload", func(f *os.File, size int64) error { return f.Truncate(size - 5) }, true},
		{"payload not written", func(f *os.File, size int64) error { _, err := f.WriteAt(make([]byte, 5), size-5); return err }, true},
		{"cut in the header", func(f *os.File, size int64) error { return f.Truncate(size - int64(len(last.URL)) - 20) }, true},
		{"checksum mismatch", func(f *os.File, size int64) error { _, err := f.WriteAt([]byte{'X'}, size-3); return err }, true},
		{"garbage after", func(f *os.File, size int64) error {
			_, err := f.WriteAt([]byte("\x05\x00\x00\x00garbage"), size)
			return err
		}, false},
		{"zeros after (preallocated)", func(f *os.File, size int64) error { return f.Truncate(size + 4096) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := crashCopy(t, path)
			f, err := os.OpenFile(dst+"-wal.0", os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(f)
			if err != nil {
				t.Fatal(err)
			}
			end := int64(bytes.LastIndexFunc(b, func(r rune) bool { return r != 0 }) + 1) // the files grow with zeros
			if err := tt.damage(f, end); err != nil {
				t.Fatal(err)
			}
			f.Close()
			crashed, err := bolt.Open(dst)
			if err != nil {
				t.Fatal(err)
			}
			defer crashed.Close()
			checkLinks(t, crashed, links)
			_, err = crashed.Get(ctx, last.ID)
			if tt.lost && !errors.Is(err, shortener.ErrNotFound) {
				t.Errorf("torn last record: Get = %v, want ErrNotFound", err)
			}
			if !tt.lost && err != nil {
				t.Errorf("intact last record: Get = %v", err)
			}
			// The torn tail is gone for good: new records are not
			// written after it, and survive the next crash.
			l := shortener.Link{ID: "torn-new", URL: "https://torn.example/new"}
			if err := crashed.Create(ctx, l); err != nil {
				t.Fatal(err)
			}
			again, err := bolt.Open(crashCopy(t, dst))
			if err != nil {
				t.Fatal(err)
			}
			defer again.Close()
			checkLinks(t, again, map[string]shortener.Link{l.ID: l})
		})
	}
}

// A link deleted after it was applied stays deleted when the log (which
// still holds its create record) is replayed after a crash.
func TestCrashKeepsDeletes(t *testing.T) {
	defer bolt.SetApplyDelay(time.Hour)()
	ctx := context.Background()
	s, path := bolttest.Open(t)
	links := createMany(t, s, "del", 20)
	if err := s.Delete(ctx, "del0000003"); err != nil { // applies the pending links, then deletes
		t.Fatal(err)
	}
	delete(links, "del0000003")
	more := createMany(t, s, "re", 5)
	crashed, err := bolt.Open(crashCopy(t, path))
	if err != nil {
		t.Fatal(err)
	}
	defer crashed.Close()
	if _, err := crashed.Get(ctx, "del0000003"); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("deleted link after replay: Get = %v, want ErrNotFound", err)
	}
	checkLinks(t, crashed, links)
	checkLinks(t, crashed, more)
}

// Close applies everything; the next Open finds every link.
func TestCloseCheckpoints(t *testing.T) {
	defer bolt.SetApplyDelay(time.Hour)()
	path := filepath.Join(t.TempDir(), "links.db")
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	links := createMany(t, s, "close", 200)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkLinks(t, s, links)
}

// With a tiny rotation size the log alternates between its two files
// while links are applied in the background, a few at a time; a crash
// with the log rotated and nothing applied loses nothing either.
func TestLogRotation(t *testing.T) {
	defer bolt.SetRotateSize(2048)()
	restore := bolt.SetApplyDelay(time.Millisecond)
	defer bolt.SetMaxApply(64)()
	path := filepath.Join(t.TempDir(), "links.db")
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	links := createMany(t, s, "rot", 2000)
	checkLinks(t, s, links)
	// Both files were written to (a file passes the rotation size only
	// while the other one's records wait to be applied).
	for _, suffix := range []string{"-wal.0", "-wal.1"} {
		if fi, err := os.Stat(path + suffix); err != nil || fi.Size() < 2048 {
			t.Errorf("log %s: %v, %v; want it used (rotated to)", suffix, fi.Size(), err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	restore()
	defer bolt.SetApplyDelay(time.Hour)()
	s, err = bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkLinks(t, s, links)
	more := createMany(t, s, "rot2-", 300)
	crashed, err := bolt.Open(crashCopy(t, path))
	if err != nil {
		t.Fatal(err)
	}
	defer crashed.Close()
	checkLinks(t, crashed, links)
	checkLinks(t, crashed, more)
}

// Links stay readable and unique while pending, while being applied, and
// after; visit counts of a pending link are kept.
func TestPendingLinks(t *testing.T) {
	defer bolt.SetApplyDelay(time.Hour)()
	ctx := context.Background()
	s, _ := bolttest.Open(t)
	l := shortener.Link{ID: "pend000001", URL: "https://pending.example/", MaxVisits: 2}
	if err := s.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, l); !errors.Is(err, shortener.ErrConflict) {
		t.Fatalf("second Create of a pending id = %v, want ErrConflict", err)
	}
	buf, got, err := s.AppendURL(ctx, nil, []byte(l.ID))
	if err != nil || string(buf) != l.URL || got.MaxVisits != 2 {
		t.Fatalf("AppendURL of a pending link = %q, %+v, %v", buf, got, err)
	}
	if _, err := s.VisitStats(ctx, l.ID); err != nil {
		t.Fatalf("VisitStats of a pending link: %v", err)
	}
	page, err := s.List(ctx, "", 10) // lists pending links too (by applying them)
	if err != nil || len(page.Links) != 1 || page.Links[0].ID != l.ID {
		t.Fatalf("List = %+v, %v", page, err)
	}
	l2 := shortener.Link{ID: "pend000002", URL: "https://pending.example/2"}
	if err := s.Create(ctx, l2); err != nil {
		t.Fatal(err)
	}
	if err := s.AddVisits(ctx, shortener.NewVisitBatch(shortener.VisitDelta{ID: l2.ID, Stats: shortener.VisitStats{Total: 1}})); err != nil {
		t.Fatal(err)
	}
	if err := s.Fold(); err != nil { // AddVisits applied the link: the fold finds it
		t.Fatal(err)
	}
	if st, err := s.VisitStats(ctx, l2.ID); err != nil || st.Total != 1 {
		t.Fatalf("a visit to a pending link: VisitStats = %+v, %v; want 1 visit", st, err)
	}
	if s.Pending() != 0 {
		t.Errorf("%d pending after AddVisits, want 0 (applied in its transaction)", s.Pending())
	}
}

// Concurrent creates of the same ids: exactly one of each succeeds, the
// others get ErrConflict, while applies run.
func TestConcurrentDuplicateCreates(t *testing.T) {
	defer bolt.SetApplyDelay(time.Millisecond)()
	s, _ := bolttest.Open(t)
	const ids = 300
	wins := make([]int, ids)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range ids {
				err := s.Create(context.Background(), shortener.Link{ID: fmt.Sprintf("dup%07d", i), URL: fmt.Sprintf("https://dup.example/%d", w)})
				switch {
				case err == nil:
					mu.Lock()
					wins[i]++
					mu.Unlock()
				case !errors.Is(err, shortener.ErrConflict):
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for i, n := range wins {
		if n != 1 {
			t.Fatalf("id %d created %d times", i, n)
		}
	}
}
