package bench

import (
	"fmt"
	"sort"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Second is one second of the measured window: the responses completed
// in it, the errors counted in it and the corrected latencies recorded in
// it (requests that completed, timed out or were cut off by the end then).
type Second struct {
	Index    int // seconds since the start of the measured window
	Requests int64
	Errors   int64
	Latency  *hdrhistogram.Histogram
}

// SecondSummary is a Second in --json: its figures and, for merging, its
// histogram encoded.
type SecondSummary struct {
	Second    int     `json:"second"`
	Requests  int64   `json:"requests"`
	Errors    int64   `json:"errors"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	MaxMs     float64 `json:"max_ms"`
	Histogram string  `json:"histogram"`
}

// mergeThreadSeconds adds one thread's seconds to the series.
func mergeThreadSeconds(series []Second, ts []threadSecond) []Second {
	add := make([]Second, 0, len(ts))
	for _, t := range ts {
		h := newHistogram()
		for _, b := range t.bars {
			_ = h.RecordValues(b.From, b.Count)
		}
		add = append(add, Second{Index: t.idx, Requests: t.requests, Errors: t.errors, Latency: h})
	}
	return mergeSeries(series, add)
}

// mergeSeries adds the seconds of b to a, second by second.
func mergeSeries(a, b []Second) []Second {
	byIdx := map[int]int{}
	for i, s := range a {
		byIdx[s.Index] = i
	}
	for _, s := range b {
		i, ok := byIdx[s.Index]
		if !ok {
			h := newHistogram()
			if s.Latency != nil {
				h.Merge(s.Latency)
			}
			a = append(a, Second{Index: s.Index, Requests: s.Requests, Errors: s.Errors, Latency: h})
			byIdx[s.Index] = len(a) - 1
			continue
		}
		a[i].Requests += s.Requests
		a[i].Errors += s.Errors
		if s.Latency != nil {
			a[i].Latency.Merge(s.Latency)
		}
	}
	sort.Slice(a, func(i, j int) bool { return a[i].Index < a[j].Index })
	return a
}

// fillSeries makes the series dense over n seconds: a second in which
// nothing completed (a stall) is there with zero requests.
func fillSeries(series []Second, n int) []Second {
	out := make([]Second, 0, max(n, len(series)))
	j := 0
	for i := 0; i < n || j < len(series); i++ {
		if j < len(series) && series[j].Index == i {
			out = append(out, series[j])
			j++
			continue
		}
		if i >= n {
			break
		}
		out = append(out, Second{Index: i, Latency: newHistogram()})
	}
	return out
}

func summarizeSeries(series []Second) []SecondSummary {
	out := make([]SecondSummary, 0, len(series))
	for _, s := range series {
		enc, _ := encode(s.Latency)
		out = append(out, SecondSummary{Second: s.Index, Requests: s.Requests, Errors: s.Errors,
			P50Ms: Millis(s.Latency.ValueAtPercentile(50)), P99Ms: Millis(s.Latency.ValueAtPercentile(99)),
			MaxMs: Millis(s.Latency.Max()), Histogram: enc})
	}
	return out
}

func seriesFromSummary(ss []SecondSummary) ([]Second, error) {
	out := make([]Second, 0, len(ss))
	for _, s := range ss {
		if s.Second < 0 {
			return nil, fmt.Errorf("series: second %d", s.Second)
		}
		h, err := decodeHistogram(s.Histogram, histMax)
		if err != nil {
			return nil, fmt.Errorf("series: second %d: %w", s.Second, err)
		}
		out = append(out, Second{Index: s.Second, Requests: s.Requests, Errors: s.Errors, Latency: h})
	}
	return out, nil
}
