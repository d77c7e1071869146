package bench_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/linkgate/linkgate/bench"
)

// roundTrip is what bench merge reads: the result written as --json.
func roundTrip(t *testing.T, r *bench.Result) *bench.Result {
	t.Helper()
	b, err := json.Marshal(r.Summarize(true))
	if err != nil {
		t.Fatal(err)
	}
	var s bench.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	back, err := bench.ResultFromSummary(&s)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

func TestMergeIsExact(t *testing.T) {
	u := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("slow") != "" {
			time.Sleep(3 * time.Millisecond) // deliberate: the slow requests' latency
		}
	})
	a := run(t, config(u, 1, 2, time.Second, 200))
	u2 := *u
	u2.RawQuery = "slow=1"
	b := run(t, config(&u2, 1, 2, time.Second, 100))
	m, err := bench.Merge([]*bench.Result{roundTrip(t, a), roundTrip(t, b)})
	if err != nil {
		t.Fatal(err)
	}
	direct := a.Latency
	direct.Merge(b.Latency)
	if !m.Latency.Equals(direct) {
		t.Error("merged latency histogram differs from the two histograms merged directly")
	}
	if m.Requests != a.Requests+b.Requests || m.Threads != 2 || m.Connections != 4 || m.Rate != 300 {
		t.Errorf("merged counts: %d requests, %d threads, %d connections, rate %v", m.Requests, m.Threads, m.Connections, m.Rate)
	}
	var series int64
	for _, s := range m.Series {
		series += s.Latency.TotalCount()
	}
	if series != m.Latency.TotalCount() {
		t.Errorf("per-second series hold %d latencies, the histogram %d", series, m.Latency.TotalCount())
	}
	if _, err := bench.ResultFromSummary(&bench.Summary{}); err == nil {
		t.Error("a summary without histograms: no error")
	}
}

// Two generators at R/2 each against one server, merged, measure what one
// generator at R does: the same count of requests planned and recorded,
// and a merged median that lies between the halves' (a median of the
// union does), within histogram precision. (That the merge is exact is
// TestMergeIsExact's; how close two runs' percentiles come is the
// machine's noise, not a property to test.)
func TestMergeTwoGeneratorsAtHalfRate(t *testing.T) {
	t.Parallel()
	u := serve(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2 * time.Millisecond) // deliberate: the target's latency
	})
	const rate, d = 200, time.Second
	one := run(t, config(u, 1, 8, d, rate))
	var halves [2]*bench.Result
	var wg sync.WaitGroup
	for i := range halves {
		wg.Add(1)
		go func() {
			defer wg.Done()
			halves[i] = run(t, config(u, 1, 4, d, rate/2))
		}()
	}
	wg.Wait()
	m, err := bench.Merge([]*bench.Result{roundTrip(t, halves[0]), roundTrip(t, halves[1])})
	if err != nil {
		t.Fatal(err)
	}
	want := int64(rate * d.Seconds()) // every request planned in the window, however late it ran
	if n, n1 := m.Latency.TotalCount(), one.Latency.TotalCount(); n != want || n1 != want {
		t.Errorf("latencies recorded: merged %d, one generator %d; want %d", n, n1, want)
	}
	if m.Rate != rate || m.Requests != halves[0].Requests+halves[1].Requests || m.Connections != 8 {
		t.Errorf("merged rate %v, %d requests, %d connections", m.Rate, m.Requests, m.Connections)
	}
	p1, p2, pm := halves[0].Latency.ValueAtPercentile(50), halves[1].Latency.ValueAtPercentile(50), m.Latency.ValueAtPercentile(50)
	if slack := max(p1, p2) / 500; pm < min(p1, p2)-slack || pm > max(p1, p2)+slack || min(p1, p2, one.Latency.ValueAtPercentile(50)) < 2000 {
		t.Errorf("p50 halves %dµs and %dµs, merged %dµs, one generator %dµs: want the merged between the halves, all ≥ 2 ms",
			p1, p2, pm, one.Latency.ValueAtPercentile(50))
	}
}

