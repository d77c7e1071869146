package bench

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// unitScale is one of wrk's unit ladders: a base unit, the factor between
// steps and the names of the larger units.
type unitScale struct {
	scale float64
	base  string
	units []string
}

var (
	timeUnitsUS  = unitScale{1000, "us", []string{"ms", "s"}}
	timeUnitsS   = unitScale{60, "s", []string{"m", "h"}}
	binaryUnits  = unitScale{1024, "", []string{"K", "M", "G", "T", "P"}}
	metricUnits  = unitScale{1000, "", []string{"k", "M", "G", "T", "P"}}
	metricScales = map[string]float64{"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}
)

// format renders n the way wrk does: the value is divided by the scale while
// it is at least 85% of it, moving up the ladder; the last unit of the ladder
// is never reached (a quirk of wrk's loop that its output depends on).
func (u unitScale) format(n float64, prec int) string {
	amt, unit := n, u.base
	for i := 0; i+1 < len(u.units) && amt >= u.scale*0.85; i++ {
		amt /= u.scale
		unit = u.units[i]
	}
	return strconv.FormatFloat(amt, 'f', prec, 64) + unit
}

// FormatTimeUS formats a duration given in microseconds like wrk: "812.00us",
// "1.25ms", "4.41s", "1.50m".
func FormatTimeUS(us float64) string {
	if us >= 1e6 {
		return timeUnitsS.format(us/1e6, 2)
	}
	return timeUnitsUS.format(us, 2)
}

// FormatTimeS formats whole seconds like wrk's "Running 30s test" header.
func FormatTimeS(s float64) string { return timeUnitsS.format(s, 0) }

// FormatMetric formats a count with k/M/G suffixes: "4.99k".
func FormatMetric(n float64) string { return metricUnits.format(n, 2) }

// FormatBinary formats a byte count with K/M/G suffixes (powers of 1024).
func FormatBinary(n float64) string { return binaryUnits.format(n, 2) }

// padUnits right-aligns a formatted value in width columns the way wrk's
// print_units does: values without a unit get two trailing spaces, values
// with a one-letter unit get one, so numbers line up across rows.
func padUnits(s string, width int) string {
	pad := 2
	if n := len(s); n > 0 && isAlpha(s[n-1]) {
		pad--
		if n > 1 && isAlpha(s[n-2]) {
			pad--
		}
	}
	width -= pad
	if len(s) > width {
		s = s[:width]
	}
	return strings.Repeat(" ", width-len(s)) + s + "  "[:pad]
}

func isAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// ParseDuration reads a duration as wrk does — a whole number with an optional
// s, m or h unit ("30", "30s", "5m", "1h") — or any Go duration ("1m30s",
// "250ms"). It rejects negative values.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty duration")
	}
	num, unit := splitNumber(s)
	if num != "" && !strings.ContainsAny(num, ".") {
		mult := time.Duration(0)
		switch strings.ToLower(unit) {
		case "", "s":
			mult = time.Second
		case "m":
			mult = time.Minute
		case "h":
			mult = time.Hour
		}
		if mult != 0 {
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil || n > int64(math.MaxInt64/mult) {
				return 0, fmt.Errorf("invalid duration %q", s)
			}
			return time.Duration(n) * mult, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (want e.g. 30s, 5m, 1h, 250ms)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("negative duration %q", s)
	}
	return d, nil
}

// ParseMetric reads a non-negative number with an optional SI suffix, as
// wrk's -c, -t and -R accept: "100", "1.5k", "2M". Suffixes are
// case-insensitive, as in wrk ("1m" is a million, not a milli).
func ParseMetric(s string) (float64, error) {
	num, unit := splitNumber(strings.TrimSpace(s))
	mult, ok := metricScales[strings.ToLower(unit)]
	if num == "" || !ok {
		return 0, fmt.Errorf("invalid number %q (want e.g. 100, 1.5k, 2M)", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsInf(v*mult, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("invalid number %q", s)
	}
	return v * mult, nil
}

// splitNumber splits s into a leading unsigned decimal number and the rest.
func splitNumber(s string) (num, rest string) {
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	return s[:i], s[i:]
}
