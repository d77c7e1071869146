package overload

import (
	"context"
	"math"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
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
		m.adjust(true, DefaultWindow)
	}
	if a.Load() != 32 || b.Load() != 1 {
		t.Fatalf("after 3 late windows: %d, %d; want 32, 1", a.Load(), b.Load())
	}
	for range 5 {
		m.adjust(true, DefaultWindow)
	}
	if a.Load() != 1 {
		t.Fatalf("after 8 late windows: %d; want 1 (never 0)", a.Load())
	}
	for range 10 {
		m.adjust(false, DefaultWindow)
	}
	if a.Load() != 11 || b.Load() != 5 {
		t.Fatalf("after 10 good windows: %d, %d; want 11, 5 (its maximum)", a.Load(), b.Load())
	}
	if m.Late() != 8 {
		t.Errorf("Late() = %d, want 8", m.Late())
	}
}

// With a target no schedule can meet, the real runtime metrics make every
// window late in which goroutines ran while our own work kept every P
// busy.
func TestStepReadsTheScheduler(t *testing.T) {
	defer spin(t)()
	m := NewMonitor(time.Nanosecond)
	l := m.Limit(64)
	m.Step() // the first sample only sets the baseline
	for range 6 {
		schedule()
		m.Step()
	}
	if l.Load() != 1 {
		t.Errorf("limit after 6 busy windows with goroutines waiting > 1ns: %d, want 1 (%d late, %d with idle Ps)", l.Load(), m.Late(), m.HostLate())
	}

	// Watched: only windows in which the watched work went on are late.
	m = NewMonitor(time.Nanosecond)
	l = m.Limit(64)
	var served uint64
	m.Watch(func() uint64 { return served })
	m.Step()
	for i := range 6 {
		schedule()
		if i%2 == 1 {
			served++
		}
		m.Step()
	}
	if l.Load() != 8 { // 64 (already its maximum), 32, 33, 16, 17, 8
		t.Errorf("limit after 3 idle and 3 watched late windows, alternating: %d, want 8", l.Load())
	}
}

// schedule makes goroutines wait to run for a window: the runtime times
// one schedule in 8, so it makes plenty.
func schedule() {
	time.Sleep(DefaultWindow) // deliberate: the next window starts with the goroutines below
	for range 64 {
		done := make(chan struct{})
		go close(done)
		<-done
	}
}

// spin keeps every P busy with work of this process until the returned
// function is called: the Ps are saturated, with no idle time.
func spin(t *testing.T) (stop func()) {
	t.Helper()
	var done atomic.Bool
	var wg sync.WaitGroup
	n := runtime.GOMAXPROCS(0)
	var started sync.WaitGroup
	started.Add(n)
	for range n {
		wg.Go(func() {
			started.Done()
			for !done.Load() {
			}
		})
	}
	started.Wait() // every P has left its idle time behind
	return func() { done.Store(true); wg.Wait() }
}

