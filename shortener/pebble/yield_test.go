package pebble

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/linkgate/linkgate/shortener"
)

// TestBackgroundWritesYield: with a single P, a memtable flush and a
// compaction pause for about twice as long as they work, so they have at
// most a third of the P; the write-ahead log never pauses; with more Ps
// nothing pauses. The clock is the test's: it moves by step at each look
// (the work between two writes) and by each pause.
func TestBackgroundWritesYield(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const step = 100 * time.Microsecond
	var mu sync.Mutex
	var clock, paused time.Duration // the test clock, the time paused on it
	var pauses int
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock += step
		return time.Unix(0, 0).Add(clock)
	}
	pause := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		clock += d
		paused += d
		pauses++
	}
	// share returns the part of the clock's time since (clock, paused)
	// spent paused.
	share := func(c0, p0 time.Duration) float64 {
		mu.Lock()
		defer mu.Unlock()
		return float64(paused-p0) / float64(clock-c0)
	}
	mark := func() (time.Duration, time.Duration, int) {
		mu.Lock()
		defer mu.Unlock()
		return clock, paused, pauses
	}
	s, err := Open("db", Options{FS: vfs.NewMem(), NoIndex: true, MinFreeBytes: -1, pause: pause, now: now})
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
	// want is the least share of a flush's or compaction's time paused:
	// 2/3 but for the look after each pause and the last stretch.
	const size, want = 1 << 20, 0.55
	fill(size)
	if _, _, n := mark(); n != 0 {
		t.Fatalf("%d pauses writing the write-ahead log, want none", n)
	}
	c0, p0, n0 := mark()
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, _, n := mark(); n-n0 < 4 {
		t.Fatalf("a flush of %d bytes paused %d times, want more", size, n-n0)
	}
	if got := share(c0, p0); got < want {
		t.Fatalf("a flush of %d bytes paused %.0f %% of its time, want at least %.0f %%", size, 100*got, 100*want)
	}
	fill(size)
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	c0, p0, n0 = mark()
	if err := s.db.Compact(t.Context(), []byte{kindStats}, []byte{kindStats + 1}, true); err != nil {
		t.Fatal(err)
	}
	if _, _, n := mark(); n-n0 < 8 {
		t.Fatalf("a compaction of %d bytes paused %d times, want more", 2*size, n-n0)
	}
	if got := share(c0, p0); got < want {
		t.Fatalf("a compaction of %d bytes paused %.0f %% of its time, want at least %.0f %%", 2*size, 100*got, 100*want)
	}

	runtime.GOMAXPROCS(2)
	_, _, n0 = mark()
	fill(size)
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, _, n := mark(); n != n0 {
		t.Fatalf("%d pauses with two Ps, want none", n-n0)
	}
}

// TestVisitFlushPaced: with a single P, a visit batch of several chunks
// pauses between its commits once a millisecond of work has passed (the
// clock moves 2 ms at each look), twice as long as it worked.
func TestVisitFlushPaced(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var mu sync.Mutex
	var clock time.Duration
	var pauses []time.Duration
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock += 2 * time.Millisecond
		return time.Unix(0, 0).Add(clock)
	}
	pause := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		clock += d
		pauses = append(pauses, d)
	}
	s, err := Open("db", Options{FS: vfs.NewMem(), NoIndex: true, MinFreeBytes: -1, pause: pause, now: now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const chunks = 3
	recs := make([]shortener.LinkRecord, chunks*visitChunk)
	deltas := make([]shortener.VisitDelta, len(recs))
	for i := range recs {
		recs[i].Link = shortener.Link{ID: fmt.Sprintf("paced%05d", i), URL: "https://paced.example/"}
		deltas[i] = shortener.VisitDelta{ID: recs[i].Link.ID, Stats: shortener.VisitStats{Total: 1}}
	}
	if _, err := s.ImportRecords(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	// The links and their index records flushed and compacted now, not
	// during the visits' batch: only its own pauses are counted.
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	pauses = nil
	mu.Unlock()
	if err := s.AddVisits(t.Context(), shortener.NewVisitBatch(deltas...)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(pauses) != chunks-1 {
		t.Fatalf("a batch of %d chunks paused %d times (%v), want %d", chunks, len(pauses), pauses, chunks-1)
	}
	for _, d := range pauses {
		if d != 4*time.Millisecond {
			t.Fatalf("paused %v after 2 ms of work, want 4 ms", d)
		}
	}
}
