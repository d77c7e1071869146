// Package capacity finds the highest request rate a target sustains within a
// latency SLO: constant-rate steps of linkgate bench, bracketed by growing
// rates, then bisected, with repeated trials at the edge because tail
// latency near the knee varies from run to run.
package capacity

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/linkgate/linkgate/bench"
)

// Options steer a search.
type Options struct {
	SLOs         []SLO
	ErrorBudget  float64       // largest share of failed requests a passing step may have
	StepDuration time.Duration // measured time per step
	Warmup       time.Duration // per step, excluded from its figures
	Min, Max     float64       // rates to search between
	Growth       float64       // bracketing factor between steps (2: double)
	Precision    float64       // stop bisecting when the bracket is this narrow, relative
	Repeat       int           // trials of the final rate; all must pass
	MaxRounds    int           // confirmation rounds before giving up on a flaky edge
	// Retries is how many times a failing step is run again before its
	// failure counts: one stall of a shared machine must not move the
	// bracket. A step that fails at or below the best rate that passed
	// gets one retry more, as do failures the generator's own lateness may
	// explain (Evaluate); 0 retries nothing.
	Retries int
}

// Defaults are the options' defaults.
var Defaults = Options{
	ErrorBudget: 0.001, StepDuration: 10 * time.Second, Warmup: 2 * time.Second,
	Min: 100, Max: 1e6, Growth: 2, Precision: 0.05, Repeat: 3, MaxRounds: 3, Retries: 1,
}

// Validate reports the first problem with o.
func (o *Options) Validate() error {
	switch {
	case len(o.SLOs) == 0:
		return errors.New("at least one --slo is required, e.g. --slo p99.9=70ms")
	case !(o.Min > 0) || !(o.Max >= o.Min):
		return fmt.Errorf("need 0 < --min ≤ --max, got %v and %v", o.Min, o.Max)
	case o.StepDuration <= 0:
		return errors.New("--step-duration must be positive")
	case o.Warmup < 0:
		return errors.New("--warmup must not be negative")
	case !(o.Growth > 1):
		return errors.New("growth must be above 1")
	case !(o.Precision > 0 && o.Precision < 1):
		return errors.New("--precision must be between 0 and 1")
	case o.Repeat < 1:
		return errors.New("--repeat must be at least 1")
	case o.Retries < 0 || o.Retries > 10:
		return errors.New("--retries must be from 0 to 10")
	case o.ErrorBudget < 0 || o.ErrorBudget > 1:
		return errors.New("--error-budget must be between 0% and 100%")
	}
	return nil
}

// Step is one trial at one rate.
type Step struct {
	Target  string
	Rate    float64
	Result  *bench.Result
	Pass    bool
	Reasons []string // why it failed
	// Retried says this failure did not count: the step was run again.
	Retried bool
	// Stall describes a short stall seen in the step's per-second series
	// ("" if none): seconds in which the target completed far fewer
	// requests than asked while the others kept up.
	Stall string
}

