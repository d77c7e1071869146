// Package htmlreport writes the self-contained HTML report of one
// linkgate bench run (or of several merged): the figures, the latency of
// every second of the measured window with the rate achieved in it, and
// the percentile spectrum, charts drawn as inline SVG by internal/svgchart.
package htmlreport

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/linkgate/linkgate/bench"
	"github.com/linkgate/linkgate/internal/svgchart"
)

// Options are what the report says beside the result.
type Options struct {
	Title     string          // e.g. "linkgate bench" or "linkgate bench merge (3 results)"
	Verdicts  []bench.Verdict // the --threshold checks, if any
	Generated time.Time
	// Agents are a distributed run's agents, one row each; Invalid says
	// why the run is not to be trusted, naming them.
	Agents  []bench.AgentSummary
	Invalid []string
}

// Write writes the report of res to w. Every string of the run and the
// options (the target's URL, agent names, errors) is written through
// html.EscapeString; the charts are svgchart's markup, whose text it
// escapes itself.
func Write(w io.Writer, res *bench.Result, o Options) error {
	esc := html.EscapeString
	var mode string
	switch {
	case len(res.Stages) > 0:
		mode = fmt.Sprintf("open-model ramp of %d stages (mean %.0f req/s)", len(res.Stages), res.Rate)
	case res.Rate > 0:
		mode = fmt.Sprintf("constant rate, %s req/s", strconv.FormatFloat(res.Rate, 'f', -1, 64))
	default:
		mode = "closed loop (maximum throughput)"
	}
	_, lag := res.SendLagExceeded()
	figures := [][2]string{
		{"threads × connections", fmt.Sprintf("%d × %d", res.Threads, res.Connections)},
		{"measured window", res.Elapsed.Round(time.Millisecond).String()},
		{"requests completed", strconv.FormatInt(res.Requests, 10)},
		{"achieved rate", fmt.Sprintf("%.1f req/s", res.Achieved())},
		{"errors", fmt.Sprintf("%d (connect %d, read %d, write %d, timeout %d, TLS %d, status ≥ 400 %d)", res.Errors.Total(),
			res.Errors.Connect, res.Errors.Read, res.Errors.Write, res.Errors.Timeout,
			res.Errors.Handshake+res.Errors.Certificate, res.Errors.StatusTotal())},
		{"in flight / unsent at the end", fmt.Sprintf("%d / %d", res.InFlightAtEnd, res.UnsentAtEnd)},
		{"generator send lag p99", lag.String()},
	}
	var b strings.Builder
	title := esc(o.Title) + ": " + esc(res.URL)
	b.WriteString(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>` + title + `</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;font-size:90%;margin:.5em 0}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{text-align:left;font-weight:500}
.broken{color:#a00;font-weight:600}
</style></head><body>
<h1>` + title + `</h1>
<p>` + esc(mode) + `. Latency is corrected for coordinated omission: from each request's planned send time.</p>
<table>`)
	for _, f := range figures {
		fmt.Fprintf(&b, "<tr><th>%s</th><td>%s</td></tr>", esc(f[0]), esc(f[1]))
	}
	b.WriteString("</table>\n<table><tr>")
	for _, p := range bench.ReportPercentiles {
		fmt.Fprintf(&b, "<th>p%s</th>", strconv.FormatFloat(p, 'f', -1, 64))
	}
	b.WriteString("</tr><tr>")
	for _, p := range bench.ReportPercentiles {
		fmt.Fprintf(&b, "<td>%s</td>", esc(bench.FormatTimeUS(float64(res.Latency.ValueAtPercentile(p)))))
	}
	b.WriteString("</tr></table>\n")
	if len(o.Verdicts) > 0 {
		b.WriteString("<h2>Thresholds</h2><ul>")
		for _, v := range o.Verdicts {
			fmt.Fprintf(&b, "<li%s>%s</li>", broken(!v.Pass), esc(v.Describe()))
		}
		b.WriteString("</ul>\n")
	}
	if len(o.Invalid) > 0 {
		b.WriteString(`<h2 class="broken">Invalid run</h2><ul>`)
		for _, s := range o.Invalid {
			fmt.Fprintf(&b, `<li class="broken">%s</li>`, esc(s))
		}
		b.WriteString("</ul>\n")
	}
	if len(o.Agents) > 0 {
		b.WriteString("<h2>Agents</h2><table><tr><th>agent</th><th>weight</th><th>rate</th><th>connections</th><th>requests</th>" +
			"<th>achieved req/s</th><th>errors</th><th>send lag p99</th><th>start lag</th><th>clock offset (round trip)</th><th>verdict</th></tr>\n")
		for _, a := range o.Agents {
			verdict := "ok"
			switch {
			case a.Error != "":
				verdict = "failed: " + a.Error
			case len(a.Problems) > 0:
				verdict = "invalid"
			}
			fmt.Fprintf(&b, "<tr><th>%s</th><td>%g</td><td>%.1f</td><td>%d</td><td>%d</td><td>%.1f</td><td>%d</td>"+
				"<td>%.3f ms</td><td>%.3f ms</td><td>%.3f ms (%.3f ms)</td><td%s>%s</td></tr>\n",
				esc(a.Agent), a.Weight, a.RequestedRate, a.Connections, a.Requests, a.RequestsPerSec, a.Errors,
				a.SendLagP99Ms, a.StartLagMs, a.ClockOffsetMs, a.ClockRTTMs, broken(verdict != "ok"), esc(verdict))
		}
		b.WriteString("</table>\n")
	}
	if ws := res.Warnings(); len(ws) > 0 {
		b.WriteString("<h2>Warnings</h2><ul>")
		for _, s := range ws {
			fmt.Fprintf(&b, "<li>%s</li>", esc(s))
		}
		b.WriteString("</ul>\n")
	}
	// The charts: svgchart's markup, drawn from our own numbers, its text
	// escaped.
	fmt.Fprintf(&b, "<h2>Latency over time</h2>\n<figure>%s</figure>\n<figure>%s</figure>\n"+
		"<h2>Percentile spectrum</h2>\n<figure>%s</figure>\n", timeChart(res), rateChart(res), spectrumChart(res))
	fmt.Fprintf(&b, "<p><small>Generated by %s at %s.</small></p>\n</body></html>\n",
		esc(o.Title), o.Generated.UTC().Format("2006-01-02 15:04:05 UTC"))
	_, err := io.WriteString(w, b.String())
	return err
}

// broken is the class attribute of a failed row or item.
func broken(failed bool) string {
	if failed {
		return ` class="broken"`
	}
	return ""
}

// wholeTicks label an axis with whole numbers, about ten of them.
func wholeTicks(min, max float64) []svgchart.Tick {
	step := math.Max(1, math.Pow(10, math.Floor(math.Log10(math.Max(max-min, 1)/2))))
	for (max-min)/step > 10 {
		step *= 2
	}
	var ts []svgchart.Tick
	for x := math.Ceil(min/step) * step; x <= max; x += step {
		ts = append(ts, svgchart.Tick{Value: x, Label: strconv.FormatFloat(x, 'f', 0, 64)})
	}
	return ts
}

// floorMs keeps log-scale values above zero (1 µs, the histograms' floor).
func floorMs(ms float64) float64 { return math.Max(ms, 0.001) }

// line is a named curve in the palette's colour i.
func line(name string, i int, x, y []float64, dashed bool) svgchart.Series {
	s := svgchart.Series{Name: name, X: x, Y: y, Color: svgchart.Palette[i%len(svgchart.Palette)]}
	if dashed {
		s.Dash = "4 3"
	}
	return s
}

// timeChart draws each second's p50, p99 and max corrected latency. A
// second in which nothing completed has no latency of its own; it shows
// in the rate chart as a drop.
func timeChart(res *bench.Result) []byte {
	c := &svgchart.Chart{Title: "Corrected latency, second by second", Width: 860, Height: 380,
		X: svgchart.Axis{Label: "second of the measured window"}, Y: svgchart.Axis{Label: "latency (ms, log scale)", Log: true}}
	curves := []struct {
		name string
		pct  float64
	}{{"p50", 50}, {"p99", 99}, {"max", 100}}
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, cv := range curves {
		var xs, ys []float64
		for _, s := range res.Series {
			if s.Latency == nil || s.Latency.TotalCount() == 0 {
				continue
			}
			ms := floorMs(bench.Millis(s.Latency.ValueAtPercentile(cv.pct)))
			xs, ys = append(xs, float64(s.Index)+0.5), append(ys, ms)
			lo, hi = math.Min(lo, ms), math.Max(hi, ms)
		}
		if len(xs) > 0 {
			c.Series = append(c.Series, line(cv.name, i, xs, ys, false))
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0.001, 1 // nothing completed: an empty chart with a usable axis
	}
	c.X.Min, c.X.Max = 0, math.Max(float64(len(res.Series)), 1)
	c.X.Ticks = wholeTicks(c.X.Min, c.X.Max)
	c.Y.Min, c.Y.Max = lo/1.5, hi*math.Pow(hi*1.5/lo, 0.4) // room at the top for the legend
	return c.SVG()
}

// rateChart draws the requests completed and the errors in each second,
// with the requested rate of a constant-rate run.
func rateChart(res *bench.Result) []byte {
	c := &svgchart.Chart{Title: "Requests completed and errors per second", Width: 860, Height: 290,
		X: svgchart.Axis{Label: "second of the measured window"}, Y: svgchart.Axis{Label: "per second"}}
	var xs, done, errs []float64
	top := res.Rate
	for _, s := range res.Series {
		xs = append(xs, float64(s.Index)+0.5)
		done, errs = append(done, float64(s.Requests)), append(errs, float64(s.Errors))
		top = math.Max(top, float64(s.Requests))
	}
	if len(xs) > 0 {
		c.Series = append(c.Series, line("completed", 0, xs, done, false), line("errors", 3, xs, errs, false))
	}
	n := math.Max(float64(len(res.Series)), 1)
	if res.Rate > 0 && len(res.Stages) == 0 {
		c.Series = append(c.Series, line("requested", 4, []float64{0, n}, []float64{res.Rate, res.Rate}, true))
	}
	c.X.Min, c.X.Max = 0, n
	c.Y.Min, c.Y.Max = 0, math.Max(top*1.3, 1)
	c.X.Ticks, c.Y.Ticks = wholeTicks(c.X.Min, c.X.Max), wholeTicks(c.Y.Min, c.Y.Max)
	return c.SVG()
}

// spectrumTicks label the spectrum's x axis, 1/(1−p) on a log scale, with
// the percentiles they stand for.
func spectrumTicks(max float64) []svgchart.Tick {
	var ts []svgchart.Tick
	for k, x := 0, 1.0; x <= max*1.0001; k, x = k+1, x*10 {
		label := "0%" // 1/(1−p) = 10^k: p = 0, 90, 99, 99.9, … %
		switch {
		case k == 1:
			label = "90%"
		case k >= 2:
			label = "99" + strings.TrimSuffix("."+strings.Repeat("9", k-2), ".") + "%"
		}
		ts = append(ts, svgchart.Tick{Value: x, Label: label})
	}
	return ts
}

// spectrumChart draws the corrected and uncorrected latency against the
// percentile, as HdrHistogram's plotter does: x is 1/(1−p) on a log
// scale, so that the tail gets the room.
func spectrumChart(res *bench.Result) []byte {
	c := &svgchart.Chart{Title: "Latency by percentile", Width: 860, Height: 430,
		X: svgchart.Axis{Label: "percentile", Log: true}, Y: svgchart.Axis{Label: "latency (ms, log scale)", Log: true}}
	lo, hi, right := math.Inf(1), math.Inf(-1), 10.0
	for i, h := range []struct {
		name string
		v    *hdrhistogram.Histogram
	}{{"corrected", res.Latency}, {"uncorrected", res.Uncorrected}} {
		n := h.v.TotalCount()
		if n == 0 {
			continue
		}
		var xs, ys []float64
		// Ten points a decade of 1/(1−p), up to what n values resolve.
		for k := 0; ; k++ {
			x := math.Pow(10, float64(k)/10)
			if x > float64(n) {
				break
			}
			xs, ys = append(xs, x), append(ys, floorMs(bench.Millis(h.v.ValueAtPercentile(100*(1-1/x)))))
		}
		xs, ys = append(xs, float64(n)), append(ys, floorMs(bench.Millis(h.v.Max())))
		for _, y := range ys {
			lo, hi = math.Min(lo, y), math.Max(hi, y)
		}
		right = math.Max(right, float64(n))
		c.Series = append(c.Series, line(h.name, i, xs, ys, i == 1))
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0.001, 1
	}
	c.X.Min, c.X.Max = 1, math.Pow(10, math.Ceil(math.Log10(right)))
	c.X.Ticks = spectrumTicks(c.X.Max)
	c.Y.Min, c.Y.Max = lo/1.5, hi*math.Pow(hi*1.5/lo, 0.4)
	return c.SVG()
}
