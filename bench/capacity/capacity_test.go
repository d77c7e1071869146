package capacity_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/linkgate/linkgate/bench"
	"github.com/linkgate/linkgate/bench/capacity"
	"github.com/linkgate/linkgate/internal/htmltest"
)

// fakeResult is what a step at rate would measure against a target whose
// p99 latency is p99 and that completes achieved requests per second.
func fakeResult(rate, achieved float64, p99 time.Duration) *bench.Result {
	h := hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)
	for i := range 1000 {
		v := int64(time.Millisecond / time.Microsecond)
		if i >= 985 {
			v = p99.Microseconds()
		}
		_ = h.RecordValue(v)
	}
	return &bench.Result{
		Rate: rate, Elapsed: 10 * time.Second, Requests: int64(achieved * 10),
		Latency: h, Uncorrected: h, SendLag: hdrhistogram.New(1, 1e6, 3), ReqPerSec: h,
		Errors: bench.Errors{Status: map[int]int64{}},
	}
}

// kneeTrial is a target that holds its latency up to knee req/s and
// breaks above; flaky rates fail every other time.
func kneeTrial(knee float64, flaky map[float64]bool) capacity.Trial {
	calls := map[float64]int{}
	return func(_ context.Context, _ string, rate float64) (*bench.Result, error) {
		calls[rate]++
		if rate > knee || (flaky[rate] && calls[rate]%2 == 0) {
			return fakeResult(rate, rate, 500*time.Millisecond), nil
		}
		return fakeResult(rate, rate, 10*time.Millisecond), nil
	}
}

func options() capacity.Options {
	o := capacity.Defaults
	o.SLOs = []capacity.SLO{{Percentile: 99.9, Max: 70 * time.Millisecond}}
	return o
}