// Evaluate decides whether a step's result passes: every SLO percentile of
// the corrected latency within target, achieved ≥ 99% of the rate and
// errors within budget.
//
// The generator's own lateness cannot make a step pass: a request it sends
// late is measured from its planned time all the same (the lag is in the
// corrected latency), and one it sends too late for the window lowers the
// achieved rate. So a step that passes while the generator's send lag p99
// was above bench.MaxSendLagP99 passes (the table says so). A step that
// fails while it was, by no more than that lateness explains — latencies
// over their SLO by at most the largest send lag, an achieved rate short by
// at most the requests planned in that much time — fails as
// "generator-limited" too: the target may not be the cause, and the search
// runs it again.
func Evaluate(o *Options, rate float64, r *bench.Result) (pass bool, reasons []string) {
	late, lag := r.SendLagExceeded()
	maxLag := time.Duration(r.SendLag.Max()) * time.Microsecond
	explained := late // by the generator's lateness, every failure so far
	for _, slo := range o.SLOs {
		got := time.Duration(r.Latency.ValueAtPercentile(slo.Percentile)) * time.Microsecond
		if got > slo.Max {
			reasons = append(reasons, fmt.Sprintf("p%g %s > %s", slo.Percentile, got, slo.Max))
			explained = explained && got-maxLag <= slo.Max
		}
	}
	if a := r.Achieved(); a < bench.MinAchievedRatio*rate {
		reasons = append(reasons, fmt.Sprintf("achieved %.1f < 99%% of %g", a, rate))
		lost := 0.0 // requests per second of the window the lateness can have pushed past its end
		if r.Elapsed > 0 {
			lost = rate * maxLag.Seconds() / r.Elapsed.Seconds()
		}
		explained = explained && a+lost >= bench.MinAchievedRatio*rate
	}
	attempts := r.Requests + r.Errors.Socket()
	if e := r.Errors.Total(); e > 0 && (attempts == 0 || float64(e)/float64(attempts) > o.ErrorBudget) {
		reasons = append(reasons, fmt.Sprintf("errors %d over budget %g%% (%s)", e, o.ErrorBudget*100, r.Errors))
		explained = false
	}
	if len(reasons) > 0 && explained {
		reasons = append(reasons, fmt.Sprintf("%s (send lag p99 %s, max %s)", generatorLimited, lag, maxLag))
	}
	return len(reasons) == 0, reasons
}

// generatorLimited marks the reason that says the generator was late too.
const generatorLimited = "generator-limited"

// Verdict is the step's verdict as the tables print it: "yes", or "no:"
// and why, with a stall seen and whether the step was run again.
func (st *Step) Verdict() string {
	if st.Pass {
		if late, lag := st.Result.SendLagExceeded(); late {
			return fmt.Sprintf("yes, with the generator's send lag p99 %s in the latency", lag)
		}
		return "yes"
	}
	v := "no: " + strings.Join(st.Reasons, "; ")
	if st.Stall != "" {
		v += "; " + st.Stall
	}
	if st.Retried {
		v += " (run again)"
	}
	return v
}

// Outcome is what a search found.
type Outcome struct {
	Target string
	// Capacity is the highest rate that passed every one of its trials;
	// zero when even Min failed.
	Capacity float64
	// Upper is the lowest rate that failed above Capacity (the knee lies
	// between the two); zero when nothing failed up to Max.
	Upper    float64
	Trials   int // trials at Capacity
	Passes   int // of which passed
	AboveMax bool
	BelowMin bool
	Flaky    bool // the edge kept failing confirmation; Capacity is the last that held
	// FlakySteps counts steps that failed and then passed when run again;
	// Stalls, failures a short stall explains.
	FlakySteps int
	Stalls     int
	// GeneratorLimited says the generator was late in the failure at Upper
	// that counted: the knee may be the generator's, and Capacity a lower
	// bound of the target's.
	GeneratorLimited bool
	Steps            []Step
}

// Summary is the one-line verdict.
func (o *Outcome) Summary() string {
	switch {
	case o.BelowMin:
		return fmt.Sprintf("capacity below the minimum rate tried (%s): even it failed", rateString(o.Upper))
	case o.AboveMax:
		return fmt.Sprintf("capacity at least %s: every rate up to --max passed (%d/%d trials at the top)",
			rateString(o.Capacity), o.Passes, o.Trials)
	}
	s := fmt.Sprintf("capacity %s (%d/%d trials passed there; the knee is between %s and %s, ±%.1f%%)",
		rateString(o.Capacity), o.Passes, o.Trials, rateString(o.Capacity), rateString(o.Upper),
		100*(o.Upper-o.Capacity)/(o.Upper+o.Capacity))
	if o.Flaky {
		s += "; the edge was unstable: trials near it disagreed"
	}
	if o.GeneratorLimited {
		s += "; the generator was late in the failure above it (send lag p99 over " + bench.MaxSendLagP99.String() +
			"): a lower bound, the generator may be the limit"
	}
	if o.FlakySteps > 0 || o.Stalls > 0 {
		s += fmt.Sprintf("; %d flaky step(s) passed when run again, %d failure(s) came with a short stall", o.FlakySteps, o.Stalls)
	}
	return s
}

