package overload

import (
	"context"
	"math"
	"testing"
	"time"
)

func TestLateWindow(t *testing.T) {
	buckets := []float64{math.Inf(-1), 0, 100e-6, 250e-6, 1e-3, math.Inf(1)} // lower bounds of 5 counts
	tests := []struct {
		name   string
		counts []uint64 // since prev = 0
		want   bool
	}{
		{"nothing scheduled", []uint64{0, 0, 0, 0, 0}, false},
		{"all fast", []uint64{0, 1000, 50, 0, 0}, false},
		{"1% late is allowed", []uint64{0, 990, 0, 10, 0}, false},
		{"over 1% late", []uint64{0, 980, 0, 15, 5}, true},
		{"below target does not count", []uint64{0, 0, 1000, 0, 0}, false},
		{"all late", []uint64{0, 0, 0, 0, 3}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev := make([]uint64, len(tt.counts))
			if got := lateWindow(buckets, tt.counts, prev, 250e-6); got != tt.want {
				t.Errorf("lateWindow = %v, want %v", got, tt.want)
			}
			// Only the difference from the previous sample counts.
			if got := lateWindow(buckets, tt.counts, tt.counts, 250e-6); got {
				t.Error("an unchanged histogram is a late window")
			}
		})
	}
}

func TestLimitHalvesAndRegrows(t *testing.T) {
	m := NewMonitor(time.Millisecond)
	a, b := m.Limit(256), m.Limit(5)
	for range 3 {
		m.adjust(true)
	}
	if a.Load() != 32 || b.Load() != 1 {
		t.Fatalf("after 3 late windows: %d, %d; want 32, 1", a.Load(), b.Load())
	}
	for range 5 {
		m.adjust(true)
	}
	if a.Load() != 1 {
		t.Fatalf("after 8 late windows: %d; want 1 (never 0)", a.Load())
	}
	for range 10 {
		m.adjust(false)
	}
	if a.Load() != 11 || b.Load() != 5 {
		t.Fatalf("after 10 good windows: %d, %d; want 11, 5 (its maximum)", a.Load(), b.Load())
	}
	if m.Late() != 8 {
		t.Errorf("Late() = %d, want 8", m.Late())
	}
}

// With a target no schedule can meet, the real runtime metric makes every
// window in which goroutines ran late.
func TestStepReadsTheScheduler(t *testing.T) {
	m := NewMonitor(time.Nanosecond)
	l := m.Limit(64)
	m.Step() // the first sample only sets the baseline
	for range 6 {
		// The runtime times one schedule in 8: make plenty.
		for range 64 {
			done := make(chan struct{})
			go close(done)
			<-done
		}
		m.Step()
	}
	if l.Load() != 1 {
		t.Errorf("limit after 6 windows with goroutines waiting > 1ns: %d, want 1", l.Load())
	}

	// Watched: only windows in which the watched work went on are late.
	m = NewMonitor(time.Nanosecond)
	l = m.Limit(64)
	var served uint64
	m.Watch(func() uint64 { return served })
	m.Step()
	for i := range 6 {
		for range 64 {
			done := make(chan struct{})
			go close(done)
			<-done
		}
		if i%2 == 1 {
			served++
		}
		m.Step()
	}
	if l.Load() != 8 { // 64 (already its maximum), 32, 33, 16, 17, 8
		t.Errorf("limit after 3 idle and 3 watched late windows, alternating: %d, want 8", l.Load())
	}

	m = NewMonitor(time.Hour)
	l = m.Limit(64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx, time.Millisecond); close(done) }()
	for range 64 {
		ran := make(chan struct{})
		go close(ran)
		<-ran
	}
	cancel()
	<-done
	if l.Load() != 64 || m.Late() != 0 {
		t.Errorf("no schedule waits an hour, yet the limit is %d after %d late windows", l.Load(), m.Late())
	}
}
