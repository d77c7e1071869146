package bench

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Threshold is a pass/fail criterion on a run's result, k6's idea:
// "p99.9<70ms", "errors<0.1%", "rps>900". A run that breaks one exits 1.
type Threshold struct {
	Metric string  // "p99.9" (corrected latency percentile), "max", "mean", "errors", "rps"
	Op     string  // "<", "<=", ">", ">="
	Value  float64 // microseconds for latencies, a share (0–1) or a count for errors, req/s for rps
	Share  bool    // errors given in %: compared with errors / attempts
	text   string
}

// String is the threshold as written.
func (t Threshold) String() string { return t.text }

// ParseThreshold reads METRIC OP VALUE: a latency metric (pXX, max, mean)
// with a duration ("p99.9<70ms", "max<=1s"), errors with a count or a
// percentage ("errors<10", "errors<0.1%"), or rps with a rate ("rps>900",
// "rps>=1.5k").
func ParseThreshold(s string) (Threshold, error) {
	t := Threshold{text: strings.TrimSpace(s)}
	i := strings.IndexAny(t.text, "<>")
	if i <= 0 {
		return Threshold{}, fmt.Errorf("invalid threshold %q: want METRIC<VALUE or METRIC>VALUE, e.g. p99.9<70ms, errors<0.1%%, rps>900", s)
	}
	t.Metric, t.Op = strings.ToLower(strings.TrimSpace(t.text[:i])), t.text[i:i+1]
	rest := t.text[i+1:]
	if strings.HasPrefix(rest, "=") {
		t.Op, rest = t.Op+"=", rest[1:]
	}
	rest = strings.TrimSpace(rest)
	bad := func(why string) (Threshold, error) {
		return Threshold{}, fmt.Errorf("invalid threshold %q: %s", s, why)
	}
	switch {
	case t.Metric == "max" || t.Metric == "mean" || isPercentile(t.Metric):
		d, err := ParseDuration(rest)
		if err != nil || d <= 0 || !strings.ContainsAny(rest, "smhµu") {
			return bad("a latency needs a positive duration with a unit, such as 70ms")
		}
		t.Value = float64(d) / float64(time.Microsecond)
	case t.Metric == "errors":
		if num, ok := strings.CutSuffix(rest, "%"); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			if err != nil || !(v >= 0 && v <= 100) {
				return bad("an error share is a percentage from 0% to 100%")
			}
			t.Value, t.Share = v/100, true
		} else {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil || !(v >= 0) || math.IsInf(v, 0) || v != math.Trunc(v) {
				return bad("an error count is a whole number (or a percentage: errors<0.1%)")
			}
			t.Value = v
		}
	case t.Metric == "rps":
		v, err := ParseMetric(rest)
		if err != nil || math.IsInf(v, 0) {
			return bad("rps needs a rate such as 900 or 1.5k")
		}
		t.Value = v
	default:
		return bad("unknown metric " + strconv.Quote(t.Metric) + " (want pXX, max, mean, errors or rps)")
	}
	return t, nil
}

func isPercentile(m string) bool {
	if len(m) < 2 || m[0] != 'p' || strings.ContainsAny(m[1:], "eEinfINF+-_xX") {
		return false
	}
	v, err := strconv.ParseFloat(m[1:], 64)
	return err == nil && v > 0 && v <= 100
}

// Verdict is one threshold checked against a result.
type Verdict struct {
	Threshold Threshold
	Got       float64 // in the threshold's unit (µs, share, count, req/s)
	Pass      bool
}

// Describe is the verdict for the report: "p99.9<70ms: 12.40ms ok".
func (v Verdict) Describe() string {
	var got string
	switch m := v.Threshold.Metric; {
	case m == "errors" && v.Threshold.Share:
		got = strconv.FormatFloat(v.Got*100, 'g', 4, 64) + "%"
	case m == "errors":
		got = strconv.FormatFloat(v.Got, 'f', 0, 64)
	case m == "rps":
		got = strconv.FormatFloat(v.Got, 'f', 2, 64) + " req/s"
	default:
		got = FormatTimeUS(v.Got)
	}
	verdict := "ok"
	if !v.Pass {
		verdict = "BROKEN"
	}
	return fmt.Sprintf("%s: %s %s", v.Threshold, got, verdict)
}

// Check evaluates the thresholds on r.
func (r *Result) Check(ts []Threshold) []Verdict {
	out := make([]Verdict, 0, len(ts))
	for _, t := range ts {
		var got float64
		switch m := t.Metric; {
		case m == "max":
			got = float64(r.Latency.Max())
		case m == "mean":
			got = r.Latency.Mean()
		case m == "errors":
			got = float64(r.Errors.Total())
			if t.Share {
				attempts := float64(r.Requests + r.Errors.Socket())
				got = 0
				if attempts > 0 {
					got = float64(r.Errors.Total()) / attempts
				} else if r.Errors.Total() > 0 {
					got = 1
				}
			}
		case m == "rps":
			got = r.Achieved()
		default:
			p, _ := strconv.ParseFloat(m[1:], 64)
			got = float64(r.Latency.ValueAtPercentile(p))
		}
		var pass bool
		switch t.Op {
		case "<":
			pass = got < t.Value
		case "<=":
			pass = got <= t.Value
		case ">":
			pass = got > t.Value
		case ">=":
			pass = got >= t.Value
		}
		out = append(out, Verdict{Threshold: t, Got: got, Pass: pass})
	}
	return out
}
