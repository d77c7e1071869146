package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/linkgate/linkgate/bench"
)

// Remote is an agent as the coordinator reaches it: over HTTP (Client), a
// Lambda invocation, or in-process in tests.
type Remote interface {
	Name() string
	Do(ctx context.Context, req *Request) (*Response, error)
}

// Plan is a distributed run: the whole run as one generator would run it,
// and how the coordinator checks the agents.
type Plan struct {
	// Step is the whole run: the total rate and connections, which are
	// split between the agents by weight, and the threads of each agent.
	// A zero StartAt starts Lead after the clocks are read.
	Step Step
	// Weights are the agents' shares, in their order (nil: equal).
	Weights []float64
	// Lead is how long before the start the steps are sent: enough for
	// every agent to get its step and prepare its requests.
	Lead time.Duration
	// MaxClockOffset bounds an agent's clock offset beyond the round
	// trip's uncertainty, and its start lag; more invalidates the run.
	MaxClockOffset time.Duration
	// ClockSamples is how many round trips measure each clock.
	ClockSamples int
	// Now is the coordinator's clock.
	Now func() time.Time
}

// Defaults of a Plan.
const (
	DefaultLead           = 2 * time.Second
	DefaultMaxClockOffset = 50 * time.Millisecond
	DefaultClockSamples   = 5
)

// AgentOutcome is one agent's part of a run.
type AgentOutcome struct {
	Name        string
	Weight      float64
	Rate        float64 // its share of the requested rate
	Connections int
	// Offset is its clock minus the coordinator's, measured over the round
	// trip RTT (uncertain by RTT/2).
	Offset, RTT time.Duration
	Report      *Report
	Result      *bench.Result
	Err         error    // it did not complete its step
	Problems    []string // why its part invalidates the run
}

// Outcome is a distributed run: the exact merge of the agents' results
// and each agent's part.
type Outcome struct {
	Merged *bench.Result // nil when an agent did not complete its step
	Agents []AgentOutcome
}

// Invalid lists, one line per problem and each naming its agent, why the
// run's figures cannot be trusted: an agent failed, lagged its schedule,
// started late or had a clock off by more than the bound.
func (o *Outcome) Invalid() []string {
	var out []string
	for _, a := range o.Agents {
		if a.Err != nil {
			out = append(out, fmt.Sprintf("agent %s failed: %v", a.Name, a.Err))
		}
		for _, p := range a.Problems {
			out = append(out, fmt.Sprintf("agent %s %s", a.Name, p))
		}
	}
	return out
}

// InvalidError is the error of a run whose outcome is invalid.
type InvalidError struct{ Problems []string }

func (e *InvalidError) Error() string {
	s := "the distributed run is invalid"
	for i, p := range e.Problems {
		if i == 0 {
			s += ": "
		} else {
			s += "; "
		}
		s += p
	}
	return s
}

// Err is the outcome's verdict: nil, or an *InvalidError naming the agents.
func (o *Outcome) Err() error {
	if p := o.Invalid(); len(p) > 0 {
		return &InvalidError{Problems: p}
	}
	return nil
}

// Coordinate measures the agents' clocks, sends each its step and merges
// their results. An agent that cannot be reached for its clock is an
// error before any load is sent; once the steps are out, a failed agent
// cancels the others and the outcome says which failed (Outcome.Err).
func Coordinate(ctx context.Context, remotes []Remote, p Plan) (*Outcome, error) {
	if len(remotes) == 0 {
		return nil, errors.New("no agents")
	}
	if p.Weights != nil && len(p.Weights) != len(remotes) {
		return nil, fmt.Errorf("%d weights for %d agents", len(p.Weights), len(remotes))
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.ClockSamples <= 0 {
		p.ClockSamples = DefaultClockSamples
	}
	if p.MaxClockOffset <= 0 {
		p.MaxClockOffset = DefaultMaxClockOffset
	}
	if p.Lead <= 0 {
		p.Lead = DefaultLead
	}
	out := &Outcome{Agents: make([]AgentOutcome, len(remotes))}
	var total float64
	for i, r := range remotes {
		w := 1.0
		if p.Weights != nil {
			w = p.Weights[i]
		}
		if !(w > 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("agent %s: weight %v is not positive", r.Name(), w)
		}
		out.Agents[i] = AgentOutcome{Name: r.Name(), Weight: w}
		total += w
	}
	for i := range out.Agents {
		a := &out.Agents[i]
		a.Rate = p.Step.Rate * a.Weight / total
		a.Connections = max(p.Step.Threads, int(math.Round(float64(p.Step.Connections)*a.Weight/total)))
	}

	// The clocks, all agents at once.
	if err := each(ctx, remotes, func(ctx context.Context, i int, r Remote) error {
		off, rtt, err := MeasureClock(ctx, r, p.ClockSamples, p.Now)
		if err != nil {
			return fmt.Errorf("agent %s: clock: %w", r.Name(), err)
		}
		out.Agents[i].Offset, out.Agents[i].RTT = off, rtt
		return nil
	}, false); err != nil {
		return nil, err
	}

	start := p.Step.StartAt
	if start.IsZero() {
		var maxRTT time.Duration
		for _, a := range out.Agents {
			maxRTT = max(maxRTT, a.RTT)
		}
		start = p.Now().Add(p.Lead + 2*maxRTT)
	}
	_ = each(ctx, remotes, func(ctx context.Context, i int, r Remote) error {
		a := &out.Agents[i]
		s := p.Step
		s.Agent, s.Rate, s.Connections, s.StartAt = a.Name, a.Rate, a.Connections, start
		resp, err := r.Do(ctx, &Request{Version: Version, Kind: KindRun, Step: &s})
		if err == nil && resp.Error != "" {
			err = errors.New(resp.Error)
		}
		if err == nil && resp.Report == nil {
			err = errors.New("no report in its response")
		}
		if err == nil {
			a.Report = resp.Report
			a.Result, err = resp.Report.Decode()
		}
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("cancelled after another agent failed (%w)", err)
		}
		a.Err = err
		return err
	}, true)

	var results []*bench.Result
	for i := range out.Agents {
		a := &out.Agents[i]
		if off := a.Offset.Abs() - a.RTT/2; off > p.MaxClockOffset {
			a.Problems = append(a.Problems, fmt.Sprintf("has a clock %s off the coordinator's (round trip %s), more than the bound %s",
				a.Offset.Round(time.Microsecond), a.RTT.Round(time.Microsecond), p.MaxClockOffset))
		}
		if a.Err != nil {
			continue
		}
		if lag := time.Duration(a.Report.StartLag); lag > p.MaxClockOffset {
			a.Problems = append(a.Problems, fmt.Sprintf("started %s late, more than the bound %s", lag.Round(time.Microsecond), p.MaxClockOffset))
		}
		if limited, reasons := a.Result.GeneratorLimited(); limited {
			for _, r := range reasons {
				a.Problems = append(a.Problems, "lagged its schedule: "+r)
			}
		}
		results = append(results, a.Result)
	}
	if len(results) == len(out.Agents) {
		m, err := bench.Merge(results)
		if err != nil {
			return nil, err
		}
		out.Merged = m
	}
	return out, nil
}

