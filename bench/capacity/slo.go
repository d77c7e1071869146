package capacity

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/linkgate/linkgate/bench"
)

// SLO is a latency objective: the corrected latency at Percentile must not
// exceed Max.
type SLO struct {
	Percentile float64
	Max        time.Duration
}

// String is the --slo form: "p99.9=70ms".
func (s SLO) String() string {
	return "p" + strconv.FormatFloat(s.Percentile, 'f', -1, 64) + "=" + s.Max.String()
}

// ParseSLO reads "pXX=DURATION", e.g. "p99.9=70ms" or "p50=2ms"; "max" is
// accepted for p100.
func ParseSLO(s string) (SLO, error) {
	name, value, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok {
		return SLO{}, fmt.Errorf("invalid SLO %q: want pXX=DURATION, e.g. p99.9=70ms", s)
	}
	var p float64
	switch {
	case strings.EqualFold(name, "max"):
		p = 100
	case len(name) > 1 && (name[0] == 'p' || name[0] == 'P'):
		v, err := strconv.ParseFloat(name[1:], 64)
		if err != nil || !(v > 0 && v <= 100) || strings.ContainsAny(name[1:], "eExXnN+-_") {
			return SLO{}, fmt.Errorf("invalid SLO %q: the percentile must be above 0 and at most 100", s)
		}
		p = v
	default:
		return SLO{}, fmt.Errorf("invalid SLO %q: want pXX=DURATION, e.g. p99.9=70ms", s)
	}
	d, err := bench.ParseDuration(value)
	if err != nil || d <= 0 {
		return SLO{}, fmt.Errorf("invalid SLO %q: want a positive latency such as 70ms", s)
	}
	return SLO{Percentile: p, Max: d}, nil
}

// ParseShare reads a share of requests as a percentage ("0.1%") or a
// fraction ("0.001"), between 0 and 1.
func ParseShare(s string) (float64, error) {
	t := strings.TrimSpace(s)
	div := 1.0
	if strings.HasSuffix(t, "%") {
		t, div = strings.TrimSpace(t[:len(t)-1]), 100
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || v < 0 || v/div > 1 || strings.ContainsAny(t, "xXnN_") {
		return 0, fmt.Errorf("invalid share %q: want e.g. 0.1%% or 0.001", s)
	}
	return v / div, nil
}