// FuzzMergeInput: bench merge reads files anyone may hand it. No JSON
// makes decoding or merging panic, and what decodes merges.
func FuzzMergeInput(f *testing.F) {
	r := &bench.Result{URL: "http://h/", Threads: 1, Connections: 2, Rate: 100, Duration: time.Second, Elapsed: time.Second}
	for _, h := range []**hdrhistogram.Histogram{&r.Latency, &r.Uncorrected, &r.SendLag, &r.ReqPerSec} {
		*h = hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)
		_ = (*h).RecordValue(1234)
	}
	r.Errors.Status = map[int]int64{503: 1}
	r.Series = []bench.Second{{Index: 0, Requests: 1, Latency: r.Latency}}
	good, _ := json.Marshal(r.Summarize(true))
	f.Add(good)
	f.Add([]byte(`{"histograms":{"latency":"HISTFAAAAB94nJNpmSzMwMDAxQABzFCaEUzOmTTLHsJ""}}`))
	f.Add([]byte(`{"series":[{"second":-1,"histogram":"x"}],"histograms":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s bench.Summary
		if json.Unmarshal(b, &s) != nil {
			return
		}
		res, err := bench.ResultFromSummary(&s)
		if err != nil {
			return
		}
		if _, err := bench.Merge([]*bench.Result{res, res}); err != nil {
			return
		}
	})
}

// A histogram of another geometry in a result file is refused before it
// is decoded: its header alone could ask for gigabytes.
func TestMergeInputGeometry(t *testing.T) {
	huge := hdrhistogram.New(1, 1<<62, 5)
	enc, _ := huge.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	ours := hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)
	good, _ := ours.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	rates, _ := hdrhistogram.New(1, 1<<40, 3).Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	for name, s := range map[string]bench.Summary{
		"latency": {Histograms: &bench.Histograms{Latency: string(enc), Uncorrected: string(good), SendLag: string(good), ThreadRate: string(rates)}},
		"series": {Histograms: &bench.Histograms{Latency: string(good), Uncorrected: string(good), SendLag: string(good), ThreadRate: string(rates)},
			Series: []bench.SecondSummary{{Second: 0, Histogram: string(enc)}}},
		"garbage": {Histograms: &bench.Histograms{Latency: "HISTFAAAACB4nJNpmSzMwMDAxQABzFCaEUzOmTTLHsJ", Uncorrected: string(good), SendLag: string(good), ThreadRate: string(rates)}},
	} {
		if _, err := bench.ResultFromSummary(&s); err == nil || (name != "garbage" && !strings.Contains(err.Error(), name)) {
			t.Errorf("%s: error %v", name, err)
		}
	}
}

// Two consecutive steps of 1 s make one run of 2 s: the second step's
// seconds follow the first's, counts and histograms add up, the rate is
// the steps' own.
func TestConcatSteps(t *testing.T) {
	u := serve(t, func(w http.ResponseWriter, r *http.Request) {})
	a := roundTrip(t, run(t, config(u, 1, 2, time.Second, 100)))
	b := roundTrip(t, run(t, config(u, 1, 2, time.Second, 100)))
	m, err := bench.Concat([]*bench.Result{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if m.Rate != 100 || m.Threads != 1 || m.Connections != 2 || m.Duration != 2*time.Second || m.Elapsed != a.Elapsed+b.Elapsed {
		t.Errorf("rate %v, %d threads, %d connections, duration %v, elapsed %v", m.Rate, m.Threads, m.Connections, m.Duration, m.Elapsed)
	}
	if m.Requests != a.Requests+b.Requests || m.Latency.TotalCount() != 200 {
		t.Errorf("%d requests, %d latencies; want %d and the 200 planned", m.Requests, m.Latency.TotalCount(), a.Requests+b.Requests)
	}
	var idx []int
	var n int64
	for _, s := range m.Series {
		idx = append(idx, s.Index)
		n += s.Latency.TotalCount()
	}
	if last := b.Series[len(b.Series)-1].Index + 1; n != 200 || idx[0] != 0 || idx[len(idx)-1] != last {
		t.Errorf("series seconds %v holding %d latencies: want all 200, the second step's from second 1 to %d", idx, n, last)
	}
}
