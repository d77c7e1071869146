package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/linkgate/linkgate/internal/svgchart"
)

// summary is the dashboard of one variant.
type summary struct {
	durAvg, durMax        float64
	coldStarts            int
	initAvg, initMax      float64
	postAvg, postMax      float64
	clientP50, clientP99  float64 // warm invokes
	funcMB, extMB         float64
	extCPUPerInvokeUs     float64
	funcSizeMB, extSizeMB float64
	invokes               int
}

func summarize(r result) summary {
	var s summary
	var dur, post, client []float64
	for _, inv := range r.Invokes {
		dur = append(dur, inv.DurationMs)
		post = append(post, inv.PostRuntimeMs)
		if !inv.Cold {
			client = append(client, inv.ClientMs)
		}
	}
	s.invokes = len(r.Invokes)
	s.durAvg, s.durMax = avg(dur), slices.Max(dur)
	s.postAvg, s.postMax = avg(post), slices.Max(post)
	s.coldStarts = len(r.InitsMs)
	s.initAvg, s.initMax = avg(r.InitsMs), slices.Max(r.InitsMs)
	s.clientP50, s.clientP99 = percentile(client, 50), percentile(client, 99)
	s.funcMB, s.extMB = float64(r.FunctionHWMKB)/1024, float64(r.ExtensionHWMKB)/1024
	s.extCPUPerInvokeUs = r.ExtensionCPUMs * 1000 / float64(max(1, r.WarmInvokes))
	s.funcSizeMB, s.extSizeMB = float64(r.FunctionBytes)/1e6, float64(r.ExtensionBytes)/1e6
	return s
}

