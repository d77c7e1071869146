// Package svgchart draws the few charts of linkgate's HTML and SVG reports
// (latency over time, the percentile spectrum, latency by rate, grouped
// bars) as plain SVG, with no fonts or drawing library linked in: the
// viewer lays out the text. Lines, markers and bars on linear or log axes,
// a grid at the ticks and a legend in the top-left corner; that is all.
package svgchart

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"strconv"
)

// Palette colours the curves of every chart in linkgate's reports.
var Palette = []string{"#1f77b4", "#2ca02c", "#ff7f0e", "#d62728", "#9467bd", "#8c564b"}

// Tick is a labelled value on an axis.
type Tick struct {
	Value float64
	Label string
}

// Axis is one axis: its label, its range and its scale. With Ticks nil a
// linear axis gets about eight round ticks and a log axis its decades.
type Axis struct {
	Label    string
	Min, Max float64
	Log      bool
	Ticks    []Tick
}

// Marker is what each point of a series shows.
type Marker int

// Markers.
const (
	NoMarker Marker = iota
	Circle
	Box
)

// Series is one named curve, point markers or set of bars.
type Series struct {
	Name   string
	X, Y   []float64
	Color  string  // e.g. "#1f77b4"; black when empty
	Dash   string  // an SVG stroke-dasharray, e.g. "4 3"; solid when empty
	Width  float64 // line width in px; 1.5 when zero
	NoLine bool    // markers only
	Marker Marker
	// Bars draws a bar from 0 to each Y instead of a line; the bar
	// series of a chart stand side by side around each X.
	Bars bool
}

// Chart is one chart of Width × Height pixels.
type Chart struct {
	Title         string
	Width, Height float64
	X, Y          Axis
	Series        []Series
}

// Margins around the plotting area, in px, and the text size.
const (
	left, right, top, bottom = 64, 16, 28, 44
	fontSize                 = 12
)

