// Package overload adapts in-flight limits to the CPU the process gets.
//
// A server whose core is saturated serves its connections round robin: a
// cheap request (a redirect, ~2 µs) waits behind every expensive one that
// is runnable (a create, ~60 µs; a QR image). A fixed in-flight budget does
// not prevent that: creates spend most of their time waiting for a synced
// commit, so 256 of them in flight are far more than one core can decode,
// commit and answer at the rate they arrive, and the budget never fills
// while the redirects' latency grows a hundredfold. The signal that does
// show it is the Go scheduler's own latency (runtime/metrics
// /sched/latencies:seconds: how long goroutines stay runnable before they
// run), whatever takes the CPU — this process's own work or other
// processes on the same core.
//
// A Monitor samples it every window. A window in which more than 1 % of
// the goroutines that were scheduled waited longer than the target delay,
// and in which the work to protect went on (Watch: redirects were
// served), is late: every Limit it made is halved (down to 1); any other
// window raises each by one (up to its maximum) — additive increase,
// multiplicative decrease, as TCP does with its window. Requests over a
// Limit are refused at once by their caller, which costs a few
// microseconds instead of the full request, and never for the classes
// that must stay fast, which have no Limit. With nothing to protect
// (creates alone), a saturated core is no reason to refuse work: the
// limits stay where they are. A Rate (rate.go) does the same for the rate
// at which a class's requests start, which is what bounds their CPU.
package overload

import (
	"context"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultWindow is how often a Monitor samples the scheduler.
const DefaultWindow = 10 * time.Millisecond

// lateShare is the share of schedules in a window allowed to wait longer
// than the target delay.
const lateShare = 0.01

const schedLatencies = "/sched/latencies:seconds"

// Monitor watches the scheduler's latency and adjusts its Limits.
type Monitor struct {
	target float64 // seconds
	mu     sync.Mutex
	limits []*Limit
	rates  []*Rate
	clock  func() time.Duration // monotonic
	at     time.Duration        // clock at the previous Step
	sample [1]metrics.Sample
	prev   []uint64
	late   atomic.Int64 // late windows so far
	// watched counts the work to protect (Watch); nil: always.
	watched     func() uint64
	prevWatched uint64
}

// NewMonitor returns a Monitor whose windows are late when more than 1 %
// of schedules waited longer than target.
func NewMonitor(target time.Duration) *Monitor {
	base := time.Now()
	m := &Monitor{target: target.Seconds(), clock: func() time.Duration { return time.Since(base) }}
	m.sample[0].Name = schedLatencies
	return m
}

// UseClock makes the Monitor and its Rates read time from now (monotonic,
// from any origin) instead of the system clock. Call it before Rate.
func (m *Monitor) UseClock(now func() time.Duration) {
	m.mu.Lock()
	m.clock = now
	m.at = now()
	m.mu.Unlock()
}

// Watch makes only windows in which done's count grew late: the limits
// give way to the work done counts, not to themselves. Call it before Run.
func (m *Monitor) Watch(done func() uint64) {
	m.mu.Lock()
	m.watched = done
	m.mu.Unlock()
}

// Limit is an in-flight limit between 1 and a maximum.
type Limit struct {
	cur atomic.Int64
	max int64
}

// Limit returns a new limit that starts at max.
func (m *Monitor) Limit(max int64) *Limit {
	l := &Limit{max: max}
	l.cur.Store(max)
	m.mu.Lock()
	m.limits = append(m.limits, l)
	m.mu.Unlock()
	return l
}

// Load returns the limit now.
func (l *Limit) Load() int64 { return l.cur.Load() }

// Late returns the number of late windows so far.
func (m *Monitor) Late() int64 { return m.late.Load() }

// Run samples the scheduler every window until ctx is done.
func (m *Monitor) Run(ctx context.Context, window time.Duration) {
	t := time.NewTicker(window)
	defer t.Stop()
	m.Step()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.Step()
		}
	}
}

// Step takes one sample and adjusts the limits by what happened since the
// previous one.
func (m *Monitor) Step() {
	metrics.Read(m.sample[:])
	if m.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return // not this runtime's metric: limits stay at their maximum
	}
	h := m.sample[0].Value.Float64Histogram()
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock()
	elapsed := now - m.at
	m.at = now
	if len(m.prev) != len(h.Counts) {
		m.prev = append(m.prev[:0], h.Counts...)
		return
	}
	late := lateWindow(h.Buckets, h.Counts, m.prev, m.target)
	if m.watched != nil {
		n := m.watched()
		late = late && n != m.prevWatched
		m.prevWatched = n
	}
	m.adjust(late, elapsed)
	copy(m.prev, h.Counts)
}

// lateWindow reports whether more than lateShare of the schedules counted
// between prev and counts waited longer than target seconds (buckets[i]
// is the lower bound of counts[i]).
func lateWindow(buckets []float64, counts, prev []uint64, target float64) bool {
	var all, late uint64
	for i, c := range counts {
		d := c - prev[i]
		all += d
		if buckets[i] >= target {
			late += d
		}
	}
	return all > 0 && float64(late) > lateShare*float64(all)
}

// adjust halves every limit after a late window, else raises it by one,
// and adjusts every Rate.
func (m *Monitor) adjust(late bool, elapsed time.Duration) {
	for _, r := range m.rates {
		r.adjust(late, elapsed)
	}
	if late {
		m.late.Add(1)
	}
	for _, l := range m.limits {
		n := l.cur.Load()
		if late {
			n = max(1, n/2)
		} else {
			n = min(l.max, n+1)
		}
		l.cur.Store(n)
	}
}