func TestSearchBracketsAndBisects(t *testing.T) {
	o := options()
	out, err := capacity.Search(context.Background(), o, "t", kneeTrial(730, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Capacity > 730 || out.Capacity < 730*(1-o.Precision) || out.Upper <= 730 {
		t.Errorf("capacity %v upper %v, want within 5%% below 730", out.Capacity, out.Upper)
	}
	if out.Trials != o.Repeat || out.Passes != o.Repeat {
		t.Errorf("trials %d passes %d at the capacity", out.Trials, out.Passes)
	}
	rates := []float64{}
	for _, s := range out.Steps {
		rates = append(rates, s.Rate)
	}
	if rates[0] != 100 || rates[1] != 200 || rates[2] != 400 || rates[3] != 800 {
		t.Errorf("bracketing steps %v, want doubling from --min", rates)
	}
	if !strings.Contains(out.Summary(), "capacity ") {
		t.Error(out.Summary())
	}
}

func TestSearchEdges(t *testing.T) {
	o := options()
	o.Max = 1000
	out, _ := capacity.Search(context.Background(), o, "t", kneeTrial(5000, nil), nil)
	if !out.AboveMax || out.Capacity != 1000 {
		t.Errorf("above max: %+v", out)
	}
	out, _ = capacity.Search(context.Background(), o, "t", kneeTrial(50, nil), nil)
	if !out.BelowMin || out.Capacity != 0 || !strings.Contains(out.Summary(), "below") {
		t.Errorf("below min: %+v", out)
	}
}

// Near the knee the same rate can pass and then fail: the search must not
// report a rate that does not hold in every confirmation trial.
func TestSearchRepeatsNearTheEdge(t *testing.T) {
	o := options()
	o.Retries = 0 // a failure counts at once
	var flakyRate float64
	// Find the rate the search would confirm, then make it flaky.
	out, _ := capacity.Search(context.Background(), o, "t", kneeTrial(730, nil), nil)
	flakyRate = out.Capacity
	out, err := capacity.Search(context.Background(), o, "t", kneeTrial(730, map[float64]bool{flakyRate: true}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Capacity >= flakyRate || out.Capacity == 0 {
		t.Errorf("capacity %v, want below the flaky %v", out.Capacity, flakyRate)
	}
}

// A step that fails once and passes when run again (a stall of the machine)
// does not lower the bracket: the search finds what it finds without the
// stall, and counts the flaky step.
func TestSearchRetriesAFailingStep(t *testing.T) {
	o := options()
	clean, _ := capacity.Search(context.Background(), o, "t", kneeTrial(730, nil), nil)
	for _, flaky := range []float64{100, 400, 600, clean.Capacity} {
		knee, stalled := kneeTrial(730, nil), false
		trial := func(ctx context.Context, name string, rate float64) (*bench.Result, error) {
			if rate == flaky && !stalled {
				stalled = true // the machine stalls once, in the first trial at this rate
				return fakeResult(rate, rate, 500*time.Millisecond), nil
			}
			return knee(ctx, name, rate)
		}
		out, err := capacity.Search(context.Background(), o, "t", trial, nil)
		if err != nil {
			t.Fatal(err)
		}
		if out.Capacity != clean.Capacity || out.Upper != clean.Upper {
			t.Errorf("one failure at %v: capacity %v (%v–%v), want %v as without it", flaky, out.Capacity, out.Capacity, out.Upper, clean.Capacity)
		}
		retried := 0
		for _, st := range out.Steps {
			if st.Retried {
				retried++
			}
		}
		if retried == 0 || out.FlakySteps != 1 || !strings.Contains(out.Summary(), "1 flaky step") {
			t.Errorf("one failure at %v: %d retried steps, %d flaky: %s", flaky, retried, out.FlakySteps, out.Summary())
		}
	}
}

func TestEvaluate(t *testing.T) {
	o := options()
	o.SLOs = append(o.SLOs, capacity.SLO{Percentile: 50, Max: 500 * time.Microsecond})
	pass, reasons := capacity.Evaluate(&o, 100, fakeResult(100, 90, 10*time.Millisecond))
	if pass || len(reasons) != 2 {
		t.Errorf("pass %v reasons %q: want the p50 SLO and the achieved rate", pass, reasons)
	}
	r := fakeResult(100, 100, 10*time.Millisecond)
	r.Errors.Status[503] = 4
	r.Errors.Timeout = 1
	o.SLOs = o.SLOs[:1]
	// The reason says which errors: a 503 from admission control is not
	// a timeout.
	if pass, reasons := capacity.Evaluate(&o, 100, r); pass || len(reasons) != 1 || reasons[0] != "errors 5 over budget 0.1% (timeout 1, 503 ×4)" {
		t.Errorf("errors over budget: pass %v, reasons %q", pass, reasons)
	}
	o.ErrorBudget = 0.01
	if pass, reasons := capacity.Evaluate(&o, 100, r); !pass {
		t.Errorf("errors within budget failed: %q", reasons)
	}
	// The generator's lag is in the corrected latency: a step that passes
	// despite it passes; one that fails says the generator was late too.
	_ = r.SendLag.RecordValues(5000, 10)
	if pass, reasons := capacity.Evaluate(&o, 100, r); !pass {
		t.Errorf("a step within its SLO failed on the generator's lag alone: %q", reasons)
	}
	if st := (capacity.Step{Rate: 100, Result: r, Pass: true}); !strings.Contains(st.Verdict(), "send lag p99 5.0") {
		t.Errorf("verdict %q does not mention the generator's lag", st.Verdict())
	}
	// A failure by more than the lag explains is the target's; one by no
	// more may be the generator's.
	slow := fakeResult(100, 100, time.Second)
	_ = slow.SendLag.RecordValues(5000, 10)
	if pass, reasons := capacity.Evaluate(&o, 100, slow); pass || len(reasons) != 1 {
		t.Errorf("p99 1 s with a 5 ms lag: pass %v, reasons %q; want the SLO alone", pass, reasons)
	}
	_ = slow.SendLag.RecordValues(950000, 10)
	if pass, reasons := capacity.Evaluate(&o, 100, slow); pass || len(reasons) != 2 || !strings.Contains(reasons[1], "generator-limited") {
		t.Errorf("p99 1 s with a 950 ms lag: pass %v, reasons %q; want the generator named", pass, reasons)
	}
	short := fakeResult(100, 98, time.Millisecond)
	_ = short.SendLag.RecordValues(5000, 10)
	if pass, reasons := capacity.Evaluate(&o, 100, short); pass || len(reasons) != 1 {
		t.Errorf("achieved 98%% with a 5 ms lag over 10 s: reasons %q; want the rate alone", reasons)
	}
	_ = short.SendLag.RecordValues(200000, 10)
	if pass, reasons := capacity.Evaluate(&o, 100, short); pass || len(reasons) != 2 {
		t.Errorf("achieved 98%% with a 200 ms lag over 10 s: reasons %q; want the generator named", reasons)
	}
}

// A generator late on every step, as one sharing a loaded machine: 2 ms
// late up to 600 req/s, which fails no step, and 100 ms late above, which
// is all that fails the steps there (the target keeps up to 730 req/s).
// The failures are run again, and the verdict says the capacity found may
// be the generator's.
func TestSearchWithALateGenerator(t *testing.T) {
	o := options()
	calls := map[float64]int{}
	trial := func(_ context.Context, _ string, rate float64) (*bench.Result, error) {
		calls[rate]++
		lag := 2 * time.Millisecond
		if rate > 600 {
			lag = 100 * time.Millisecond
		}
		r := fakeResult(rate, rate, 10*time.Millisecond+lag) // the lag is in the corrected latency
		_ = r.SendLag.RecordValues(lag.Microseconds(), 20)
		return r, nil
	}
	out, err := capacity.Search(context.Background(), o, "t", trial, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Capacity < 570 || out.Capacity > 600 || !out.GeneratorLimited || !strings.Contains(out.Summary(), "the generator may be the limit") {
		t.Errorf("capacity %v, want 600 - 5%%, generator-limited %v: %s", out.Capacity, out.GeneratorLimited, out.Summary())
	}
	if n := calls[out.Upper]; n < 1+o.Retries+1 {
		t.Errorf("the failure at %v with the generator late ran %d times, want %d", out.Upper, n, 1+o.Retries+1)
	}
	// The target's own failures are not the generator's, late or not.
	clean, _ := capacity.Search(context.Background(), o, "t", kneeTrial(730, nil), nil)
	late, _ := capacity.Search(context.Background(), o, "t", func(ctx context.Context, name string, rate float64) (*bench.Result, error) {
		r, _ := kneeTrial(730, nil)(ctx, name, rate)
		_ = r.SendLag.RecordValues(5000, 20)
		return r, nil
	}, nil)
	if late.Capacity != clean.Capacity || late.GeneratorLimited {
		t.Errorf("with the generator 5 ms late: capacity %v (want %v), generator-limited %v", late.Capacity, clean.Capacity, late.GeneratorLimited)
	}
}

func TestCompareAlternates(t *testing.T) {
	o := options()
	var order []string
	trial := func(ctx context.Context, target string, rate float64) (*bench.Result, error) {
		order = append(order, target)
		knee := map[string]float64{"a": 700, "b": 900}[target]
		return kneeTrial(knee, nil)(ctx, target, rate)
	}
	a, b, err := capacity.Compare(context.Background(), o, "a", "b", trial, nil)
	if err != nil {
		t.Fatal(err)
	}
	if order[0] != "a" || order[1] != "b" || order[2] != "a" {
		t.Errorf("steps ran in order %v, want alternating", order[:3])
	}
	ratio := b.Capacity / a.Capacity
	if math.Abs(ratio-900.0/700) > 0.1 {
		t.Errorf("capacities %v and %v, ratio %.3f", a.Capacity, b.Capacity, ratio)
	}
	rep := capacity.NewReport(&o, a, b)
	if rep.Ratio != ratio || len(rep.Targets) != 2 {
		t.Errorf("report ratio %v", rep.Ratio)
	}
}

// The HTML report is one self-contained file: an inline SVG chart drawn by
// internal/svgchart and the step table, no scripts or external resources.
func TestHTMLReport(t *testing.T) {
	o := options()
	out, _ := capacity.Search(context.Background(), o, "http://t/", kneeTrial(730, nil), nil)
	var b bytes.Buffer
	if err := capacity.WriteHTML(&b, &o, out); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{"<!DOCTYPE html>", "<svg", "</svg>", "p99.9=70ms", "capacity ", "<table>"} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, bad := range []string{"<script", "src=", "<link", "@import", "<?xml"} {
		if strings.Contains(html, bad) {
			t.Errorf("report contains %q: it must be self-contained", bad)
		}
	}
	var j bytes.Buffer
	if err := capacity.NewReport(&o, out).WriteJSON(&j); err != nil || !strings.Contains(j.String(), `"capacity"`) {
		t.Errorf("json %v %s", err, j.String()[:min(200, j.Len())])
	}
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	_ = capacity.WriteTableHeader(&b, false)
	_ = capacity.WriteTableRow(&b, capacity.Step{Rate: 600, Result: fakeResult(600, 600, 69310*time.Microsecond), Pass: true}, "")
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "p99.999") || !strings.Contains(lines[2], "69.31ms") || !strings.Contains(lines[2], "yes") {
		t.Errorf("table:\n%s", b.String())
	}
}

// A target that stalls once, at a random moment of any step — modelled,
// not timed: that step's measurement has one second in which almost
// nothing completed and the stall in its tail latency. For every step the
// clean search runs, a search in which that step stalls finds the same
// capacity and bracket, and says it met a stall.
func TestSearchIgnoresOneStall(t *testing.T) {
	o := options()
	o.StepDuration = 10 * time.Second
	withSeries := func(r *bench.Result, stalled int) *bench.Result {
		for i := range 10 {
			n := int64(r.Achieved())
			if i == stalled {
				n /= 20
			}
			r.Series = append(r.Series, bench.Second{Index: i, Requests: n})
		}
		return r
	}
	var clean []float64
	cleanOut, _ := capacity.Search(context.Background(), o, "t", kneeTrial(730, nil), func(s capacity.Step) { clean = append(clean, s.Rate) })
	for n := range clean {
		call, second := 0, rand.IntN(10)
		knee := kneeTrial(730, nil)
		trial := func(ctx context.Context, name string, rate float64) (*bench.Result, error) {
			if call++; call == n+1 {
				return withSeries(fakeResult(rate, rate, 300*time.Millisecond), second), nil
			}
			r, err := knee(ctx, name, rate)
			return withSeries(r, -1), err
		}
		out, err := capacity.Search(context.Background(), o, "t", trial, nil)
		if err != nil {
			t.Fatal(err)
		}
		if out.Capacity != cleanOut.Capacity || out.Upper != cleanOut.Upper || out.Stalls < 1 {
			t.Errorf("a stall in step %d (%v req/s, second %d): capacity %v–%v, %d stalls; want %v–%v as without it: %s",
				n+1, clean[n], second, out.Capacity, out.Upper, out.Stalls, cleanOut.Capacity, cleanOut.Upper, out.Summary())
		}
	}
}

// BenchmarkSearchFindsTheKnee searches a real target that serves one
// request at a time in 2 ms (a knee at exactly 500 req/s), once clean and
// once with a 300 ms stall at a random moment of the first steps, and
// reports the capacities found (the goal: 500 ± 10%, the stall not moving
// it). It is a timing figure on a shared machine, so a benchmark:
//
//	go test -run '^$' -bench SearchFindsTheKnee -benchtime 1x ./bench/capacity/
func BenchmarkSearchFindsTheKnee(b *testing.B) {
	for _, stall := range []bool{false, true} {
		b.Run(fmt.Sprintf("stall=%v", stall), func(b *testing.B) {
			var sum float64
			for b.Loop() {
				sum += findTheKnee(b, stall)
			}
			b.ReportMetric(sum/float64(b.N), "req/s-found")
		})
	}
}

// findTheKnee searches a target whose capacity is exactly 500 req/s; with
// stall, the target stops for 300 ms once, at a random moment of one of the
// first steps, which must not move the answer.
//
// The knee shows in the achieved rate, which the target caps at 500/s
// whatever the generator does; the SLO, p99 ≤ 100 ms, is far above the
// target's 2 ms below the knee, so that the generator's own lateness on a
// loaded machine (it shares the process and the cores with the target, and
// is in the corrected latency) cannot fail a step there, while the 300 ms
// stall does.
func findTheKnee(t testing.TB, stall bool) float64 {
	var (
		mu      sync.Mutex
		free    time.Time
		served  int
		stallAt = -1
	)
	if stall {
		stallAt = 60 + rand.IntN(400) // within the steps at 200 and 400 req/s
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// One server, FIFO: each request starts when the previous one is
		// done and takes 2 ms. Completion times follow that schedule even
		// when the sleep oversleeps, so the capacity is exactly 500/s.
		mu.Lock()
		start := time.Now()
		if free.After(start) {
			start = free
		}
		free = start.Add(2 * time.Millisecond)
		if served++; served == stallAt {
			free = free.Add(300 * time.Millisecond)
		}
		done := free
		mu.Unlock()
		time.Sleep(time.Until(done)) // deliberate: the fake server's service time (a queue of 2 ms per request)
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL + "/")
	req := bench.Static(bench.AppendRequest(nil, "GET", "/", bench.Fields{{Name: "Host", Value: u.Host}}, nil))

	o := capacity.Defaults
	o.SLOs = []capacity.SLO{{Percentile: 99, Max: 100 * time.Millisecond}}
	// A step is achieved when 99% of its requests complete within it:
	// with one-second steps the generator may lose 10 ms at the end of
	// one without failing it.
	o.Min, o.Max = 200, 2000
	o.StepDuration, o.Warmup = time.Second, 200*time.Millisecond
	o.Repeat = 2
	trial := func(ctx context.Context, _ string, rate float64) (*bench.Result, error) {
		conns := max(4, int(math.Ceil(2*rate*0.100)))
		res, err := bench.Run(ctx, bench.Config{
			URL: u, Threads: 1, Connections: conns, Duration: o.StepDuration, Warmup: o.Warmup,
			Timeout: 2 * time.Second, Rate: rate,
			NewRequester: func(int) (bench.Requester, error) { return req, nil },
		})
		// Each step starts with an idle target: the requests the last one
		// left in flight came on connections the generator has closed
		// since, which a server that noticed would drop. (Left queued, up
		// to 150 of them at 800 req/s, they would hold up the next step by
		// 300 ms.)
		mu.Lock()
		free = time.Time{}
		mu.Unlock()
		return res, err
	}
	out, err := capacity.Search(context.Background(), o, u.String(), trial, func(s capacity.Step) {
		t.Logf("rate %5.0f p99 %-9s achieved %6.1f lag p99 %-9s pass %v retried %v %v", s.Rate,
			bench.FormatTimeUS(float64(s.Result.Latency.ValueAtPercentile(99))), s.Result.Achieved(),
			bench.FormatTimeUS(float64(s.Result.SendLag.ValueAtPercentile(99))), s.Pass, s.Retried, s.Reasons)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.Summary())
	return out.Capacity
}

func TestStallInTheSeries(t *testing.T) {
	second := func(i int, n int64) bench.Second { return bench.Second{Index: i, Requests: n} }
	step := func(counts ...int64) *bench.Result {
		r := fakeResult(100, 100, time.Second)
		r.Elapsed = time.Duration(len(counts)) * time.Second
		for i, n := range counts {
			r.Series = append(r.Series, second(i, n))
		}
		return r
	}
	o := options()
	for _, c := range []struct {
		name   string
		result *bench.Result
		stall  bool
	}{
		{"one stalled second", step(100, 100, 3, 197, 100, 100), true},
		{"overload: every second short", step(70, 60, 65, 60, 70, 60), false},
		{"too short to tell", step(100, 3), false},
		{"no stall", step(100, 99, 100, 98, 100, 100), false},
	} {
		calls := 0
		trial := func(_ context.Context, _ string, rate float64) (*bench.Result, error) {
			calls++
			if rate == 100 && calls == 1 {
				return c.result, nil
			}
			return kneeTrial(730, nil)(context.Background(), "t", rate)
		}
		out, err := capacity.Search(context.Background(), o, "t", trial, nil)
		if err != nil {
			t.Fatal(err)
		}
		first := out.Steps[0]
		if got := first.Stall != ""; got != c.stall && !first.Pass {
			t.Errorf("%s: stall %q", c.name, first.Stall)
		}
		if c.stall && (out.Stalls != 1 || !strings.Contains(out.Summary(), "1 failure(s) came with a short stall")) {
			t.Errorf("%s: %d stalls counted: %s", c.name, out.Stalls, out.Summary())
		}
	}
}

func TestParseSLO(t *testing.T) {
	tests := []struct {
		in   string
		want capacity.SLO
		ok   bool
	}{
		{"p99.9=70ms", capacity.SLO{Percentile: 99.9, Max: 70 * time.Millisecond}, true},
		{"P50=2ms", capacity.SLO{Percentile: 50, Max: 2 * time.Millisecond}, true},
		{"p100=1s", capacity.SLO{Percentile: 100, Max: time.Second}, true},
		{"max=1", capacity.SLO{Percentile: 100, Max: time.Second}, true},
		{"p99.9", capacity.SLO{}, false},
		{"99=70ms", capacity.SLO{}, false},
		{"p0=1ms", capacity.SLO{}, false},
		{"p101=1ms", capacity.SLO{}, false},
		{"p99=0ms", capacity.SLO{}, false},
		{"p99=-1ms", capacity.SLO{}, false},
		{"pNaN=1ms", capacity.SLO{}, false},
		{"p1e1=1ms", capacity.SLO{}, false},
		{"p99=fast", capacity.SLO{}, false},
	}
	for _, tt := range tests {
		got, err := capacity.ParseSLO(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseSLO(%q) = %+v, %v", tt.in, got, err)
		}
	}
	if s := (capacity.SLO{Percentile: 99.9, Max: 70 * time.Millisecond}).String(); s != "p99.9=70ms" {
		t.Errorf("String() = %q", s)
	}
}

func TestParseShare(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"0.1%", 0.001, true},
		{"0.001", 0.001, true},
		{"5 %", 0.05, true},
		{"0", 0, true},
		{"100%", 1, true},
		{"101%", 0, false},
		{"2", 0, false},
		{"-1%", 0, false},
		{"NaN", 0, false},
		{"%", 0, false},
	}
	for _, tt := range tests {
		got, err := capacity.ParseShare(tt.in)
		if (err == nil) != tt.ok || math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("ParseShare(%q) = %v, %v", tt.in, got, err)
		}
	}
}

func FuzzParseSLO(f *testing.F) {
	for _, s := range []string{"p99.9=70ms", "p50=1", "max=2s", "p=1", "p99=", "=", "p1e9=1s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		slo, err := capacity.ParseSLO(s)
		if err != nil {
			return
		}
		if !(slo.Percentile > 0 && slo.Percentile <= 100) || slo.Max <= 0 {
			t.Fatalf("ParseSLO(%q) = %+v", s, slo)
		}
		back, err := capacity.ParseSLO(slo.String())
		if err != nil || back != slo {
			t.Fatalf("round trip of %q: %+v %v", slo.String(), back, err)
		}
	})
}

func FuzzParseShare(f *testing.F) {
	for _, s := range []string{"0.1%", "0.001", "1e-3", "100%", "-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := capacity.ParseShare(s)
		if err == nil && !(v >= 0 && v <= 1) {
			t.Fatalf("ParseShare(%q) = %v", s, v)
		}
	})
}

// The targets' URLs are shown as text in the HTML report, whatever they
// hold.
func TestHTMLReportEscapes(t *testing.T) {
	o := options()
	for _, v := range htmltest.Hostile("target") {
		a, b, err := capacity.Compare(context.Background(), o, v, "http://b/", kneeTrial(730, nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		var page bytes.Buffer
		if err := capacity.WriteHTML(&page, &o, a, b); err != nil {
			t.Fatal(err)
		}
		htmltest.Check(t, page.String(), []string{"A " + v})
	}
}