// stallOf looks for a short stall in a step's per-second series: a whole
// second in which fewer than half the requests asked for completed, while
// most seconds kept up (at least 90% of the rate). Overload looks
// different: most seconds fall short. Steps of under three seconds have
// too few seconds to tell.
func stallOf(rate float64, r *bench.Result) string {
	full := r.Series
	if n := int(r.Elapsed / time.Second); n < len(full) {
		full = full[:n] // the last, partial second says nothing
	}
	if len(full) < 3 {
		return ""
	}
	var low []int
	ok := 0
	for _, sec := range full {
		switch got := float64(sec.Requests); {
		case got < 0.5*rate:
			low = append(low, sec.Index)
		case got >= 0.9*rate:
			ok++
		}
	}
	if len(low) == 0 || len(low) > len(full)/3 || ok < len(full)/2 {
		return ""
	}
	return fmt.Sprintf("a stall: second(s) %v completed under half the rate", low)
}

// generatorLate reports whether the generator was late in a failed step:
// the failure may be the generator's rather than the target's.
func generatorLate(reasons []string) bool {
	for _, r := range reasons {
		if strings.HasPrefix(r, generatorLimited) {
			return true
		}
	}
	return false
}

func rateString(r float64) string { return fmt.Sprintf("%g req/s", r) }

// searcher is the search as a state machine, so two searches can
// alternate steps (--compare).
type searcher struct {
	o        *Options
	phase    int
	lo, hi   float64 // highest single pass, lowest fail (0: none yet)
	passes   []float64
	next     float64
	left     int // confirmation trials still to run
	rounds   int
	out      Outcome
	capTrial int
	capPass  int
}

const (
	phBracket = iota
	phBisect
	phConfirm
	phDone
)

func newSearcher(o *Options, target string) *searcher {
	return &searcher{o: o, next: o.Min, out: Outcome{Target: target}}
}

// rate returns the next rate to try, or false when the search is over.
func (s *searcher) rate() (float64, bool) { return s.next, s.phase != phDone }

// record takes the verdict of a step at s.next and picks the next rate.
func (s *searcher) record(st Step) {
	s.out.Steps = append(s.out.Steps, st)
	r := st.Rate
	switch s.phase {
	case phBracket:
		if st.Pass {
			s.lo = r
			s.passes = append(s.passes, r)
			if r >= s.o.Max {
				s.out.AboveMax = true
				s.confirm(r)
				return
			}
			s.next = roundRate(math.Min(r*s.o.Growth, s.o.Max))
			return
		}
		s.hi = r
		if s.lo == 0 {
			s.out.BelowMin, s.out.Upper = true, r
			s.phase = phDone
			return
		}
		s.phase = phBisect
		s.bisect()
	case phBisect:
		if st.Pass {
			s.lo = r
			s.passes = append(s.passes, r)
		} else {
			s.hi = r
		}
		s.bisect()
	case phConfirm:
		s.capTrial++
		if st.Pass {
			s.capPass++
			if s.left--; s.left <= 0 {
				s.finish()
			}
			return
		}
		// The edge did not hold: it fails here after all. Go back to the
		// highest single pass below it and bisect again, a bounded number
		// of times.
		s.rounds++
		s.hi = r
		s.out.AboveMax = false
		below := slices.DeleteFunc(slices.Clone(s.passes), func(p float64) bool { return p >= r })
		switch {
		case len(below) == 0:
			s.out.BelowMin, s.out.Upper = true, r
			s.phase = phDone
		case s.out.Flaky:
			// The last round failed too: report the highest single pass
			// below, unconfirmed.
			s.lo = slices.Max(below)
			s.capTrial, s.capPass = 1, 1
			s.finish()
		case s.rounds >= s.o.MaxRounds:
			s.out.Flaky = true
			s.lo = slices.Max(below)
			s.confirm(s.lo)
		default:
			s.lo = slices.Max(below)
			s.phase = phBisect
			s.bisect()
		}
	}
}

