package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// median is the middle value of xs (the mean of the two middle ones for an
// even count); NaN for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// minOf and maxOf are NaN for no values.
func minOf(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return slices.Min(xs)
}

func maxOf(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return slices.Max(xs)
}

// ratio is a/b, NaN when b is zero.
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// pairRatios is a[i]/b[i] for every round both have: the per-round ratio,
// which a drift of the machine between rounds disturbs less than the ratio
// of medians.
func pairRatios(a, b []float64) []float64 {
	n := min(len(a), len(b))
	out := make([]float64, 0, n)
	for i := range n {
		out = append(out, ratio(a[i], b[i]))
	}
	return out
}

// scaleEach is k/x for every x: e.g. 10⁶ / (CPU µs per request) is what one
// fully used core would serve.
func scaleEach(k float64, xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = ratio(k, x)
	}
	return out
}

// formatRange is "min–max" of xs in format f (a printf verb such as %.0f).
func formatRange(f string, xs []float64) string {
	return fmt.Sprintf(f, minOf(xs)) + "–" + fmt.Sprintf(f, maxOf(xs))
}

// formatMedianRange is "median (min–max)".
func formatMedianRange(f string, xs []float64) string {
	return fmt.Sprintf(f, median(xs)) + " (" + formatRange(f, xs) + ")"
}

// formatEach is every value in format f, space-separated, in round order.
func formatEach(f string, xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf(f, x)
	}
	return strings.Join(parts, " ")
}

// formatSorted is every value in format f, space-separated, ascending.
func formatSorted(f string, xs []float64) string {
	s := slices.Clone(xs)
	slices.Sort(s)
	return formatEach(f, s)
}

// reportLine is the classic one-line result of the bench scripts: label,
// median, range and every round, for a throughput in req/s.
func reportLine(label string, xs []float64) string {
	return fmt.Sprintf("%-34s median %10.0f req/s  range %s  rounds: %s", label, median(xs), formatRange("%.0f", xs), formatEach("%.0f", xs))
}

// reportLineMs is reportLine for a latency in milliseconds.
func reportLineMs(label string, xs []float64) string {
	return fmt.Sprintf("%-34s median %10.2f ms     range %s  rounds: %s", label, median(xs), formatRange("%.2f", xs), formatEach("%.2f", xs))
}