// each runs f for every remote at once and returns the first error; with
// cancel, the first error cancels the others' context.
func each(ctx context.Context, remotes []Remote, f func(context.Context, int, Remote) error, cancel bool) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make([]error, len(remotes))
	for i, r := range remotes {
		wg.Go(func() {
			if errs[i] = f(ctx, i, r); errs[i] != nil && cancel {
				stop()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// MeasureClock asks r for its clock n times and returns its offset from
// now's (the agent's minus the coordinator's) and the round trip of the
// sample it comes from: the one with the shortest round trip, whose
// midpoint is the best estimate of when the agent read its clock (NTP's
// clock filter, reduced to its core).
func MeasureClock(ctx context.Context, r Remote, n int, now func() time.Time) (offset, rtt time.Duration, err error) {
	type sample struct{ offset, rtt time.Duration }
	var samples []sample
	for range n {
		t0 := now()
		resp, err := r.Do(ctx, &Request{Version: Version, Kind: KindClock})
		t1 := now()
		if err != nil {
			return 0, 0, err
		}
		if resp.Error != "" {
			return 0, 0, errors.New(resp.Error)
		}
		if resp.Clock == nil {
			return 0, 0, errors.New("no clock in its response")
		}
		d := t1.Sub(t0)
		mid := t0.Add(d / 2)
		samples = append(samples, sample{offset: time.Unix(0, resp.Clock.UnixNano).Sub(mid), rtt: d})
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i].rtt < samples[j].rtt })
	return samples[0].offset, samples[0].rtt, nil
}

// WriteAgents writes the per-agent rows after a run's report: each agent's
// share, what it achieved, its errors, its send lag p99, its clock offset,
// and what invalidates the run.
func WriteAgents(w io.Writer, o *Outcome) error {
	if _, err := fmt.Fprintf(w, "Agents:\n  %-24s %12s %12s %8s %10s %12s  %s\n", "agent", "rate", "achieved", "errors", "lag p99", "clock", "verdict"); err != nil {
		return err
	}
	for _, a := range o.Agents {
		achieved, errs, lag := "-", "-", "-"
		if a.Result != nil {
			achieved = fmt.Sprintf("%.1f", a.Result.Achieved())
			errs = fmt.Sprint(a.Result.Errors.Total())
			lag = bench.FormatTimeUS(float64(a.Result.SendLag.ValueAtPercentile(99)))
		}
		verdict := "ok"
		switch {
		case a.Err != nil:
			verdict = "FAILED"
		case len(a.Problems) > 0:
			verdict = "INVALID"
		}
		rate := "closed"
		if a.Rate > 0 {
			rate = fmt.Sprintf("%.1f", a.Rate)
		}
		if _, err := fmt.Fprintf(w, "  %-24s %12s %12s %8s %10s %12s  %s\n", a.Name, rate, achieved, errs, lag,
			a.Offset.Round(time.Microsecond), verdict); err != nil {
			return err
		}
	}
	for _, p := range o.Invalid() {
		if _, err := fmt.Fprintf(w, "Invalid: %s\n", p); err != nil {
			return err
		}
	}
	return nil
}

// Summaries are the per-agent rows of --json.
func (o *Outcome) Summaries() []bench.AgentSummary {
	out := make([]bench.AgentSummary, 0, len(o.Agents))
	for _, a := range o.Agents {
		s := bench.AgentSummary{Agent: a.Name, Weight: a.Weight, RequestedRate: a.Rate, Connections: a.Connections,
			ClockOffsetMs: float64(a.Offset) / 1e6, ClockRTTMs: float64(a.RTT) / 1e6, Problems: a.Problems}
		if a.Err != nil {
			s.Error = a.Err.Error()
		}
		if a.Result != nil {
			s.Requests, s.RequestsPerSec, s.Errors = a.Result.Requests, a.Result.Achieved(), a.Result.Errors.Total()
			s.SendLagP99Ms = bench.Millis(a.Result.SendLag.ValueAtPercentile(99))
			s.StartLagMs = float64(a.Report.StartLag) / 1e6
		}
		if s.Problems == nil {
			s.Problems = []string{}
		}
		out = append(out, s)
	}
	return out
}
