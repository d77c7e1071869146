// Package overload sheds the work that overload requires shedding, and
// nothing more.
//
// A server whose CPU is saturated serves its connections round robin: a
// cheap request (a redirect, ~2 µs) waits behind every expensive one that
// is runnable (a create, ~60 µs; a QR image). A fixed in-flight budget does
// not prevent that: creates spend most of their time waiting for a synced
// commit, so 256 of them in flight are far more than one core can decode,
// commit and answer at the rate they arrive, and the budget never fills
// while the redirects' latency grows a hundredfold. So the classes that
// crowd the redirects out (creates, QR codes and statistics) get limits
// that adapt to a signal of overload.
//
// # Which signal
//
// Three well-known controllers were candidates:
//
//   - Envoy's adaptive concurrency filter (gradient controller) samples
//     request latencies, compares them with a minimum it re-measures by
//     dropping the limit to a few requests now and then, and sets the
//     limit to limit × minRTT/sampleRTT plus headroom.
//   - Netflix's concurrency-limits (gradient2, Vegas) do the same from a
//     long-term against a short-term average (gradient2) or from the
//     queue the latency implies, limit × (1 − minRTT/RTT) (Vegas).
//   - CoDel (RFC 8289) looks at the sojourn time of the server's own
//     queue, and acts only when its minimum over an interval stays above
//     a target: a standing queue, not a burst.
//
// Latency gradients fit a service whose latency is its queue. Here the
// latency of the class to limit is mostly a synced commit, which does not
// grow with the CPU the redirects lose, and the latency of the redirects
// grows just as much when the host takes the CPU (other processes, a
// container's cpu.max quota, steal time) as when our own creates take
// it. Shedding for the first helps nobody: the host's CPU does not come
// back when creates are refused. Both gradients measure the wrong thing
// here, and both must probe their minimum by limiting, which refuses
// requests on an idle server.
//
// CoDel's principle does fit: act on the sojourn time of our own queue.
// The Go scheduler's run queues are that queue: /sched/latencies:seconds
// is how long goroutines stayed runnable before they ran. But it counts
// two waits alike: a goroutine waiting because every P runs other
// goroutines of ours (our queue), and one waiting because its thread is
// not on a CPU (the host's). The runtime tells them apart through its Ps:
// a goroutine only queues behind our own work while every P is running
// one (an idle P is woken, or spins, for every goroutine that becomes
// runnable). So a window is late only if both hold:
//
//   - more than 1 % of the goroutines scheduled in it waited longer than
//     the target delay (the scheduler's latency), and
//   - our own work kept the Ps busy: the process used at least 80 % of
//     GOMAXPROCS cores of CPU time in the window (getrusage), or, at its
//     end, every P runs a goroutine and more are runnable
//     (/sched/goroutines/running:goroutines and runnable:goroutines;
//     this catches a queue of ours while the host takes CPU too). A
//     process that the host starves of CPU, or that a quota throttles,
//     with little work of its own uses little CPU and has idle Ps
//     however late its goroutines run.
//
// (The runtime's idle P time, /cpu/classes/idle:cpu-seconds, would say
// it better, but it is only updated at each garbage collection. The queue
// at one instant alone misses much: with one P, goroutines whose sockets
// became readable are not runnable until the busy P polls the network.)
//
// And it is late only while the work to protect went on (Watch:
// redirects were served): creates alone are no reason to refuse creates.
//
// # What it does
//
// A Monitor samples those every window. After a late window every Limit
// it made is halved (down to 1); any other window raises each by one (up
// to its maximum): additive increase, multiplicative decrease, as TCP
// does with its window. A Rate (rate.go) does the same for the rate at
// which a class's requests start, which is what bounds their CPU.
// Requests over a Limit or a Rate are refused at once by their caller,
// which costs a few microseconds instead of the full request, and never
// for the classes that must stay fast, which have no Limit.
//
// The caller keeps a floor (DefaultFloor): while a class has fewer
// requests in flight than it, none is refused, whatever the Limit and
// the Rate say. A lone client sending one request at a time never is:
// sequential requests cannot queue behind each other, and a floor of
// 2 × GOMAXPROCS keeps every P busy. Envoy's filter (min_concurrency) and
// concurrency-limits (minLimit) have one for the same reason.
package overload