func avg(v []float64) float64 {
	var sum float64
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

// percentile is the nearest-rank percentile.
func percentile(v []float64, p float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// printReport writes the dashboard as Markdown.
func printReport(w io.Writer, c config, results []result) {
	quota := "none"
	if c.cpuQuota > 0 {
		quota = fmt.Sprintf("%.2f CPU", c.cpuQuota)
	}
	cpus := "any"
	if c.cpus != "" {
		cpus = c.cpus
	}
	fmt.Fprintf(w, "%d warm invokes and %d cold starts per variant, sequential; emulator, function and extension on CPU %s, CPU quota %s; naive sink latency %v.\n\n",
		c.invokes, c.restarts, cpus, quota, c.sinkLatency)
	fmt.Fprintln(w, "| variant | duration avg / max (ms) | cold starts | init avg / max (ms) | post-runtime avg / max (ms) | client p50 / p99 (ms) | max memory: function + extension (MB) | extension CPU per warm invoke (µs) | binary: function / extension (MB) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	var base summary
	for i, r := range results {
		s := summarize(r)
		if i == 0 {
			base = s
		}
		ext, extSize, extCPU := "—", "—", "—"
		if r.ExtensionBytes > 0 {
			ext, extSize, extCPU = fmt.Sprintf("%.1f", s.extMB), fmt.Sprintf("%.1f", s.extSizeMB), fmt.Sprintf("%.0f", s.extCPUPerInvokeUs)
		}
		fmt.Fprintf(w, "| %s | %.2f / %.2f | %d | %.1f / %.1f | %.2f / %.2f | %.2f / %.2f | %.1f + %s | %s | %.1f / %s |\n",
			r.Variant, s.durAvg, s.durMax, s.coldStarts, s.initAvg, s.initMax, s.postAvg, s.postMax,
			s.clientP50, s.clientP99, s.funcMB, ext, extCPU, s.funcSizeMB, extSize)
	}
	fmt.Fprintln(w)
	for _, r := range results[1:] {
		if r.Baseline {
			printBaseline(w, results[0], r)
			continue
		}
		s := summarize(r)
		med, lo, hi := roundDeltas(results[0], r)
		if len(r.TurnaroundUs) > 0 {
			fmt.Fprintf(w, "- %s's own turnaround, INVOKE received → next request sent (its EMF, %d invokes): p50 %.1f µs, p99 %.1f µs, max %.1f µs.\n",
				r.Variant, len(r.TurnaroundUs), percentile(r.TurnaroundUs, 50), percentile(r.TurnaroundUs, 99), slices.Max(r.TurnaroundUs))
		}
		fmt.Fprintf(w, "- %s vs no extension: client p50 %+.3f ms (×%.2f; per round, median %+.3f ms, range %+.3f to %+.3f), duration avg %+.2f ms, init avg %+.1f ms, post-runtime avg %+.2f ms.\n",
			r.Variant, s.clientP50-base.clientP50, s.clientP50/base.clientP50, med, lo, hi, s.durAvg-base.durAvg, s.initAvg-base.initAvg, s.postAvg-base.postAvg)
	}
}

// printBaseline compares the function of this build with another's (both
// with no extension): init time, per round and on average, and binary size.
func printBaseline(w io.Writer, cur, base result) {
	sc, sb := summarize(cur), summarize(base)
	med, lo, hi := initRatios(base, cur)
	fmt.Fprintf(w, "- this build vs the %s: init avg %.2f → %.2f ms (×%.3f; per round, median ×%.3f, range ×%.3f to ×%.3f), bootstrap %.2f → %.2f MB (×%.3f).\n",
		strings.TrimPrefix(base.Variant, "no extension, "), sb.initAvg, sc.initAvg, sc.initAvg/sb.initAvg, med, lo, hi,
		sb.funcSizeMB, sc.funcSizeMB, float64(cur.FunctionBytes)/float64(base.FunctionBytes))
}

// initRatios divides the init times of r by those of base round by round
// (one cold start each per round; the rounds interleave the variants) and
// returns the median, least and greatest ratio.
func initRatios(base, r result) (median, lo, hi float64) {
	var ratios []float64
	for i := range min(len(base.InitsMs), len(r.InitsMs)) {
		if base.InitsMs[i] > 0 {
			ratios = append(ratios, r.InitsMs[i]/base.InitsMs[i])
		}
	}
	if len(ratios) == 0 {
		return 0, 0, 0
	}
	return percentile(ratios, 50), slices.Min(ratios), slices.Max(ratios)
}

// roundDeltas compares the warm client latency medians of two variants
// round by round (the rounds interleave the variants, so each pair saw the
// same machine) and returns the median, least and greatest difference.
func roundDeltas(base, r result) (median, lo, hi float64) {
	byRound := func(res result) map[int][]float64 {
		m := map[int][]float64{}
		for _, inv := range res.Invokes {
			if !inv.Cold {
				m[inv.Round] = append(m[inv.Round], inv.ClientMs)
			}
		}
		return m
	}
	b, v := byRound(base), byRound(r)
	var deltas []float64
	for round, xs := range v {
		if ys, ok := b[round]; ok {
			deltas = append(deltas, percentile(xs, 50)-percentile(ys, 50))
		}
	}
	if len(deltas) == 0 {
		return 0, 0, 0
	}
	return percentile(deltas, 50), slices.Min(deltas), slices.Max(deltas)
}

// chart draws the dashboard's time metrics as grouped bars, averages on
// the left and maxima on the right, one colour per variant.
func chart(path string, results []result) error {
	type metric struct {
		name string
		get  func(summary) float64
	}
	panels := []struct {
		title   string
		metrics []metric
	}{
		{"averages (ms)", []metric{
			{"duration", func(s summary) float64 { return s.durAvg }},
			{"post-runtime", func(s summary) float64 { return s.postAvg }},
			{"init", func(s summary) float64 { return s.initAvg }},
			{"client p50", func(s summary) float64 { return s.clientP50 }},
		}},
		{"maxima (ms)", []metric{
			{"duration", func(s summary) float64 { return s.durMax }},
			{"post-runtime", func(s summary) float64 { return s.postMax }},
			{"init", func(s summary) float64 { return s.initMax }},
			{"client p99", func(s summary) float64 { return s.clientP99 }},
		}},
	}
	var charts []*svgchart.Chart
	for _, panel := range panels {
		c := &svgchart.Chart{Title: panel.title, Width: 576, Height: 432, Y: svgchart.Axis{Label: "ms"},
			X: svgchart.Axis{Min: -0.5, Max: float64(len(panel.metrics)) - 0.5}}
		for i, m := range panel.metrics {
			c.X.Ticks = append(c.X.Ticks, svgchart.Tick{Value: float64(i), Label: m.name})
		}
		top := 0.0
		for j, r := range results {
			s := summarize(r)
			bars := svgchart.Series{Name: r.Variant, Color: svgchart.Palette[j%len(svgchart.Palette)], Bars: true}
			for i, m := range panel.metrics {
				bars.X, bars.Y = append(bars.X, float64(i)), append(bars.Y, m.get(s))
				top = max(top, m.get(s))
			}
			c.Series = append(c.Series, bars)
		}
		c.Y.Max = max(top*1.4, 1) // room for the legend above the bars
		charts = append(charts, c)
	}
	f, err := createFile(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(svgchart.Row(charts...))
	return err
}
