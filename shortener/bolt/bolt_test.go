package bolt_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/bolt"
	"github.com/linkgate/linkgate/shortener/bolt/bolttest"
	"github.com/linkgate/linkgate/shortener/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) shortener.Store {
		s, _ := bolttest.Open(t)
		return s
	})
}

func TestReopenKeepsLinks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "links.db")
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := shortener.Link{ID: "reopen0001", URL: "https://r.example/", CreatedAt: time.Unix(1700000000, 0).UTC(),
		ExpiresAt: time.Unix(1900000000, 0).UTC(), MaxVisits: 7, Visits: 2}
	if err := s.Create(ctx, want); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Get(ctx, want.ID)
	if err != nil || !storetest.Equal(got, want) {
		t.Fatalf("after reopen: %+v, %v; want %+v", got, err, want)
	}
}

func TestOpenLockedFails(t *testing.T) {
	_, path := bolttest.Open(t)
	start := time.Now()
	_, err := bolt.Open(path)
	if err == nil {
		t.Fatal("second Open of a held file succeeded")
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("second Open took %v", time.Since(start))
	}
}

func TestClosedStoreFailsCleanly(t *testing.T) {
	s, err := bolt.Open(filepath.Join(t.TempDir(), "links.db"))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	ctx := context.Background()
	if err := s.Ping(ctx); !errors.Is(err, shortener.ErrUnavailable) {
		t.Errorf("Ping after Close = %v, want ErrUnavailable", err)
	}
	if _, err := s.Get(ctx, "x"); err == nil {
		t.Error("Get after Close succeeded")
	}
}

// BenchmarkGet measures a point read, the store half of the redirect path.
func BenchmarkGet(b *testing.B) {
	s, _ := bolttest.Open(b)
	ctx := context.Background()
	ids := make([]string, 10000)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench%05d", i)
		if err := s.Create(ctx, shortener.Link{ID: ids[i], URL: "https://bench.example/some/path?q=" + ids[i]}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := s.Get(ctx, ids[i%len(ids)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateParallel measures durable creates with 64 concurrent
// writers sharing group commits (each op is one fsynced create).
func BenchmarkCreateParallel(b *testing.B) {
	s, _ := bolttest.Open(b)
	ctx := context.Background()
	b.ReportAllocs()
	var mu sync.Mutex
	n := 0
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			mu.Lock()
			n++
			id := fmt.Sprintf("c%09d", n)
			mu.Unlock()
			if err := s.Create(ctx, shortener.Link{ID: id, URL: "https://create.example/" + id}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// Reads share snapshots; a read that starts after a create or delete has
// returned must see it, however recently the snapshot was taken.
func TestReadsSeeCommittedWrites(t *testing.T) {
	s, _ := bolttest.Open(t)
	ctx := context.Background()
	for i := range 300 {
		id := fmt.Sprintf("rw%08d", i)
		if _, err := s.Get(ctx, id); !errors.Is(err, shortener.ErrNotFound) {
			t.Fatalf("Get before create: %v", err)
		}
		if err := s.Create(ctx, shortener.Link{ID: id, URL: "https://rw.example/"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, id); err != nil {
			t.Fatalf("Get right after create: %v", err)
		}
		if i%3 == 0 {
			if err := s.Delete(ctx, id); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.AppendURL(ctx, nil, []byte(id)); !errors.Is(err, shortener.ErrNotFound) {
				t.Fatalf("AppendURL right after delete: %v", err)
			}
		}
	}
}

// Concurrent readers and writers that grow the file (forcing remaps of the
// memory map) neither deadlock nor read stale or torn values.
func TestConcurrentReadsDuringGrowth(t *testing.T) {
	s, _ := bolttest.Open(t)
	ctx := context.Background()
	if err := s.Create(ctx, shortener.Link{ID: "stable0001", URL: "https://stable.example/"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				id := fmt.Sprintf("g%02d%07d", w, i)
				big := fmt.Sprintf("https://grow.example/%0500d", i)
				if err := s.Create(ctx, shortener.Link{ID: id, URL: big}); err != nil {
					t.Error(err)
					return
				}
				got, err := s.Get(ctx, id)
				if err != nil || got.URL != big {
					t.Errorf("read own write %s: %v", id, err)
					return
				}
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			var buf []byte
			for time.Now().Before(deadline) {
				var err error
				buf, _, err = s.AppendURL(ctx, buf[:0], []byte("stable0001"))
				if err != nil || string(buf) != "https://stable.example/" {
					t.Errorf("AppendURL = %q, %v", buf, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkAppendURL(b *testing.B) {
	s, _ := bolttest.Open(b)
	ctx := context.Background()
	ids := make([][]byte, 10000)
	for i := range ids {
		ids[i] = fmt.Appendf(nil, "bench%05d", i)
		if err := s.Create(ctx, shortener.Link{ID: string(ids[i]), URL: "https://bench.example/some/path?q=" + string(ids[i])}); err != nil {
			b.Fatal(err)
		}
	}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		var err error
		if buf, _, err = s.AppendURL(ctx, buf[:0], ids[i%len(ids)]); err != nil {
			b.Fatal(err)
		}
	}
}

func TestImport(t *testing.T) {
	s, _ := bolttest.Open(t)
	ctx := context.Background()
	if err := s.Create(ctx, shortener.Link{ID: "exists0001", URL: "https://old.example/"}); err != nil {
		t.Fatal(err)
	}
	n, err := s.Import(ctx, []shortener.Link{
		{ID: "import0001", URL: "https://a.example/"},
		{ID: "exists0001", URL: "https://new.example/"},
		{ID: "import0002", URL: "https://b.example/"},
		{ID: "import0001", URL: "https://dup.example/"},
		{ID: "", URL: "https://noid.example/"},
	})
	if err != nil || n != 2 {
		t.Fatalf("Import = %d, %v; want 2 stored", n, err)
	}
	for id, want := range map[string]string{"import0001": "https://a.example/", "import0002": "https://b.example/", "exists0001": "https://old.example/"} {
		if l, err := s.Get(ctx, id); err != nil || l.URL != want {
			t.Errorf("Get(%s) = %q, %v; want %q", id, l.URL, err, want)
		}
	}
}

// BenchmarkAppendURL1M is the redirect lookup over a store of 1,000,000
// links read in random order: the B+tree search then misses the CPU cache
// at almost every level (preloading takes ~15 s).
func BenchmarkAppendURL1M(b *testing.B) {
	s, _ := bolttest.Open(b)
	ctx := context.Background()
	const n = 1_000_000
	ids := make([][]byte, 0, n)
	batch := make([]shortener.Link, 0, 20_000)
	for len(ids) < n {
		batch = batch[:0]
		for range cap(batch) {
			id, err := shortener.NewID()
			if err != nil {
				b.Fatal(err)
			}
			batch = append(batch, shortener.Link{ID: id, URL: "https://www.example.com/articles/2026/" + id + "/a-typical-path?utm_source=x"})
			ids = append(ids, []byte(id))
		}
		if _, err := s.Import(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		var err error
		if buf, _, err = s.AppendURL(ctx, buf[:0], ids[(i*7919)%n]); err != nil {
			b.Fatal(err)
		}
	}
}