// A target no schedule misses: Run never finds a window late, however
// busy the Ps.
func TestRunWithinTarget(t *testing.T) {
	defer spin(t)()
	m := NewMonitor(time.Hour)
	l := m.Limit(64)
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

func TestCPUBusy(t *testing.T) {
	for _, tt := range []struct {
		cpu, wall time.Duration
		procs     int
		want      bool
	}{
		{8 * time.Millisecond, 10 * time.Millisecond, 1, true},
		{7 * time.Millisecond, 10 * time.Millisecond, 1, false},
		{16 * time.Millisecond, 10 * time.Millisecond, 2, true},
		{10 * time.Millisecond, 10 * time.Millisecond, 2, false}, // one of two cores
		{0, 10 * time.Millisecond, 1, false},                     // cannot tell
		{time.Millisecond, 0, 1, false},
	} {
		if got := cpuBusy(tt.cpu, tt.wall, tt.procs); got != tt.want {
			t.Errorf("cpuBusy(%v of %v, %d Ps) = %v, want %v", tt.cpu, tt.wall, tt.procs, got, tt.want)
		}
	}
}

func TestOwnQueue(t *testing.T) {
	for _, tt := range []struct {
		running, runnable uint64
		procs             int
		want              bool
	}{
		{2, 1, 2, true},
		{2, 0, 2, false}, // every P busy, nobody waits
		{1, 5, 2, false}, // an idle P: the runnable ones are about to run, or wait for a thread the host runs late
		{1, 1, 1, true},
		{0, 0, 1, false},
	} {
		if got := ownQueue(tt.running, tt.runnable, tt.procs); got != tt.want {
			t.Errorf("ownQueue(%d running, %d runnable, %d Ps) = %v, want %v", tt.running, tt.runnable, tt.procs, got, tt.want)
		}
	}
}

// Other processes keep every core busy while this one has little work:
// its goroutines wait to run (the target of 1 ns makes every window late
// by the latency alone), but for CPU the host did not give, not behind
// work of ours, and no window is late. With the signal of before (the
// scheduler's latency alone), every one was.
func TestHostContentionIsNotLate(t *testing.T) {
	hogs(t, 2*runtime.NumCPU())
	m := NewMonitor(time.Nanosecond)
	l := m.Limit(64)
	m.Step()
	for range 20 {
		schedule()
		m.Step()
	}
	if m.Late() != 0 || l.Load() != 64 {
		t.Errorf("%d of 20 windows late (limit %d) with Ps idle while other processes took the CPU", m.Late(), l.Load())
	}
	if m.HostLate() == 0 {
		t.Error("no window had goroutines waiting longer than 1 ns: the test shows nothing")
	}
}

// hogs starts n processes that spin until the test ends.
func hogs(t *testing.T, n int) {
	t.Helper()
	for range n {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHog$")
		cmd.Env = append(os.Environ(), "OVERLOAD_TEST_HOG=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
}

// TestHog is the process hogs starts: it spins on every P until killed,
// or until its parent is gone.
func TestHog(t *testing.T) {
	if os.Getenv("OVERLOAD_TEST_HOG") != "1" {
		t.Skip("a helper process of TestHostContentionIsNotLate")
	}
	parent := os.Getppid()
	go func() { // a hog outlives no test, even one killed
		for os.Getppid() == parent {
			// Polls: a parent's death sends a child no event it can wait on
			// (Pdeathsig follows the thread that forked it, not the process).
			time.Sleep(100 * time.Millisecond)
		}
		os.Exit(0)
	}()
	for range runtime.GOMAXPROCS(0) - 1 {
		go func() {
			//lint:ignore SA5002 a hog spins on purpose
			for {
			}
		}()
	}
	//lint:ignore SA5002 a hog spins on purpose
	for {
	}
}

func TestRateHalvesAndRegrows(t *testing.T) {
	var now time.Duration
	m := NewMonitor(time.Millisecond)
	m.UseClock(func() time.Duration { return now })
	r := m.Rate()
	allowed := func(n int) (ok int) {
		for range n {
			if r.Allow() {
				ok++
			}
		}
		return ok
	}
	if got := allowed(1000); got != 1000 || !math.IsInf(r.PerSecond(), 1) {
		t.Fatalf("before any late window: %d of 1000 allowed at %v/s, want all, unlimited", got, r.PerSecond())
	}
	// 1000 in a 10 ms late window: 100k/s were admitted; half of that.
	now += 10 * time.Millisecond
	m.adjust(true, 10*time.Millisecond)
	if got := r.PerSecond(); got != 50000 {
		t.Fatalf("rate after a late window: %v/s, want 50000 (half what was admitted)", got)
	}
	// A burst of 2 ms at the rate, then one per 20 µs.
	if got := allowed(1000); got != 100 {
		t.Errorf("burst: %d allowed, want 100", got)
	}
	now += time.Millisecond
	if got := allowed(1000); got != 50 {
		t.Errorf("1 ms later: %d allowed, want 50", got)
	}
	m.adjust(false, 10*time.Millisecond) // it refused some: it grows
	if got, want := r.PerSecond(), 50000*(1+rateIncrease); got != want {
		t.Errorf("rate after a good window that refused: %v/s, want %v", got, want)
	}
	m.adjust(false, 10*time.Millisecond) // it refused none
	if got, want := r.PerSecond(), 50000*(1+rateIncrease); got != want {
		t.Errorf("rate after a good window that refused nothing: %v/s, want it unchanged, %v", got, want)
	}
	// A late window in which fewer were admitted than the rate allows:
	// half of what was admitted.
	now += 10 * time.Millisecond
	if got := allowed(30); got != 30 {
		t.Fatalf("%d of 30 allowed", got)
	}
	m.adjust(true, 10*time.Millisecond)
	if got := r.PerSecond(); got != 1500 {
		t.Errorf("rate after a late window admitting 3000/s: %v/s, want 1500", got)
	}
	for range 20 {
		now += 10 * time.Millisecond
		allowed(1)
		m.adjust(true, 10*time.Millisecond)
	}
	if got := r.PerSecond(); got != minRate {
		t.Errorf("rate after many late windows: %v/s, want the floor %v", got, minRate)
	}
	now += time.Second
	if got := allowed(10); got != 1 {
		t.Errorf("at the floor, a second later: %d allowed at once, want 1 (the burst is at least 1)", got)
	}
}

func TestRateIdleInALateWindow(t *testing.T) {
	m := NewMonitor(time.Millisecond)
	m.UseClock(func() time.Duration { return 0 })
	r := m.Rate()
	m.adjust(true, DefaultWindow)
	if !math.IsInf(r.PerSecond(), 1) {
		t.Errorf("a class that admitted nothing was limited to %v/s by a late window", r.PerSecond())
	}
}