import (
	"context"
	"runtime"
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

// DefaultFloor is the requests of a class in flight below which none is
// refused: two per P, so every P has one to run and one to take up.
func DefaultFloor() int { return 2 * runtime.GOMAXPROCS(0) }

const (
	schedLatencies = "/sched/latencies:seconds"
	running        = "/sched/goroutines/running:goroutines"
	runnable       = "/sched/goroutines/runnable:goroutines"
)

// Monitor watches the scheduler's latency and its Ps, and adjusts its
// Limits and Rates.
type Monitor struct {
	target float64 // seconds
	mu     sync.Mutex
	limits []*Limit
	rates  []*Rate
	clock  func() time.Duration // monotonic
	at     time.Duration        // clock at the previous Step
	sample [3]metrics.Sample    // schedLatencies, running, runnable
	prev   []uint64
	// process CPU time and wall time at the previous Step
	prevCPU  time.Duration
	prevWall time.Time
	late     atomic.Int64 // late windows so far
	// windows late by the latency alone, with no queue of ours
	hostLate atomic.Int64
	// watched counts the work to protect (Watch); nil: always.
	watched     func() uint64
	prevWatched uint64
}

// NewMonitor returns a Monitor whose windows are late when more than 1 %
// of schedules waited longer than target and our own queue stands.
func NewMonitor(target time.Duration) *Monitor {
	base := time.Now()
	m := &Monitor{target: target.Seconds(), clock: func() time.Duration { return time.Since(base) }}
	m.sample[0].Name = schedLatencies
	m.sample[1].Name = running
	m.sample[2].Name = runnable
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
	if m.sample[0].Value.Kind() != metrics.KindFloat64Histogram || m.sample[1].Value.Kind() != metrics.KindUint64 ||
		m.sample[2].Value.Kind() != metrics.KindUint64 {
		return // not this runtime's metrics: limits stay at their maximum
	}
	h := m.sample[0].Value.Float64Histogram()
	cpu, wall := processCPU(), time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.prev) != len(h.Counts) {
		m.prev = append(m.prev[:0], h.Counts...)
		m.prevCPU, m.prevWall = cpu, wall
		m.at = m.clock()
		return
	}
	procs := runtime.GOMAXPROCS(0)
	late := lateWindow(h.Buckets, h.Counts, m.prev, m.target)
	if late && !cpuBusy(cpu-m.prevCPU, wall.Sub(m.prevWall), procs) && !ownQueue(m.sample[1].Value.Uint64(), m.sample[2].Value.Uint64(), procs) {
		late = false
		m.hostLate.Add(1)
	}
	m.prevCPU, m.prevWall = cpu, wall
	copy(m.prev, h.Counts)
	m.endWindow(late)
}

// EndWindow ends a window as Step does after it has sampled the runtime,
// with late saying what the samples said: for tests of what the Limits
// and Rates guard, which cannot make the scheduler late at will.
func (m *Monitor) EndWindow(late bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.endWindow(late)
}

// endWindow adjusts the limits after a window the samples found late or
// not: late only if the watched work went on. m.mu is held.
func (m *Monitor) endWindow(late bool) {
	now := m.clock()
	elapsed := now - m.at
	m.at = now
	if m.watched != nil {
		n := m.watched()
		late = late && n != m.prevWatched
		m.prevWatched = n
	}
	m.adjust(late, elapsed)
}

// busyShare is the share of GOMAXPROCS cores of CPU time over a window
// from which the Ps count as busy with our own work.
const busyShare = 0.8

// cpuBusy reports whether cpu seconds of the process over wall kept procs
// Ps busy.
func cpuBusy(cpu, wall time.Duration, procs int) bool {
	return wall > 0 && cpu > 0 && float64(cpu) >= busyShare*float64(procs)*float64(wall)
}

// ownQueue reports whether goroutines queue behind our own work: with
// running goroutines on the procs Ps (the Monitor's own among them, which
// takes one while it samples), runnable ones wait for a P.
func ownQueue(running, runnable uint64, procs int) bool {
	return running >= uint64(procs) && runnable > 0
}

// HostLate returns the number of windows whose goroutines ran late with
// no queue of ours: late because of CPU the host did not give, not
// because of work of ours, and so not late.
func (m *Monitor) HostLate() int64 { return m.hostLate.Load() }

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
