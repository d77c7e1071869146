package capacity

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/linkgate/linkgate/bench"
	"github.com/linkgate/linkgate/internal/svgchart"
)

// chartPercentiles are the latency curves drawn against the rate.
var chartPercentiles = []float64{50, 90, 99, 99.9, 100}

// Chart draws latency percentiles (log scale) against the request rate for
// each outcome, with the SLOs as dashed lines and the capacity as a
// vertical one, and returns it as SVG.
func Chart(o *Options, outs ...*Outcome) ([]byte, error) {
	c := &svgchart.Chart{Title: "Corrected latency by request rate", Width: 860, Height: 520,
		X: svgchart.Axis{Label: "requested rate (req/s)"}, Y: svgchart.Axis{Label: "latency (ms, log scale)", Log: true}}
	minX, maxX := math.Inf(1), math.Inf(-1)
	minY, maxY := math.Inf(1), math.Inf(-1)
	for ti, out := range outs {
		steps := slices.Clone(out.Steps)
		slices.SortStableFunc(steps, func(a, b Step) int { return cmpFloat(a.Rate, b.Rate) })
		for pi, pct := range chartPercentiles {
			// Every trial is a point; the line goes through the worst
			// trial at each rate, as the search judged them.
			all := svgchart.Series{NoLine: true, Marker: svgchart.Circle}
			worst := svgchart.Series{Name: "p" + trimFloat(pct)}
			for _, st := range steps {
				ms := math.Max(bench.Millis(st.Result.Latency.ValueAtPercentile(pct)), 0.001)
				all.X, all.Y = append(all.X, st.Rate), append(all.Y, ms)
				if n := len(worst.X); n > 0 && worst.X[n-1] == st.Rate {
					worst.Y[n-1] = math.Max(worst.Y[n-1], ms)
				} else {
					worst.X, worst.Y = append(worst.X, st.Rate), append(worst.Y, ms)
				}
				minX, maxX = math.Min(minX, st.Rate), math.Max(maxX, st.Rate)
				minY, maxY = math.Min(minY, ms), math.Max(maxY, ms)
			}
			if len(all.X) == 0 {
				continue
			}
			all.Color = svgchart.Palette[pi%len(svgchart.Palette)]
			worst.Color = all.Color
			if ti == 1 {
				worst.Dash, all.Marker = "2 2", svgchart.Box
			}
			if len(outs) > 1 {
				worst.Name = fmt.Sprintf("%s %s", label(ti), worst.Name)
			}
			c.Series = append(c.Series, worst, all)
		}
	}
	if math.IsInf(minX, 1) {
		return nil, fmt.Errorf("no steps to chart")
	}
	for i, slo := range o.SLOs {
		ms := float64(slo.Max.Microseconds()) / 1000
		maxY, minY = math.Max(maxY, ms), math.Min(minY, ms)
		c.Series = append(c.Series, svgchart.Series{Name: "SLO " + slo.String(), X: []float64{minX, maxX}, Y: []float64{ms, ms},
			Color: "#555", Dash: "6 3", Width: float64(1 + i%2)})
	}
	for ti, out := range outs {
		if out.Capacity <= 0 {
			continue
		}
		s := svgchart.Series{Name: fmt.Sprintf("%scapacity %g req/s", labelPrefix(ti, len(outs)), out.Capacity),
			X: []float64{out.Capacity, out.Capacity}, Y: []float64{minY, maxY}, Width: 1.5}
		if ti == 1 {
			s.Dash = "2 2"
		}
		c.Series = append(c.Series, s)
	}
	// Leave the top third of the (log) axis empty for the legend.
	c.Y.Min = minY / 1.5
	c.Y.Max = maxY * math.Pow(maxY/c.Y.Min, 0.5)
	// A little room either side of the rates, as the points are drawn.
	pad := math.Max((maxX-minX)*0.03, 1)
	c.X.Min, c.X.Max = math.Max(0, minX-pad), maxX+pad
	return c.SVG(), nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func label(i int) string { return string(rune('A' + i)) }

func labelPrefix(i, n int) string {
	if n < 2 {
		return ""
	}
	return label(i) + " "
}

// WriteHTML writes a self-contained HTML report: the verdict, the chart as
// inline SVG and every step's figures. The targets' URLs and every other
// string are written through html.EscapeString; the chart is svgchart's
// markup, whose text it escapes itself.
func WriteHTML(w io.Writer, o *Options, outs ...*Outcome) error {
	svg, err := Chart(o, outs...)
	if err != nil {
		return err
	}
	esc := html.EscapeString
	rep := NewReport(o, outs...)
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>linkgate bench capacity</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;font-size:90%}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}
td.l,th.l{text-align:left}
tr.fail td{color:#a00}
.verdict{font-size:120%;font-weight:600}
</style></head><body>
`)
	fmt.Fprintf(&b, "<h1>Capacity under %s</h1>\n", esc(strings.Join(rep.SLOs, ", ")))
	for ti, out := range outs {
		fmt.Fprintf(&b, "<p class=\"verdict\">%s%s: %s</p>\n", labelPrefix(ti, len(outs)), esc(out.Target), esc(out.Summary()))
	}
	if rep.Ratio != 0 {
		fmt.Fprintf(&b, "<p class=\"verdict\">B / A = %.3f</p>", rep.Ratio)
	}
	fmt.Fprintf(&b, `
<p>Steps of %s after a %s warm-up; error budget %g%%; a step passes when every SLO percentile of the
corrected latency is within target, at least 99%% of the requested rate is achieved and errors are within budget; a failure
the generator's own lateness may explain (send lag p99 over 1 ms) is marked generator-limited and run again.</p>
<figure>%s</figure>
`, o.StepDuration, o.Warmup, o.ErrorBudget*100, svg)
	for ti, out := range outs {
		fmt.Fprintf(&b, "<h2>%s%s</h2>\n<table><tr><th>#</th><th>rate</th>", labelPrefix(ti, len(outs)), esc(out.Target))
		for _, p := range bench.ReportPercentiles {
			fmt.Fprintf(&b, "<th>p%s</th>", trimFloat(p))
		}
		b.WriteString("<th>achieved</th><th>errors</th><th class=\"l\">pass</th></tr>\n")
		for i, st := range out.Steps {
			class := ""
			if !st.Pass {
				class = ` class="fail"`
			}
			fmt.Fprintf(&b, "<tr%s><td>%d</td><td>%s</td>", class, i+1, trimFloat(st.Rate))
			for _, p := range bench.ReportPercentiles {
				fmt.Fprintf(&b, "<td>%s</td>", esc(bench.FormatTimeUS(float64(st.Result.Latency.ValueAtPercentile(p)))))
			}
			fmt.Fprintf(&b, "<td>%.1f</td><td>%d</td><td class=\"l\">%s</td></tr>\n", st.Result.Achieved(), st.Result.Errors.Total(), esc(st.Verdict()))
		}
		b.WriteString("</table>\n")
	}
	fmt.Fprintf(&b, "<p><small>Generated by linkgate bench capacity at %s.</small></p>\n</body></html>\n", rep.GeneratedAt.Format("2006-01-02 15:04:05 UTC"))
	_, err = io.WriteString(w, b.String())
	return err
}
