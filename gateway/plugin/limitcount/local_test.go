package limitcount

import (
	"fmt"
	"testing"
	"time"
)

// A fixed window starts at a key's first request; requests over the limit
// still count (as resty.limit.count) and the next window starts fresh.
func TestLocalWindow(t *testing.T) {
	s := newLocalStore()
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at        time.Duration
		remaining int64
		reset     time.Duration
	}{
		{0, 2, 10 * time.Second},
		{3 * time.Second, 1, 7 * time.Second},
		{4 * time.Second, 0, 6 * time.Second},
		{5 * time.Second, -1, 5 * time.Second},
		{9 * time.Second, -2, time.Second},
		{10 * time.Second, 2, 10 * time.Second}, // new window from this request
		{11 * time.Second, 1, 9 * time.Second},
	}
	for _, st := range steps {
		rem, reset := s.incoming("k", 3, 10*time.Second, t0.Add(st.at))
		if rem != st.remaining || reset != st.reset {
			t.Errorf("at +%v: remaining %d reset %v, want %d %v", st.at, rem, reset, st.remaining, st.reset)
		}
	}
	if rem, _ := s.incoming("other", 3, 10*time.Second, t0); rem != 2 {
		t.Errorf("keys share a counter: %d", rem)
	}
}

func TestLocalSweep(t *testing.T) {
	s := newLocalStore()
	t0 := time.Unix(1000, 0)
	for i := range 1000 {
		s.incoming(fmt.Sprint("k", i), 5, time.Second, t0)
	}
	// Expired windows go as new keys arrive in their shard.
	for i := range 1000 {
		s.incoming(fmt.Sprint("late", i), 5, time.Second, t0.Add(time.Minute))
	}
	if n := s.m.Len(); n != 1000 {
		t.Errorf("%d windows kept, want the 1000 live ones", s.m.Len())
	}
}

func BenchmarkRateLimitAllow(b *testing.B) {
	s := newLocalStore()
	now := time.Now()
	key := []byte("routes/1:9b2c1e4a:127.0.0.1")
	b.ReportAllocs()
	for b.Loop() {
		s.incoming(b2s(key), 2000000000000, time.Minute, now)
	}
}
