package bench

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// A pacer is an open-model schedule: the planned send time of the k-th
// request of the run (k = 0, 1, … across all connections), as an offset
// from the start, and false once the schedule has no more requests. The
// engine asks it for every request, so it must be cheap and allocation-free.
type pacer interface {
	at(k int64) (time.Duration, bool)
}

// constantPacer sends at a constant total rate: request k at k/rate.
type constantPacer struct{ rate float64 }

func (p constantPacer) at(k int64) (time.Duration, bool) {
	return time.Duration(float64(k) * 1e9 / p.rate), true
}

// Stage is one step of a --stages ramp: over Duration the rate moves in a
// straight line from the previous stage's Target (0 before the first) to
// this Target, k6's ramping arrival rate. A zero Duration jumps.
type Stage struct {
	Duration time.Duration
	Target   float64 // requests per second at the end of the stage
}

// maxStagesRate bounds a stage's target.
const maxStagesRate = 1e9

// ParseStages reads "30s:1000,1m:5000,30s:0": DURATION:RATE pairs.
func ParseStages(s string) ([]Stage, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("invalid stages: empty (want e.g. 30s:1000,1m:5000,30s:0)")
	}
	var out []Stage
	var total time.Duration
	for _, part := range strings.Split(s, ",") {
		d, r, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return nil, fmt.Errorf("invalid stage %q: want DURATION:RATE, e.g. 30s:1000", part)
		}
		dur, err := ParseDuration(d)
		if err != nil {
			return nil, fmt.Errorf("invalid stage %q: %w", part, err)
		}
		rate, err := ParseMetric(r)
		if err != nil || rate > maxStagesRate {
			return nil, fmt.Errorf("invalid stage %q: the rate must be a number of requests/second up to 1G", part)
		}
		if total += dur; total > 100*24*time.Hour || total < 0 {
			return nil, fmt.Errorf("invalid stages %q: longer than 100 days", s)
		}
		out = append(out, Stage{Duration: dur, Target: rate})
	}
	if total <= 0 {
		return nil, fmt.Errorf("invalid stages %q: they last no time", s)
	}
	p := newStagesPacer(out)
	if p.total < 1 {
		return nil, fmt.Errorf("invalid stages %q: they plan no request", s)
	}
	return out, nil
}

// StagesDuration is how long the stages last.
func StagesDuration(st []Stage) time.Duration {
	var d time.Duration
	for _, s := range st {
		d += s.Duration
	}
	return d
}

// StagesRequests is how many requests the stages plan.
func StagesRequests(st []Stage) float64 { return newStagesPacer(st).total }

// stagesPacer plans request k at the time the rate curve's integral
// reaches k + 1: within a stage the rate is r0 + (r1 − r0)·t/D, so the
// count is C + r0·t + (r1 − r0)·t²/(2D), solved for t.
type stagesPacer struct {
	segs  []segment
	total float64 // requests the whole schedule plans
}

type segment struct {
	start    time.Duration // offset of the stage
	count    float64       // requests planned before it
	r0, a    float64       // start rate; a = (r1 − r0) / (2D), in requests/s²
	d        float64       // duration in seconds
	requests float64       // requests it plans
}

func newStagesPacer(st []Stage) *stagesPacer {
	p := &stagesPacer{}
	var start time.Duration
	prev := 0.0
	for _, s := range st {
		d := s.Duration.Seconds()
		if d > 0 {
			seg := segment{start: start, count: p.total, r0: prev, a: (s.Target - prev) / (2 * d), d: d}
			seg.requests = (prev + s.Target) / 2 * d
			p.segs = append(p.segs, seg)
			p.total += seg.requests
		}
		start += s.Duration
		prev = s.Target
	}
	return p
}

func (p *stagesPacer) at(k int64) (time.Duration, bool) {
	n := float64(k) + 1
	if n > p.total {
		return 0, false
	}
	for i := range p.segs {
		s := &p.segs[i]
		x := n - s.count
		if x > s.requests && i+1 < len(p.segs) {
			continue
		}
		var t float64
		switch {
		case math.Abs(s.a) < 1e-12:
			if s.r0 <= 0 {
				continue
			}
			t = x / s.r0
		default:
			disc := s.r0*s.r0 + 4*s.a*x
			t = (-s.r0 + math.Sqrt(math.Max(disc, 0))) / (2 * s.a)
		}
		t = math.Min(math.Max(t, 0), s.d)
		return s.start + time.Duration(t*1e9), true
	}
	return 0, false
}
