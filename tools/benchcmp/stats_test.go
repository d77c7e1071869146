package main

import (
	"math"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{5, 5, 1, 9, 7}, 5},
	} {
		in := append([]float64(nil), c.in...)
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
		for i := range in {
			if in[i] != c.in[i] {
				t.Fatalf("median reordered its input: %v", c.in)
			}
		}
	}
	if !math.IsNaN(median(nil)) || !math.IsNaN(minOf(nil)) || !math.IsNaN(maxOf(nil)) {
		t.Error("statistics of no values must be NaN")
	}
}

func TestRatios(t *testing.T) {
	got := pairRatios([]float64{100, 200, 300}, []float64{50, 400})
	if len(got) != 2 || got[0] != 2 || got[1] != 0.5 {
		t.Errorf("pairRatios = %v, want [2 0.5] (only rounds both have)", got)
	}
	if !math.IsNaN(ratio(1, 0)) {
		t.Error("ratio(1, 0) must be NaN")
	}
	if got := scaleEach(1e6, []float64{5, 4}); got[0] != 200000 || got[1] != 250000 {
		t.Errorf("scaleEach = %v", got)
	}
}

func TestFormats(t *testing.T) {
	xs := []float64{150123.4, 149000.6, 151999.5}
	for _, c := range []struct{ got, want string }{
		{formatRange("%.0f", xs), "149001–152000"},
		{formatMedianRange("%.2f", []float64{1, 3, 2}), "2.00 (1.00–3.00)"},
		{formatEach("%.0f", xs), "150123 149001 152000"},
		{formatSorted("%.1f", []float64{3, 1, 2}), "1.0 2.0 3.0"},
		{reportLine("nginx (b)", xs), "nginx (b)                          median     150123 req/s  range 149001–152000  rounds: 150123 149001 152000"},
		{reportLineMs("p99 (c)", []float64{1.5, 2.25}), "p99 (c)                            median       1.88 ms     range 1.50–2.25  rounds: 1.50 2.25"},
	} {
		if c.got != c.want {
			t.Errorf("got  %q\nwant %q", c.got, c.want)
		}
	}
}
