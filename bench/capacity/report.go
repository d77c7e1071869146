package capacity

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/linkgate/linkgate/bench"
)

// WriteTableHeader prints the head of the step table, as the seed's tables
// of wrk2 runs: one row per step, the latency percentiles in columns.
func WriteTableHeader(w io.Writer, compare bool) error {
	var b strings.Builder
	if compare {
		fmt.Fprintf(&b, "| %-6s ", "target")
	}
	fmt.Fprintf(&b, "| %9s |", "rate")
	for _, p := range bench.ReportPercentiles {
		fmt.Fprintf(&b, " %9s", "p"+trimFloat(p))
	}
	fmt.Fprintf(&b, " | %9s | %7s | %-4s |\n", "achieved", "errors", "pass")
	line := b.String()
	_, err := io.WriteString(w, line+separator(line))
	return err
}

func separator(header string) string {
	var b strings.Builder
	for _, c := range strings.TrimRight(header, "\n") {
		if c == '|' {
			b.WriteByte('|')
		} else {
			b.WriteByte('-')
		}
	}
	return b.String() + "\n"
}

// WriteTableRow prints one step; label names the target in --compare.
func WriteTableRow(w io.Writer, st Step, label string) error {
	var b strings.Builder
	if label != "" {
		fmt.Fprintf(&b, "| %-6s ", label)
	}
	fmt.Fprintf(&b, "| %9s |", trimFloat(st.Rate))
	for _, p := range bench.ReportPercentiles {
		fmt.Fprintf(&b, " %9s", bench.FormatTimeUS(float64(st.Result.Latency.ValueAtPercentile(p))))
	}
	fmt.Fprintf(&b, " | %9.1f | %7d | %s\n", st.Result.Achieved(), st.Result.Errors.Total(), st.Verdict())
	_, err := io.WriteString(w, b.String())
	return err
}

func trimFloat(f float64) string { return strings.TrimSuffix(fmt.Sprintf("%g", f), ".0") }

// Report is the JSON form of a search (--json).
type Report struct {
	SLOs         []string       `json:"slos"`
	ErrorBudget  float64        `json:"error_budget"`
	StepSeconds  float64        `json:"step_duration_seconds"`
	WarmupSecs   float64        `json:"warmup_seconds"`
	Targets      []TargetReport `json:"targets"`
	Ratio        float64        `json:"ratio,omitempty"` // capacity of the second target / the first
	GeneratedAt  time.Time      `json:"generated_at"`
	Precision    float64        `json:"precision"`
	RepeatTrials int            `json:"repeat_trials"`
}

// TargetReport is one target's outcome and steps.
type TargetReport struct {
	URL      string  `json:"url"`
	Capacity float64 `json:"capacity"`
	Upper    float64 `json:"upper,omitempty"`
	Trials   int     `json:"trials"`
	Passes   int     `json:"passes"`
	AboveMax bool    `json:"above_max,omitempty"`
	BelowMin bool    `json:"below_min,omitempty"`
	Flaky    bool    `json:"flaky,omitempty"`
	// FlakySteps passed when run again after a failure; Stalls failed
	// with a short stall in their per-second series.
	FlakySteps int `json:"flaky_steps"`
	Stalls     int `json:"stalls"`
	// GeneratorLimited: the generator was late in the failure above the
	// capacity that counted.
	GeneratorLimited bool         `json:"generator_limited,omitempty"`
	Summary          string       `json:"summary"`
	Steps            []StepReport `json:"steps"`
}

// StepReport is one step in JSON.
type StepReport struct {
	Rate    float64       `json:"rate"`
	Pass    bool          `json:"pass"`
	Reasons []string      `json:"reasons"`
	Retried bool          `json:"retried,omitempty"`
	Stall   string        `json:"stall,omitempty"`
	Result  bench.Summary `json:"result"`
}

// NewReport builds the JSON report of outcomes searched with o.
func NewReport(o *Options, outs ...*Outcome) Report {
	r := Report{ErrorBudget: o.ErrorBudget, StepSeconds: o.StepDuration.Seconds(), WarmupSecs: o.Warmup.Seconds(),
		GeneratedAt: time.Now().UTC(), Precision: o.Precision, RepeatTrials: o.Repeat}
	for _, s := range o.SLOs {
		r.SLOs = append(r.SLOs, s.String())
	}
	for _, out := range outs {
		t := TargetReport{URL: out.Target, Capacity: out.Capacity, Upper: out.Upper, Trials: out.Trials,
			Passes: out.Passes, AboveMax: out.AboveMax, BelowMin: out.BelowMin, Flaky: out.Flaky,
			FlakySteps: out.FlakySteps, Stalls: out.Stalls, GeneratorLimited: out.GeneratorLimited, Summary: out.Summary()}
		for _, st := range out.Steps {
			reasons := st.Reasons
			if reasons == nil {
				reasons = []string{}
			}
			t.Steps = append(t.Steps, StepReport{Rate: st.Rate, Pass: st.Pass, Reasons: reasons, Retried: st.Retried, Stall: st.Stall,
				Result: st.Result.Summarize(false)})
		}
		r.Targets = append(r.Targets, t)
	}
	if len(outs) == 2 && outs[0].Capacity > 0 {
		r.Ratio = outs[1].Capacity / outs[0].Capacity
	}
	return r
}

// WriteJSON writes the report indented.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
