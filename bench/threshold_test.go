package bench_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/bench"
)

func TestParseThreshold(t *testing.T) {
	for _, c := range []struct {
		in     string
		metric string
		op     string
		value  float64
		share  bool
	}{
		{"p99.9<70ms", "p99.9", "<", 70000, false},
		{"P50 <= 2ms", "p50", "<=", 2000, false},
		{"max<1s", "max", "<", 1e6, false},
		{"mean>=250us", "mean", ">=", 250, false},
		{"errors<0.1%", "errors", "<", 0.001, true},
		{"errors<=10", "errors", "<=", 10, false},
		{"rps>900", "rps", ">", 900, false},
		{"rps>=1.5k", "rps", ">=", 1500, false},
	} {
		got, err := bench.ParseThreshold(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if got.Metric != c.metric || got.Op != c.op || got.Value != c.value || got.Share != c.share || got.String() != strings.TrimSpace(c.in) {
			t.Errorf("%q: got %+v", c.in, got)
		}
	}
	for _, bad := range []string{"", "p99.9", "p99.9=70ms", "<70ms", "p99.9<70", "p99.9<-1ms", "p0<1ms", "p101<1ms",
		"pinf<1ms", "latency<1ms", "errors<101%", "errors<1.5", "errors<x", "rps>fast", "rps>", "p99<<1ms", "p99.9<0ms"} {
		if _, err := bench.ParseThreshold(bad); err == nil {
			t.Errorf("%q: no error", bad)
		} else if !strings.Contains(err.Error(), "invalid threshold") {
			t.Errorf("%q: unclear error %v", bad, err)
		}
	}
}

func TestCheckThresholds(t *testing.T) {
	u := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("fail") != "" {
			w.WriteHeader(503)
		}
		time.Sleep(2 * time.Millisecond) // deliberate: the target's latency
	})
	c := config(u, 1, 2, time.Second, 100)
	res := run(t, c)
	parse := func(s string) bench.Threshold {
		th, err := bench.ParseThreshold(s)
		if err != nil {
			t.Fatal(err)
		}
		return th
	}
	// The rate reached depends on the machine's load: the rps thresholds
	// are taken either side of it (a fixed "rps>50" failed at 26 req/s).
	rps := res.Check([]bench.Threshold{parse("rps>0")})[0]
	if !rps.Pass {
		t.Fatalf("no rate: %s", rps.Describe())
	}
	verdicts := res.Check([]bench.Threshold{parse("p50<1s"), parse("p50<1ms"), parse("errors<0.1%"), parse("errors<1"),
		parse(fmt.Sprintf("rps>%g", rps.Got/2)), parse(fmt.Sprintf("rps>=%g", rps.Got*2)), parse("rps>500"), parse("max>=1ms"), parse("mean<1us")})
	want := []bool{true, false, true, true, true, false, false, true, false}
	for i, v := range verdicts {
		if v.Pass != want[i] {
			t.Errorf("%s: pass %v, want %v", v.Describe(), v.Pass, want[i])
		}
	}
	if d := verdicts[1].Describe(); !strings.HasPrefix(d, "p50<1ms: ") || !strings.HasSuffix(d, "BROKEN") {
		t.Errorf("describe %q", d)
	}
	u.RawQuery = "fail=1"
	res = run(t, config(u, 1, 1, time.Second, 50))
	v := res.Check([]bench.Threshold{parse("errors<10%"), parse("errors<=100")})
	if v[0].Pass || v[0].Got < 0.99 || !strings.Contains(v[0].Describe(), "100%") {
		t.Errorf("all 503: %s", v[0].Describe())
	}
	if v[1].Pass != (res.Errors.Total() <= 100) {
		t.Errorf("count: %s with %d errors", v[1].Describe(), res.Errors.Total())
	}
}

func FuzzParseThreshold(f *testing.F) {
	for _, s := range []string{"p99.9<70ms", "errors<0.1%", "rps>900", "max<=1s", "errors<10", "p50>1us", "rps>=1.5k"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		th, err := bench.ParseThreshold(s)
		if err != nil {
			return
		}
		if th.Value < 0 || th.Value != th.Value {
			t.Fatalf("%q: value %v", s, th.Value)
		}
		again, err := bench.ParseThreshold(th.String())
		if err != nil || again.Metric != th.Metric || again.Op != th.Op || again.Value != th.Value {
			t.Fatalf("%q does not round-trip: %+v vs %+v (%v)", s, th, again, err)
		}
	})
}