// SVG returns the chart as an <svg> element, ready to be inlined in HTML
// or written to a file.
func (c *Chart) SVG() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %[1]s %[2]s" font-family="sans-serif" font-size="%d">`+"\n",
		num(c.Width), num(c.Height), fontSize)
	c.draw(&b, "")
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// Row returns charts of the same height side by side as one <svg>.
func Row(charts ...*Chart) []byte {
	var w, h float64
	for _, c := range charts {
		w, h = w+c.Width, math.Max(h, c.Height)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %[1]s %[2]s" font-family="sans-serif" font-size="%d">`+"\n",
		num(w), num(h), fontSize)
	x := 0.0
	for i, c := range charts {
		fmt.Fprintf(&b, `<g transform="translate(%s,0)">`+"\n", num(x))
		c.draw(&b, strconv.Itoa(i))
		b.WriteString("</g>\n")
		x += c.Width
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// draw writes the chart's elements; id tells its clip path apart from
// those of the other charts of a Row.
func (c *Chart) draw(b *bytes.Buffer, id string) {
	x0, x1 := float64(left), c.Width-right
	y0, y1 := c.Height-bottom, float64(top)
	sx := scale(c.X, x0, x1)
	sy := scale(c.Y, y0, y1)
	if c.Title != "" {
		fmt.Fprintf(b, `<text x="%s" y="18" text-anchor="middle" font-size="%d">%s</text>`+"\n", num((x0+x1)/2), fontSize+2, esc(c.Title))
	}
	// Grid and tick labels.
	for _, t := range ticks(c.X) {
		x := sx(t.Value)
		fmt.Fprintf(b, `<line x1="%[1]s" y1="%[2]s" x2="%[1]s" y2="%[3]s" stroke="#ddd"/>`, num(x), num(y0), num(y1))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", num(x), num(y0+fontSize+4), esc(t.Label))
	}
	for _, t := range ticks(c.Y) {
		y := sy(t.Value)
		fmt.Fprintf(b, `<line x1="%[1]s" y1="%[2]s" x2="%[3]s" y2="%[2]s" stroke="#ddd"/>`, num(x0), num(y), num(x1))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end">%s</text>`+"\n", num(x0-4), num(y+fontSize/3), esc(t.Label))
	}
	fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#444"/>`+"\n", num(x0), num(y1), num(x1-x0), num(y0-y1))
	if c.X.Label != "" {
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", num((x0+x1)/2), num(c.Height-6), esc(c.X.Label))
	}
	if c.Y.Label != "" {
		fmt.Fprintf(b, `<text transform="translate(14,%s) rotate(-90)" text-anchor="middle">%s</text>`+"\n", num((y0+y1)/2), esc(c.Y.Label))
	}
	// Data, clipped to the plotting area.
	clip := "plot" + id
	fmt.Fprintf(b, `<clipPath id="%s"><rect x="%s" y="%s" width="%s" height="%s"/></clipPath>`+"\n<g clip-path=\"url(#%[1]s)\">\n",
		clip, num(x0), num(y1), num(x1-x0), num(y0-y1))
	bars, nbars := 0, 0
	for _, s := range c.Series {
		if s.Bars {
			nbars++
		}
	}
	for _, s := range c.Series {
		n := min(len(s.X), len(s.Y))
		color := cmp(s.Color, "#000")
		switch {
		case s.Bars:
			// The bars around each X share 80 % of the distance to the next
			// category (1 on the nominal axes bars are drawn on).
			w := math.Abs(sx(1)-sx(0)) * 0.8 / float64(nbars)
			for i := range n {
				x := sx(s.X[i]) + (float64(bars)-float64(nbars-1)/2)*w - w/2
				ya, yb := sy(math.Max(0, c.Y.Min)), sy(s.Y[i])
				fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s" stroke="#000" stroke-width="0.5"/>`+"\n",
					num(x), num(math.Min(ya, yb)), num(w), num(math.Abs(ya-yb)), color)
			}
			bars++
		default:
			if !s.NoLine && n > 0 {
				b.WriteString(`<polyline fill="none" stroke="` + color + `" stroke-width="` + num(cmpf(s.Width, 1.5)) + `"`)
				if s.Dash != "" {
					b.WriteString(` stroke-dasharray="` + s.Dash + `"`)
				}
				b.WriteString(` points="`)
				for i := range n {
					if i > 0 {
						b.WriteByte(' ')
					}
					b.WriteString(num(sx(s.X[i])) + "," + num(sy(s.Y[i])))
				}
				b.WriteString("\"/>\n")
			}
			for i := range n {
				marker(b, s.Marker, sx(s.X[i]), sy(s.Y[i]), color)
			}
		}
	}
	b.WriteString("</g>\n")
	// Legend, top left inside the plotting area.
	rows, wide := 0, 0
	for _, s := range c.Series {
		if s.Name != "" {
			rows, wide = rows+1, max(wide, len([]rune(s.Name)))
		}
	}
	if rows == 0 {
		return
	}
	lx, ly, lh := x0+8, y1+8, float64(fontSize+4)
	fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="#fff" fill-opacity="0.85" stroke="#bbb"/>`+"\n",
		num(lx), num(ly), num(36+float64(wide)*fontSize*0.6), num(float64(rows)*lh+6))
	row := 0
	for _, s := range c.Series {
		if s.Name == "" {
			continue
		}
		y := ly + 3 + lh*(float64(row)+0.5)
		color := cmp(s.Color, "#000")
		switch {
		case s.Bars:
			fmt.Fprintf(b, `<rect x="%s" y="%s" width="20" height="8" fill="%s" stroke="#000" stroke-width="0.5"/>`, num(lx+4), num(y-4), color)
		case !s.NoLine:
			fmt.Fprintf(b, `<line x1="%[1]s" y1="%[2]s" x2="%[3]s" y2="%[2]s" stroke="%[4]s" stroke-width="%[5]s"`, num(lx+4), num(y), num(lx+24), color, num(cmpf(s.Width, 1.5)))
			if s.Dash != "" {
				b.WriteString(` stroke-dasharray="` + s.Dash + `"`)
			}
			b.WriteString("/>")
		}
		marker(b, s.Marker, lx+14, y, color)
		fmt.Fprintf(b, `<text x="%s" y="%s">%s</text>`+"\n", num(lx+30), num(y+fontSize/3), esc(s.Name))
		row++
	}
}

func marker(b *bytes.Buffer, m Marker, x, y float64, color string) {
	switch m {
	case Circle:
		fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="2.5" fill="none" stroke="%s"/>`+"\n", num(x), num(y), color)
	case Box:
		fmt.Fprintf(b, `<rect x="%s" y="%s" width="5" height="5" fill="none" stroke="%s"/>`+"\n", num(x-2.5), num(y-2.5), color)
	}
}

