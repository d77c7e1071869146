package svgchart_test

import (
	"bytes"
	"encoding/xml"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/internal/svgchart"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// lines is a chart on a log latency axis: two curves, one dashed, a point
// series with box markers, a point outside the range (clipped) and a name
// that needs escaping.
func lines() *svgchart.Chart {
	return &svgchart.Chart{
		Title: "Latency by rate", Width: 600, Height: 300,
		X: svgchart.Axis{Label: "rate (req/s)", Min: 0, Max: 1000},
		Y: svgchart.Axis{Label: "latency (ms, log scale)", Min: 0.1, Max: 1000, Log: true},
		Series: []svgchart.Series{
			{Name: "p50", X: []float64{100, 500, 900}, Y: []float64{1, 2, 10}, Color: svgchart.Palette[0]},
			{Name: "p99 <B & max>", X: []float64{100, 500, 900}, Y: []float64{10, 20, 5000}, Color: svgchart.Palette[1], Dash: "4 3"},
			{Name: "trials", X: []float64{100, 500}, Y: []float64{3, 0}, NoLine: true, Marker: svgchart.Box},
		},
	}
}

// bars is grouped bars on a nominal axis.
func bars() *svgchart.Chart {
	c := &svgchart.Chart{
		Title: "averages (ms)", Width: 400, Height: 300,
		X: svgchart.Axis{Min: -0.5, Max: 1.5, Ticks: []svgchart.Tick{{0, "init"}, {1, "duration"}}},
		Y: svgchart.Axis{Label: "ms", Min: 0, Max: 14},
	}
	for i, ys := range [][]float64{{4, 2}, {10, 3}} {
		c.Series = append(c.Series, svgchart.Series{Name: "variant " + strconv.Itoa(i), X: []float64{0, 1}, Y: ys, Color: svgchart.Palette[i], Bars: true})
	}
	return c
}

func TestGolden(t *testing.T) {
	for _, tt := range []struct {
		name string
		svg  []byte
	}{
		{"lines.svg", lines().SVG()},
		{"bars.svg", svgchart.Row(bars(), bars())},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join("testdata", tt.name)
			if *update {
				if err := os.WriteFile(path, tt.svg, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(tt.svg, want) {
				t.Errorf("%s differs from the golden file (go test ./internal/svgchart -update rewrites it):\n%s", tt.name, tt.svg)
			}
			wellFormed(t, tt.svg)
		})
	}
}

func wellFormed(t *testing.T, svg []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(svg))
	for {
		_, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
	}
	if bytes.Contains(svg, []byte("NaN")) || bytes.Contains(svg, []byte("Inf")) {
		t.Errorf("NaN or Inf in the SVG")
	}
}

// Where the points land: linear x from 64 px to width−16, log y from
// height−44 (the minimum) to 28 (the maximum), a decade per equal step.
func TestScales(t *testing.T) {
	svg := string(lines().SVG())
	m := regexp.MustCompile(`<polyline[^>]*stroke="#1f77b4"[^>]*points="([^"]*)"`).FindStringSubmatch(svg)
	if m == nil {
		t.Fatalf("no p50 polyline in\n%s", svg)
	}
	// x: 64 + v/1000 × 520; y: 256 − (log10(v)+1)/4 × 228.
	if want := "116,199 324,181.84 532,142"; m[1] != want {
		t.Errorf("p50 points %q, want %q", m[1], want)
	}
	for _, tick := range []string{">0.1</text>", ">1</text>", ">10</text>", ">100</text>", ">1000</text>", ">0</text>", ">200</text>"} {
		if !strings.Contains(svg, tick) {
			t.Errorf("no tick label %s", tick)
		}
	}
	if !strings.Contains(svg, "p99 &lt;B &amp; max&gt;") {
		t.Errorf("legend name not escaped")
	}
	if !strings.Contains(svg, `clip-path="url(#plot)"`) {
		t.Errorf("data not clipped to the plotting area")
	}
}

func TestTicks(t *testing.T) {
	for _, tt := range []struct {
		axis svgchart.Axis
		want string
	}{
		{svgchart.Axis{Min: 0, Max: 5}, "0 1 2 3 4 5"},
		{svgchart.Axis{Min: 0, Max: 1300}, "0 200 400 600 800 1000 1200"},
		{svgchart.Axis{Min: 0.5, Max: 0.9}, "0.5 0.6 0.7 0.8 0.9"},
		{svgchart.Axis{Min: 0.002, Max: 30, Log: true}, "0.01 0.1 1 10"},
		{svgchart.Axis{Min: 1.5, Max: 9, Log: true}, "2 5"},
		{svgchart.Axis{Min: 1, Max: 1}, ""},
		{svgchart.Axis{Min: 0, Max: 10, Ticks: []svgchart.Tick{{-1, "out"}, {5, "five"}}}, "five"},
	} {
		c := &svgchart.Chart{Width: 300, Height: 200, X: tt.axis, Y: svgchart.Axis{Min: 0, Max: 1, Ticks: []svgchart.Tick{}}}
		var got []string
		for _, m := range regexp.MustCompile(`text-anchor="middle">([^<]*)</text>`).FindAllStringSubmatch(string(c.SVG()), -1) {
			got = append(got, m[1])
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("%+v: ticks %q, want %q", tt.axis, got, tt.want)
		}
	}
}
