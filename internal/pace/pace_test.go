package pace

import (
	"runtime"
	"testing"
	"time"
)

// On one P, work in pieces of each size pauses for twice as long as it
// worked, every Slice of work or more, at most MaxPause at a time; with
// two Ps it never pauses. The clock is the test's: it moves by a piece
// before each look and by each pause.
func TestStep(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, tc := range []struct {
		piece      time.Duration
		procs      int
		wantPauses int
		wantShare  float64 // of the time, paused (at least)
	}{
		{100 * time.Microsecond, 1, 100, 0.64}, // a pause every 10 pieces
		{time.Millisecond, 1, 1000, 0.64},      // a pause every piece
		{20 * time.Millisecond, 1, 1000, 0.33}, // each pause bounded by MaxPause: a third
		{100 * time.Microsecond, 2, 0, 0},
	} {
		runtime.GOMAXPROCS(tc.procs)
		var clock, paused time.Duration
		pauses := 0
		now := func() time.Time { return time.Unix(0, 0).Add(clock) }
		p := New(func(d time.Duration) {
			if d > MaxPause {
				t.Errorf("piece %v: paused %v, more than MaxPause", tc.piece, d)
			}
			clock += d
			paused += d
			pauses++
		}, now)
		for range 1000 {
			clock += tc.piece
			p.Step()
		}
		share := float64(paused) / float64(clock)
		if pauses < tc.wantPauses*9/10 || pauses > tc.wantPauses*11/10 || share < tc.wantShare {
			t.Errorf("pieces of %v on %d P: %d pauses (want about %d), %.0f %% of the time paused (want at least %.0f %%)",
				tc.piece, tc.procs, pauses, tc.wantPauses, 100*share, 100*tc.wantShare)
		}
	}
}
