package overload

import (
	"math"
	"sync"
	"time"
)

// An in-flight Limit bounds how many requests of a class run at once, not
// how much CPU they take: creates wait for a synced commit most of their
// time, and a group commit serves however many are waiting, so even a few
// creates in flight are admitted at the core's full create capacity and
// keep it busy, while the redirects' readiness reaches a busy Go scheduler
// only every 10 ms (sysmon's network poll; an idle P polls at once). A
// Rate bounds what the class can take: an admission rate, a token bucket
// with a small burst so admissions are spread evenly, lowered after late
// windows and raised after others, so the core keeps idle moments in
// which the redirects' connections are read at once.

// rateIncrease is the share by which a binding Rate grows after a window
// that was not late: ×2 in about 22 windows.
const rateIncrease = 1.0 / 32

// burstTime is the burst of a Rate, as time at its rate.
const burstTime = 2 * time.Millisecond

// minRate is the lowest admission rate, per second.
const minRate = 100.0

// Rate is an adaptive admission rate, unlimited until the first late
// window. The zero value is not usable; make one with Monitor.Rate.
type Rate struct {
	mu     sync.Mutex
	rate   float64       // per second; +Inf: unlimited
	tokens float64       // available now, at most burst
	last   time.Duration // when tokens were last refilled (clock)
	// In the window so far:
	admitted, refused int64
	clock             func() time.Duration
}

// Rate returns a new adaptive admission rate.
func (m *Monitor) Rate() *Rate {
	r := &Rate{rate: math.Inf(1), clock: m.clock}
	m.mu.Lock()
	m.rates = append(m.rates, r)
	m.mu.Unlock()
	return r
}

// Allow reports whether one more request may be admitted now.
func (r *Rate) Allow() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if math.IsInf(r.rate, 1) {
		r.admitted++
		return true
	}
	now := r.clock()
	r.tokens = min(r.burst(), r.tokens+r.rate*(now-r.last).Seconds())
	r.last = now
	if r.tokens < 1 {
		r.refused++
		return false
	}
	r.tokens--
	r.admitted++
	return true
}

// Started counts a request admitted without asking the Rate (below the
// caller's floor): a late window halves what the class started, whoever
// admitted it.
func (r *Rate) Started() {
	r.mu.Lock()
	r.admitted++
	r.mu.Unlock()
}

// PerSecond returns the admission rate now; +Inf when unlimited.
func (r *Rate) PerSecond() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rate
}

func (r *Rate) burst() float64 { return max(1, r.rate*burstTime.Seconds()) }

// adjust ends a window of elapsed time: after a late one in which it
// admitted requests the rate is half what it admitted (or half the rate,
// if lower) — a class that started nothing did not make the window late;
// after another in
// which the rate refused requests, it grows by rateIncrease. A rate that
// refused nothing stays where it is: it is no reason to admit a sudden
// flood in full.
func (r *Rate) adjust(late bool, elapsed time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case late && r.admitted > 0 && elapsed > 0:
		admitted := float64(r.admitted) / elapsed.Seconds()
		r.rate = max(minRate, min(r.rate, admitted)/2)
		r.tokens = min(r.tokens, r.burst())
	case !late && r.refused > 0:
		r.rate *= 1 + rateIncrease
	}
	r.admitted, r.refused = 0, 0
}
