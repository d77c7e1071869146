package capacity

import (
	"fmt"
	"html/template"
	"image/color"
	"io"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/linkgate/linkgate/bench"
	"github.com/linkgate/linkgate/bench/htmlreport"
)

// chartPercentiles are the latency curves drawn against the rate.
var chartPercentiles = []float64{50, 90, 99, 99.9, 100}

var palette = htmlreport.Palette

// Chart draws latency percentiles (log scale) against the request rate for
// each outcome, with the SLOs as dashed lines and the capacity as a
// vertical one, and returns it as SVG.
func Chart(o *Options, outs ...*Outcome) ([]byte, error) {
	p := plot.New()
	p.Title.Text = "Corrected latency by request rate"
	p.X.Label.Text = "requested rate (req/s)"
	p.Y.Label.Text = "latency (ms, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())

	minX, maxX := math.Inf(1), math.Inf(-1)
	minY, maxY := math.Inf(1), math.Inf(-1)
	for ti, out := range outs {
		steps := slices.Clone(out.Steps)
		slices.SortStableFunc(steps, func(a, b Step) int { return cmpFloat(a.Rate, b.Rate) })
		for pi, pct := range chartPercentiles {
			// Every trial is a point; the line goes through the worst
			// trial at each rate, as the search judged them.
			var all, worst plotter.XYs
			for _, st := range steps {
				ms := math.Max(bench.Millis(st.Result.Latency.ValueAtPercentile(pct)), 0.001)
				all = append(all, plotter.XY{X: st.Rate, Y: ms})
				if n := len(worst); n > 0 && worst[n-1].X == st.Rate {
					worst[n-1].Y = math.Max(worst[n-1].Y, ms)
				} else {
					worst = append(worst, plotter.XY{X: st.Rate, Y: ms})
				}
				minX, maxX = math.Min(minX, st.Rate), math.Max(maxX, st.Rate)
				minY, maxY = math.Min(minY, ms), math.Max(maxY, ms)
			}
			if len(all) == 0 {
				continue
			}
			line, err := plotter.NewLine(worst)
			if err != nil {
				return nil, err
			}
			points, err := plotter.NewScatter(all)
			if err != nil {
				return nil, err
			}
			c := palette[pi%len(palette)]
			line.Color, points.Color = c, c
			if ti == 1 {
				line.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
				points.Shape = draw.BoxGlyph{}
			}
			p.Add(line, points)
			name := "p" + trimFloat(pct)
			if len(outs) > 1 {
				name = fmt.Sprintf("%s %s", label(ti), name)
			}
			p.Legend.Add(name, line, points)
		}
	}
	if math.IsInf(minX, 1) {
		return nil, fmt.Errorf("no steps to chart")
	}
	for i, slo := range o.SLOs {
		ms := float64(slo.Max.Microseconds()) / 1000
		maxY, minY = math.Max(maxY, ms), math.Min(minY, ms)
		l, err := plotter.NewLine(plotter.XYs{{X: minX, Y: ms}, {X: maxX, Y: ms}})
		if err != nil {
			return nil, err
		}
		l.Color = color.RGBA{0x55, 0x55, 0x55, 0xff}
		l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		l.Width = vg.Points(1 + float64(i%2))
		p.Add(l)
		p.Legend.Add("SLO "+slo.String(), l)
	}
	for ti, out := range outs {
		if out.Capacity <= 0 {
			continue
		}
		l, err := plotter.NewLine(plotter.XYs{{X: out.Capacity, Y: minY}, {X: out.Capacity, Y: maxY}})
		if err != nil {
			return nil, err
		}
		l.Color = color.RGBA{0, 0, 0, 0xff}
		l.Width = vg.Points(1.5)
		if ti == 1 {
			l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%scapacity %g req/s", labelPrefix(ti, len(outs)), out.Capacity), l)
	}
	// Leave the top third of the (log) axis empty for the legend.
	p.Y.Min = minY / 1.5
	p.Y.Max = maxY * math.Pow(maxY/p.Y.Min, 0.5)
	return htmlreport.SVG(p, 9*vg.Inch, 5.5*vg.Inch)
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

var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
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
<h1>Capacity under {{.SLOs}}</h1>
{{range .Targets}}<p class="verdict">{{.Label}}{{.URL}}: {{.Summary}}</p>
{{end}}{{if .Ratio}}<p class="verdict">B / A = {{printf "%.3f" .Ratio}}</p>{{end}}
<p>Steps of {{.Step}} after a {{.Warmup}} warm-up; error budget {{.Budget}}; a step passes when every SLO percentile of the
corrected latency is within target, at least 99% of the requested rate is achieved and errors are within budget; a failure
the generator's own lateness may explain (send lag p99 over 1 ms) is marked generator-limited and run again.</p>
<figure>{{.SVG}}</figure>
{{range .Targets}}<h2>{{.Label}}{{.URL}}</h2>
<table><tr><th>#</th><th>rate</th>{{range $.Percentiles}}<th>{{.}}</th>{{end}}<th>achieved</th><th>errors</th><th class="l">pass</th></tr>
{{range .Rows}}<tr{{if not .Pass}} class="fail"{{end}}><td>{{.N}}</td><td>{{.Rate}}</td>{{range .Cells}}<td>{{.}}</td>{{end}}<td>{{.Achieved}}</td><td>{{.Errors}}</td><td class="l">{{.Verdict}}</td></tr>
{{end}}</table>
{{end}}<p><small>Generated by linkgate bench capacity at {{.Generated}}.</small></p>
</body></html>
`))

// WriteHTML writes a self-contained HTML report: the verdict, the chart as
// inline SVG and every step's figures.
func WriteHTML(w io.Writer, o *Options, outs ...*Outcome) error {
	svg, err := Chart(o, outs...)
	if err != nil {
		return err
	}
	rep := NewReport(o, outs...)
	type row struct {
		N                       int
		Rate, Achieved, Verdict string
		Errors                  int64
		Pass                    bool
		Cells                   []string
	}
	type target struct {
		Label, URL, Summary string
		Rows                []row
	}
	data := struct {
		SLOs, Step, Warmup, Budget, Generated string
		Ratio                                 float64
		SVG                                   template.HTML
		Percentiles                           []string
		Targets                               []target
	}{
		Step: o.StepDuration.String(), Warmup: o.Warmup.String(), Budget: fmt.Sprintf("%g%%", o.ErrorBudget*100),
		Generated: rep.GeneratedAt.Format("2006-01-02 15:04:05 UTC"), Ratio: rep.Ratio,
		SVG: template.HTML(svg), // produced by gonum/plot from our own numbers and labels
	}
	for i, s := range rep.SLOs {
		if i > 0 {
			data.SLOs += ", "
		}
		data.SLOs += s
	}
	for _, p := range bench.ReportPercentiles {
		data.Percentiles = append(data.Percentiles, "p"+trimFloat(p))
	}
	for ti, out := range outs {
		t := target{Label: labelPrefix(ti, len(outs)), URL: out.Target, Summary: out.Summary()}
		for i, st := range out.Steps {
			r := row{N: i + 1, Rate: trimFloat(st.Rate), Achieved: fmt.Sprintf("%.1f", st.Result.Achieved()),
				Errors: st.Result.Errors.Total(), Pass: st.Pass, Verdict: st.Verdict()}
			for _, p := range bench.ReportPercentiles {
				r.Cells = append(r.Cells, bench.FormatTimeUS(float64(st.Result.Latency.ValueAtPercentile(p))))
			}
			t.Rows = append(t.Rows, r)
		}
		data.Targets = append(data.Targets, t)
	}
	return page.Execute(w, data)
}
