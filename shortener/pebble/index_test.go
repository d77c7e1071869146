//go:build linux

package pebble

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
)

// The read index against a map: random puts, replacements and deletes,
// through table growth, tombstones and arena compactions (small chunks),
// with concurrent readers (getting, and touching batches of present and
// absent ids) that never see a torn or foreign value, while
// collections unmap the replaced tables (a reader using an unmapped one
// would fault); at the end only the current table is still mapped.
func TestIndexModel(t *testing.T) {
	old := chunkShift
	chunkShift = 12 // 4 KiB chunks: many chunks, compactions early
	defer func() { chunkShift = old }()
	for _, dir := range []string{"", t.TempDir()} {
		ix, err := newIndex(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		model := map[string]string{}
		rng := rand.New(rand.NewPCG(1, uint64(len(dir))))
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for r := range 2 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					id := fmt.Sprintf("id%05d", (i*7+r)%3000)
					if r == 1 { // touch a batch, as a visit flush does
						ix.touch([]string{id, "id99999", id + "x"}, make([]uint64, 3))
					}
					if v := ix.get([]byte(id)); v != nil && string(v[:len(id)]) != id {
						t.Errorf("get(%s) = %q: another id's value", id, v)
						return
					}
				}
			})
		}
		for i := range 60000 {
			if i%10000 == 0 {
				runtime.GC()
			}
			id := fmt.Sprintf("id%05d", rng.IntN(3000))
			switch rng.IntN(4) {
			case 0:
				ix.delete([]byte(id))
				delete(model, id)
			default:
				v := fmt.Sprintf("%s=%d%s", id, i, string(make([]byte, rng.IntN(200))))
				if err := ix.put([]byte(id), []byte(v)); err != nil {
					t.Fatal(err)
				}
				model[id] = v
			}
		}
		close(stop)
		wg.Wait()
		for i := range 3000 {
			id := fmt.Sprintf("id%05d", i)
			got := ix.get([]byte(id))
			want, ok := model[id]
			if ok != (got != nil) || ok && string(got) != want {
				t.Fatalf("get(%s) = %q, want %q (present %v)", id, got, want, ok)
			}
		}
		if ix.n != len(model) {
			t.Errorf("%d live entries counted, model has %d", ix.n, len(model))
		}
		if len(ix.retired) == 0 {
			t.Error("no compaction ran")
		}
		for i := 0; i < 100 && ix.tables.Load() != 1; i++ {
			runtime.GC() // cleanups run after a collection finds a table unreachable
			runtime.Gosched()
		}
		if n := ix.tables.Load(); n != 1 {
			t.Errorf("%d tables mapped, want only the current one", n)
		}
		ix.close()
	}
}

// BenchmarkIndexGet: a lookup among a million ids, in random order, the
// arena in a file as a store has it.
func BenchmarkIndexGet(b *testing.B) {
	ix, err := newIndex(b.TempDir(), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer ix.close()
	ids := make([][]byte, 1_000_000)
	for i := range ids {
		ids[i] = fmt.Appendf(nil, "%010d", rand.Int64N(1e10))
		ix.put(ids[i], []byte("https://www.example.com/articles/2026/0000000/a-typical-path?utm_source=x"))
	}
	perm := rand.Perm(len(ids))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if ix.get(ids[perm[i%len(perm)]]) == nil {
			b.Fatal("missing")
		}
	}
}

// BenchmarkIndexGetBatch: what a visit flush's existence checks cost per
// link, lookups among a million ids in random order, made in batches of
// visitChunk; "touch" touches each batch first (index.touch).
func BenchmarkIndexGetBatch(b *testing.B) {
	ix, err := newIndex(b.TempDir(), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer ix.close()
	ids := make([]string, 1_000_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("%010d", rand.Int64N(1e10))
		ix.put([]byte(ids[i]), []byte("https://www.example.com/articles/2026/0000000/a-typical-path?utm_source=x"))
	}
	batch := make([]string, visitChunk)
	hs := make([]uint64, visitChunk)
	for _, touch := range []bool{false, true} {
		b.Run(fmt.Sprintf("touch=%v", touch), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				for i := range batch {
					batch[i] = ids[rand.IntN(len(ids))]
				}
				b.StartTimer()
				if touch {
					ix.touch(batch, hs)
				}
				for _, id := range batch {
					if ix.get([]byte(id)) == nil {
						b.Fatal("missing")
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/lookup")
		})
	}
}
