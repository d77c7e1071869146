package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/linkgate/linkgate/bench"
)

func TestParseWrk(t *testing.T) {
	for _, c := range []struct {
		file string
		want map[string]float64
	}{
		{"wrk-ok.txt", map[string]float64{"rps": 18878.45, "requests": 20601, "avg": 9.40, "p50": 0.143, "p75": 6.33,
			"p90": 37.26, "p99": 91.24, "errors": 0, "non2xx": 0}},
		{"wrk-404.txt", map[string]float64{"rps": 6578.58, "requests": 6628, "avg": 42.27, "p50": 0.591, "p99": 290.36,
			"non2xx": 6628}},
	} {
		out, err := os.ReadFile(filepath.Join("testdata", c.file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseWrk(out)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		for k, want := range c.want {
			if g, ok := got[k]; !ok || !near(g, want) {
				t.Errorf("%s: %s = %v (present %v), want %v", c.file, k, g, ok, want)
			}
		}
	}
}

func TestParseWrkSocketErrorsAndUnits(t *testing.T) {
	out := []byte(`    Latency     1.50s    2.00m   3.00m   50.00%
     50%    1.00m
     99%    2.00s
  10 requests in 1.00s, 1.00KB read
  Socket errors: connect 1, read 2, write 3, timeout 4
Requests/sec:     10.00
`)
	got, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	if got["errors"] != 10 || got["avg"] != 1500 || got["p50"] != 60000 || got["p99"] != 2000 {
		t.Errorf("got %v", got)
	}
}

func TestParseWrkRejectsOtherOutput(t *testing.T) {
	for _, out := range []string{"", "unable to connect to 127.0.0.1:1 Connection refused\n", "Requests/sec: 5\n",
		"  5 requests in 1s\nRequests/sec: x\n", "    Latency  5parsecs\n"} {
		if _, err := parseWrk([]byte(out)); err == nil {
			t.Errorf("parseWrk(%q) succeeded", out)
		}
	}
}

func TestParseLinkgateJSON(t *testing.T) {
	s := bench.Summary{RequestsPerSec: 5000, Requests: 25000,
		Latency:     bench.LatencySummary{MeanMs: 0.2, MaxMs: 3, Percentiles: map[string]float64{"50": 0.1, "99.9": 2}},
		Uncorrected: bench.LatencySummary{Percentiles: map[string]float64{"50": 0.07, "99": 0.5}},
		Errors:      bench.Errors{Connect: 1, Timeout: 2, Status: map[int]int64{503: 4}},
		Generator:   bench.GeneratorCheck{SendLag: bench.LatencySummary{Percentiles: map[string]float64{"99": 0.3}}},
	}
	b, _ := json.Marshal(s)
	path := filepath.Join(t.TempDir(), "run.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := parseLinkgateJSON(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"rps": 5000, "requests": 25000, "avg": 0.2, "max": 3, "p50": 0.1, "p99.9": 2,
		"up50": 0.07, "up99": 0.5, "errors": 3, "non2xx": 4, "lag99": 0.3}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
	}
}

func TestGeneratorArgs(t *testing.T) {
	tg := &Target{Name: "x", URL: "http://127.0.0.1:1/", Bin: "wrk", Threads: 2, Conns: 16, Duration: 5 * time.Second, Lua: "a.lua", Args: []string{"-H", "A: b"}}
	got := wrkArgs(tg, "")
	want := []string{"wrk", "-t2", "-c16", "-d5s", "--latency", "-s", "a.lua", "-H", "A: b", "http://127.0.0.1:1/"}
	if !equal(got, want) {
		t.Errorf("wrk args %q, want %q", got, want)
	}
	tg.Bin, tg.Rate, tg.Warmup, tg.Lua, tg.Args = "lg", 5000, 2*time.Second, "", nil
	got = linkgateArgs(tg, "/tmp/r.json")
	want = []string{"lg", "bench", "-t2", "-c16", "-d5s", "--json", "/tmp/r.json", "-R5000", "--warmup", "2s", "http://127.0.0.1:1/"}
	if !equal(got, want) {
		t.Errorf("linkgate args %q, want %q", got, want)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func near(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 }

func TestParseVegeta(t *testing.T) {
	ok, _ := os.ReadFile("testdata/vegeta.json")
	got, err := parseVegeta(ok)
	if err != nil {
		t.Fatal(err)
	}
	// 6813 requests over 1.078367748 s + 313236 ns of wait.
	if r := got["rps"]; r < 6315 || r > 6317 || got["requests"] != 6813 || !near(got["p50"], 0.26264) || !near(got["p99"], 13.3924) || got["non2xx"] != 0 {
		t.Errorf("vegeta.json: %v", got)
	}
	bad, _ := os.ReadFile("testdata/vegeta-404.json")
	if got, err := parseVegeta(bad); err != nil || got["non2xx"] != 16653 || got["rps"] < 16000 {
		t.Errorf("vegeta-404.json: %v %v", got, err)
	}
	if _, err := parseVegeta([]byte(`{"requests":0}`)); err == nil {
		t.Error("no requests: no error")
	}
	if _, err := parseVegeta([]byte(`Requests/sec: 5`)); err == nil {
		t.Error("not JSON: no error")
	}
}

func TestParseH2load(t *testing.T) {
	ok, _ := os.ReadFile("testdata/h2load.txt")
	got, err := parseH2load(ok)
	if err != nil {
		t.Fatal(err)
	}
	if got["rps"] != 12194 || got["requests"] != 24388 || got["errors"] != 0 || got["non2xx"] != 0 || !near(got["avg"], 7.58) {
		t.Errorf("h2load.txt: %v", got)
	}
	bad, _ := os.ReadFile("testdata/h2load-404.txt")
	if got, err := parseH2load(bad); err != nil || got["non2xx"] != 4087 || got["requests"] != 4087 {
		t.Errorf("h2load-404.txt: %v %v", got, err)
	}
	if _, err := parseH2load([]byte("starting benchmark...\n")); err == nil {
		t.Error("no summary: no error")
	}
	a := h2loadArgs(&Target{Bin: "h2load", URL: "https://x/", Threads: 1, Conns: 10, Streams: 4, Duration: 5 * time.Second}, "")
	if !equal(a, []string{"h2load", "-t1", "-c10", "-m4", "-D", "5s", "https://x/"}) {
		t.Errorf("args %q", a)
	}
	a = h2loadArgs(&Target{Bin: "h2load", URL: "https://x/", Threads: 1, Conns: 10, Duration: 5 * time.Second}, "/tmp/l")
	if !equal(a, []string{"h2load", "-t1", "-c10", "-m1", "-D", "5s", "--log-file=/tmp/l", "https://x/"}) {
		t.Errorf("args %q", a)
	}
}

// h2load-log.tsv is a real --log-file of 200 requests (h2load 1.52 -c2
// -m10 -n200 against nginx http2); its 100th, 180th, 198th and 200th
// times, sorted, are 225, 456, 2839 and 2846 µs.
func TestParseH2loadLog(t *testing.T) {
	b, _ := os.ReadFile("testdata/h2load-log.tsv")
	got, err := parseH2loadLog(b)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"p50": 0.225, "p90": 0.456, "p99": 2.839, "p99.9": 2.846, "max": 2.846}
	for k, w := range want {
		if !near(got[k], w) {
			t.Errorf("%s = %v, want %v", k, got[k], w)
		}
	}
	for _, bad := range []string{"", "1\t200\n", "1\t200\tx\n"} {
		if _, err := parseH2loadLog([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