// step runs the trial at rate, and runs it again while it fails and
// retries are left (Options.Retries; one more below the best pass so far
// and when the generator was late). Retried failures are observed and
// kept in the outcome, marked Retried.
func (s *searcher) step(ctx context.Context, target string, rate float64, trial Trial, observe func(Step)) (Step, error) {
	for attempt := 0; ; attempt++ {
		res, err := trial(ctx, target, rate)
		if err != nil {
			return Step{}, err
		}
		if ctx.Err() != nil {
			return Step{}, ctx.Err()
		}
		pass, reasons := Evaluate(s.o, rate, res)
		st := Step{Target: target, Rate: rate, Result: res, Pass: pass, Reasons: reasons}
		if !pass {
			if st.Stall = stallOf(rate, res); st.Stall != "" {
				s.out.Stalls++
			}
		}
		if pass && attempt > 0 {
			s.out.FlakySteps++
		}
		retries := s.o.Retries
		if retries > 0 && (s.lo > 0 && rate <= s.lo || generatorLate(reasons)) {
			retries++
		}
		if pass || attempt >= retries {
			return st, nil
		}
		st.Retried = true
		s.out.Steps = append(s.out.Steps, st)
		if observe != nil {
			observe(st)
		}
	}
}

func (s *searcher) bisect() {
	if (s.hi-s.lo)/s.lo <= s.o.Precision {
		s.confirm(s.lo)
		return
	}
	mid := roundRate((s.lo + s.hi) / 2)
	if mid <= s.lo || mid >= s.hi {
		s.confirm(s.lo)
		return
	}
	s.next = mid
}

// confirm repeats the trial at rate until Repeat trials in all have run
// there (the pass that got it here counts as the first).
func (s *searcher) confirm(rate float64) {
	s.phase, s.next = phConfirm, rate
	s.capTrial, s.capPass = 1, 1
	s.left = s.o.Repeat - 1
	if s.left <= 0 {
		s.finish()
	}
}

func (s *searcher) finish() {
	s.phase = phDone
	s.out.Capacity, s.out.Upper = s.lo, s.hi
	s.out.Trials, s.out.Passes = s.capTrial, s.capPass
	for _, st := range s.out.Steps {
		if st.Rate == s.hi && !st.Pass && !st.Retried && generatorLate(st.Reasons) {
			s.out.GeneratorLimited = true
		}
	}
}

// roundRate keeps step rates readable: whole numbers from 10 req/s up.
func roundRate(r float64) float64 {
	if r >= 10 {
		return math.Round(r)
	}
	return math.Round(r*100) / 100
}

// Trial runs one step: a constant-rate run at rate against target.
type Trial func(ctx context.Context, target string, rate float64) (*bench.Result, error)

// Search finds the capacity of target. observe, if set, sees every step as
// it completes.
func Search(ctx context.Context, o Options, target string, trial Trial, observe func(Step)) (*Outcome, error) {
	outs, err := run(ctx, &o, []string{target}, trial, observe)
	if err != nil {
		return nil, err
	}
	return outs[0], nil
}

// Compare searches two targets at once, alternating their steps so that
// drift in the machine or the network affects both alike.
func Compare(ctx context.Context, o Options, a, b string, trial Trial, observe func(Step)) (*Outcome, *Outcome, error) {
	outs, err := run(ctx, &o, []string{a, b}, trial, observe)
	if err != nil {
		return nil, nil, err
	}
	return outs[0], outs[1], nil
}

func run(ctx context.Context, o *Options, targets []string, trial Trial, observe func(Step)) ([]*Outcome, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ss := make([]*searcher, len(targets))
	for i, t := range targets {
		ss[i] = newSearcher(o, t)
	}
	for {
		active := false
		for i, s := range ss {
			rate, ok := s.rate()
			if !ok {
				continue
			}
			active = true
			st, err := s.step(ctx, targets[i], rate, trial, observe)
			if err != nil {
				return nil, err
			}
			s.record(st)
			if observe != nil {
				observe(st)
			}
		}
		if !active {
			break
		}
	}
	outs := make([]*Outcome, len(ss))
	for i, s := range ss {
		outs[i] = &s.out
	}
	return outs, nil
}
