package htmlreport_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/linkgate/linkgate/bench"
	"github.com/linkgate/linkgate/bench/htmlreport"
	"github.com/linkgate/linkgate/internal/htmltest"
)

func hist(values ...int64) *hdrhistogram.Histogram {
	h := hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)
	for _, v := range values {
		_ = h.RecordValue(v)
	}
	return h
}

// result is a 5 s run at 100 req/s whose third second stalled: nothing
// completed in it, and the requests planned during it waited 800 ms.
func result() *bench.Result {
	r := &bench.Result{
		URL: "http://127.0.0.1:8080/", Threads: 1, Connections: 4, Rate: 100, Duration: 5 * time.Second, Elapsed: 5 * time.Second,
		Latency: hist(), Uncorrected: hist(), SendLag: hist(), ReqPerSec: hist(), Errors: bench.Errors{Status: map[int]int64{503: 2}},
	}
	for s := range 5 {
		sec := bench.Second{Index: s, Latency: hist()}
		if s != 2 {
			for i := range 100 {
				v := int64(1000 + 10*i)
				if s == 3 && i < 50 {
					v = 800000 - int64(i)*16000 // the stall's queue draining
				}
				_ = sec.Latency.RecordValue(v)
				_ = r.Latency.RecordValue(v)
				_ = r.Uncorrected.RecordValue(1000 + 10*int64(i))
			}
			sec.Requests = 100
		}
		r.Requests += sec.Requests
		r.Series = append(r.Series, sec)
	}
	return r
}

func TestWrite(t *testing.T) {
	r := result()
	verdicts := r.Check([]bench.Threshold{mustThreshold(t, "p99<100ms"), mustThreshold(t, "rps>50")})
	var b bytes.Buffer
	if err := htmlreport.Write(&b, r, htmlreport.Options{Title: "linkgate bench", Verdicts: verdicts, Generated: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		"<title>linkgate bench: http://127.0.0.1:8080/</title>", "constant rate, 100 req/s",
		"<th>requests completed</th><td>400</td>", "<th>p99.9</th>", "status ≥ 400 2",
		`<li class="broken">p99&lt;100ms: `, "<li>rps&gt;50: ", "Latency over time", "Percentile spectrum",
		"Corrected latency, second by second", "Requests completed and errors per second", "Latency by percentile",
		"99.9%", "1970-01-01 00:00:00 UTC",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if n := strings.Count(page, "<svg"); n != 3 || strings.Contains(page, "<?xml") || strings.Contains(page, "NaN") {
		t.Errorf("%d inline charts (want 3), XML declaration or NaN in the page", n)
	}
}

// A run in which nothing completed still has a report, with empty charts.
func TestWriteEmpty(t *testing.T) {
	r := &bench.Result{URL: "http://127.0.0.1:1/", Threads: 1, Connections: 1, Duration: time.Second,
		Latency: hist(), Uncorrected: hist(), SendLag: hist(), ReqPerSec: hist(), Errors: bench.Errors{Connect: 3, Status: map[int]int64{}}}
	var b bytes.Buffer
	if err := htmlreport.Write(&b, r, htmlreport.Options{Title: "linkgate bench"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "closed loop") || !strings.Contains(b.String(), "no request completed") || strings.Count(b.String(), "<svg") != 3 {
		t.Errorf("report of an empty run:\n%s", b.String())
	}
}

func mustThreshold(t *testing.T, s string) bench.Threshold {
	t.Helper()
	th, err := bench.ParseThreshold(s)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// Every string of a run and its options that reaches the page — the title,
// the target's URL, the agents' names and errors, the reasons a run is
// invalid — is shown as text, whatever it holds.
func TestWriteEscapes(t *testing.T) {
	tests := []struct {
		field string
		set   func(r *bench.Result, o *htmlreport.Options, v string)
	}{
		{"title", func(_ *bench.Result, o *htmlreport.Options, v string) { o.Title = v }},
		{"url", func(r *bench.Result, _ *htmlreport.Options, v string) { r.URL = v }},
		{"agent", func(_ *bench.Result, o *htmlreport.Options, v string) {
			o.Agents = []bench.AgentSummary{{Agent: v, Problems: []string{"late"}}}
		}},
		{"agent error", func(_ *bench.Result, o *htmlreport.Options, v string) {
			o.Agents = []bench.AgentSummary{{Agent: "a1", Error: v}}
		}},
		{"invalid", func(_ *bench.Result, o *htmlreport.Options, v string) { o.Invalid = []string{v} }},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			for _, v := range htmltest.Hostile(tt.field) {
				r, o := result(), htmlreport.Options{Title: "linkgate bench"}
				tt.set(r, &o, v)
				var b bytes.Buffer
				if err := htmlreport.Write(&b, r, o); err != nil {
					t.Fatal(err)
				}
				want := v
				if tt.field == "agent error" {
					want = "failed: " + v
				}
				htmltest.Check(t, b.String(), []string{want})
			}
		})
	}
}
