package pebble

import (
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestBackgroundWritesYield: with a single P, a memtable flush and a
// compaction pause after every yieldBytes bytes they write, and the
// write-ahead log never does; with more Ps nothing pauses.
func TestBackgroundWritesYield(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var pauses atomic.Int64
	s, err := Open("db", Options{FS: vfs.NewMem(), NoIndex: true, MinFreeBytes: -1, pause: func() { pauses.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rnd := rand.New(rand.NewPCG(1, 2))
	// fill writes n bytes of incompressible values under random keys, in
	// the write-ahead log and the memtable.
	fill := func(n int) {
		t.Helper()
		b := s.db.NewBatch()
		for written := 0; written < n; written += 1024 {
			k, v := make([]byte, 12), make([]byte, 1024)
			for i := range k {
				k[i] = 'a' + byte(rnd.IntN(26))
			}
			for i := range v {
				v[i] = byte(rnd.Uint32())
			}
			if err := b.Set(append([]byte{kindStats, 0}, k...), v, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(pebbledb.Sync); err != nil {
			t.Fatal(err)
		}
	}
	const size = 1 << 20 // 16 × yieldBytes
	fill(size)
	if n := pauses.Load(); n != 0 {
		t.Fatalf("%d pauses writing the write-ahead log, want none", n)
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	flushed := pauses.Load()
	if flushed < size/yieldBytes/2 {
		t.Fatalf("a flush of %d bytes paused %d times, want about %d", size, flushed, size/yieldBytes)
	}
	fill(size)
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	before := pauses.Load()
	if err := s.db.Compact(t.Context(), []byte{kindStats}, []byte{kindStats + 1}, true); err != nil {
		t.Fatal(err)
	}
	if n := pauses.Load() - before; n < 2*size/yieldBytes/2 {
		t.Fatalf("a compaction of %d bytes paused %d times, want about %d", 2*size, n, 2*size/yieldBytes)
	}

	runtime.GOMAXPROCS(2)
	before = pauses.Load()
	fill(size)
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := pauses.Load() - before; n != 0 {
		t.Fatalf("%d pauses with two Ps, want none", n)
	}
}
