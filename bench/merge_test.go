package bench_test

import (
	"encoding/json"
	"math"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/bench"
	"github.com/linkgate/linkgate/internal/testdep"
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
			time.Sleep(3 * time.Millisecond)
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
// generator at R does: the same count, and percentiles within what two
// runs of a noisy machine differ by.
func TestMergeTwoGeneratorsAtHalfRate(t *testing.T) {
	if testdep.Race {
		t.Skip("timing test; the race detector slows the target")
	}
	u := serve(t, func(w http.ResponseWriter, r *http.Request) { time.Sleep(2 * time.Millisecond) })
	const rate, d = 200, time.Second
	var one, m *bench.Result
	// A generator that says it was the limit (a busy machine stole its
	// core) measured nothing about merging: run again, at most twice.
	for attempt := 0; attempt < 3; attempt++ {
		one = run(t, config(u, 1, 8, d, rate))
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
		var err error
		if m, err = bench.Merge([]*bench.Result{roundTrip(t, halves[0]), roundTrip(t, halves[1])}); err != nil {
			t.Fatal(err)
		}
		l1, _ := one.GeneratorLimited()
		l2, _ := halves[0].GeneratorLimited()
		l3, _ := halves[1].GeneratorLimited()
		if !l1 && !l2 && !l3 {
			break
		}
		t.Logf("attempt %d: a generator was the limit; again", attempt+1)
	}
	want := float64(rate) * d.Seconds()
	for name, r := range map[string]*bench.Result{"one": one, "merged": m} {
		if math.Abs(float64(r.Requests)-want) > 0.05*want {
			t.Errorf("%s: %d requests, want %.0f ± 5%%", name, r.Requests, want)
		}
	}
	if m.Rate != rate || math.Abs(m.Achieved()-one.Achieved()) > 0.05*rate {
		t.Errorf("merged rate %v achieved %.1f, one generator %.1f", m.Rate, m.Achieved(), one.Achieved())
	}
	// The server adds 2 ms to every request: both medians are 2 ms and a
	// little. (Exactness is TestMergeIsExact's; here two runs on a shared
	// machine differ by its noise, which on a loaded 2-core machine moves
	// even the median by a third.)
	p1, p2 := one.Latency.ValueAtPercentile(50), m.Latency.ValueAtPercentile(50)
	if p1 < 2000 || p2 < 2000 || max(p1, p2) > 2*min(p1, p2) {
		t.Errorf("p50 one generator %dµs, merged %dµs", p1, p2)
	}
}