// scale maps a's range onto [p0, p1] in px, logarithmically on a log
// axis, where values at or below zero go to the axis' minimum.
func scale(a Axis, p0, p1 float64) func(float64) float64 {
	lo, hi := a.Min, a.Max
	f := func(v float64) float64 { return v }
	if a.Log {
		f = func(v float64) float64 {
			if v <= 0 {
				v = a.Min
			}
			return math.Log10(v)
		}
		lo, hi = f(lo), f(hi)
	}
	if hi == lo || math.IsNaN(hi-lo) || math.IsInf(hi-lo, 0) {
		return func(float64) float64 { return p0 }
	}
	return func(v float64) float64 { return p0 + (f(v)-lo)/(hi-lo)*(p1-p0) }
}

// ticks are a's own ticks within its range, or generated ones.
func ticks(a Axis) []Tick {
	in := func(v float64) bool { return v >= a.Min-1e-9*math.Abs(a.Min) && v <= a.Max+1e-9*math.Abs(a.Max) }
	var ts []Tick
	if a.Ticks != nil {
		for _, t := range a.Ticks {
			if in(t.Value) {
				ts = append(ts, t)
			}
		}
		return ts
	}
	if !(a.Max > a.Min) || math.IsInf(a.Max-a.Min, 0) {
		return nil
	}
	if a.Log && a.Min > 0 {
		// Decades; 2 and 5 between them too when fewer than two fit.
		steps := [][]float64{{1}, {1, 2, 5}}
		for _, mult := range steps {
			ts = ts[:0]
			for e := math.Floor(math.Log10(a.Min)); e <= math.Ceil(math.Log10(a.Max)); e++ {
				for _, m := range mult {
					v := m * math.Pow(10, e)
					if in(v) {
						ts = append(ts, Tick{v, strconv.FormatFloat(v, 'g', -1, 64)})
					}
				}
			}
			if len(ts) >= 2 {
				break
			}
		}
		return ts
	}
	// Round steps of 1, 2 or 5 × 10^k, at most eight ticks.
	step := math.Pow(10, math.Floor(math.Log10((a.Max-a.Min)/8)))
	for _, m := range []float64{1, 2, 5, 10} {
		if (a.Max-a.Min)/(step*m) <= 7 {
			step *= m
			break
		}
	}
	round := math.Pow(10, max(0, -math.Floor(math.Log10(step)))) // 0.1 × 3 is 0.30000000000000004
	for v := math.Ceil(a.Min/step) * step; in(v); v += step {
		ts = append(ts, Tick{v, strconv.FormatFloat(math.Round(v*round)/round, 'f', -1, 64)})
	}
	return ts
}

// num formats a coordinate with at most two decimals.
func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		v = 0
	}
	v = math.Round(v*100) / 100
	if v == 0 {
		v = 0 // not -0
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func esc(s string) string { return html.EscapeString(s) }

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func cmpf(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}
