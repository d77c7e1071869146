package httpapi

import (
	"testing"
	"time"
)

// A visit's time is the request's monotonic start on a wall-clock reading
// at most a second old: a step of the system clock shows within a second.
func TestWallClock(t *testing.T) {
	var c wallClock
	if d := time.Until(c.at(monotonic())).Abs(); d > time.Second {
		t.Fatalf("at(now) is %v off the wall clock", d)
	}
	r := c.last.Load()
	stepped := &wallReading{mono: r.mono, wall: r.wall.Add(-time.Hour)} // the clock was an hour behind
	c.last.Store(stepped)
	if got, want := c.at(r.mono+time.Second/2), stepped.wall.Add(time.Second/2); !got.Equal(want) {
		t.Errorf("within a second of the reading: %v, want %v (no new reading)", got, want)
	}
	if d := time.Until(c.at(monotonic() + time.Second)).Abs(); d > 2*time.Second {
		t.Errorf("a second after the reading: %v off the wall clock, want a new reading", d)
	}
}
