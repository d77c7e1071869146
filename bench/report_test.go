package bench_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/linkgate/linkgate/bench"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -run %s -update to accept):\n--- got\n%s\n--- want\n%s", name, t.Name(), got, want)
	}
}

func hist(values ...int64) *hdrhistogram.Histogram {
	h := hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)
	for _, v := range values {
		_ = h.RecordValue(v)
	}
	return h
}

// syntheticResult is a fixed, deterministic result for the golden files.
func syntheticResult(rate float64) *bench.Result {
	var lat, unc []int64
	for i := int64(1); i <= 2000; i++ {
		lat = append(lat, 200+i*3+(i*i)%97)
		unc = append(unc, 150+i*2+(i*i)%89)
	}
	lat = append(lat, 45_000, 309_250, 4_410_000)
	unc = append(unc, 40_000)
	return &bench.Result{
		URL: "http://127.0.0.1:18080/", Threads: 2, Connections: 50, Rate: rate,
		Duration: 20 * time.Second, Elapsed: 20 * time.Second,
		Requests: 99723, Bytes: 11_471_000,
		Errors:      bench.Errors{Read: 2, Timeout: 1, Status: map[int]int64{404: 7, 503: 3}},
		Latency:     hist(lat...),
		Uncorrected: hist(unc...),
		SendLag:     hist(5, 7, 9, 11, 40, 60),
		ReqPerSec:   hist(2480, 2500, 2510, 2495, 2502, 2499, 2501),
	}
}

// The text report keeps wrk2's structure byte for byte: the golden files
// were checked against wrk2's printf formats (see docs/bench.md).
func TestWriteTextGolden(t *testing.T) {
	tests := []struct {
		name string
		rate float64
		opt  bench.TextOptions
	}{
		{"report_plain.golden", 0, bench.TextOptions{}},
		{"report_latency.golden", 0, bench.TextOptions{Latency: true}},
		{"report_rate_u.golden", 5000, bench.TextOptions{Latency: true, Uncorrected: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			r := syntheticResult(tt.rate)
			if err := bench.WriteHeader(&b, r.URL, r.Duration, r.Threads, r.Connections); err != nil {
				t.Fatal(err)
			}
			_ = bench.WriteCalibration(&b, 976*time.Microsecond)
			if err := bench.WriteText(&b, r, tt.opt); err != nil {
				t.Fatal(err)
			}
			golden(t, tt.name, b.Bytes())
		})
	}
}

func TestWriteSpectrumGolden(t *testing.T) {
	var b bytes.Buffer
	if err := bench.WriteSpectrum(&b, syntheticResult(0).Latency); err != nil {
		t.Fatal(err)
	}
	golden(t, "spectrum.hgrm", b.Bytes())
	lines := strings.Split(b.String(), "\n")
	if lines[0] != "       Value   Percentile   TotalCount 1/(1-Percentile)" || lines[1] != "" {
		t.Errorf("header %q %q", lines[0], lines[1])
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	r := syntheticResult(5000)
	r.Requests = 90000 // 4500/s: below 99% of the requested 5000/s
	if err := bench.WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	var s struct {
		Mode     string
		Requests int64
		Latency  struct {
			Percentiles map[string]float64 `json:"percentiles_ms"`
			Spectrum    []any
		}
		Errors    struct{ Status map[string]int64 }
		Generator struct {
			Limited bool
			Reasons []string
			SendLag struct{ Count int64 } `json:"send_lag"`
		}
		Warnings []string
	}
	if err := json.Unmarshal(b.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if s.Mode != "constant-rate" || s.Requests != 90000 || s.Latency.Percentiles["99.9"] == 0 ||
		len(s.Latency.Spectrum) < 10 || s.Errors.Status["404"] != 7 || s.Generator.SendLag.Count != 6 {
		t.Errorf("summary %+v", s)
	}
	if !s.Generator.Limited || len(s.Warnings) == 0 {
		t.Errorf("generator %+v warnings %v", s.Generator, s.Warnings)
	}
}

func TestLittlesLawWarning(t *testing.T) {
	r := syntheticResult(5000)
	r.Connections = 2
	found := false
	for _, w := range r.Warnings() {
		found = found || strings.Contains(w, "Little's law")
	}
	if !found {
		t.Errorf("warnings %q lack the Little's law warning", r.Warnings())
	}
}

// Errors name their kinds, only those that occurred, statuses in order.
func TestErrorsString(t *testing.T) {
	for _, tc := range []struct {
		e    bench.Errors
		want string
	}{
		{bench.Errors{}, ""},
		{bench.Errors{Status: map[int]int64{500: 0}}, ""},
		{bench.Errors{Status: map[int]int64{503: 3317}}, "503 ×3317"},
		{bench.Errors{Connect: 1, Timeout: 2, Handshake: 3, Status: map[int]int64{503: 5, 404: 7}}, "connect 1, timeout 2, tls_handshake 3, 404 ×7, 503 ×5"},
	} {
		if got := tc.e.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.e, got, tc.want)
		}
	}
}
