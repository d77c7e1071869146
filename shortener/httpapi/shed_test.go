package httpapi

import (
	"testing"
	"time"
)

// Shed requests are held for spread-out delays around the ShedDelay, so
// that a flood's connections, shed together, do not wake together.
func TestJitterSpreadsShedDelays(t *testing.T) {
	const d = 100 * time.Millisecond
	seen := map[time.Duration]bool{}
	var lo, hi int
	for range 1000 {
		j := jitter(d)
		if j < d/2 || j >= d*3/2 {
			t.Fatalf("jitter(%v) = %v, outside [%v, %v)", d, j, d/2, d*3/2)
		}
		seen[j] = true
		if j < d {
			lo++
		} else {
			hi++
		}
	}
	if len(seen) < 900 || lo < 400 || hi < 400 {
		t.Errorf("1000 delays: %d distinct, %d below %v and %d above; want them spread evenly", len(seen), lo, d, hi)
	}
}
