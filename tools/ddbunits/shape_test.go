package main

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

func TestParseShape(t *testing.T) {
	for v, want := range map[string]shape{
		"uniform:100000":   {Name: "uniform", Links: 100000},
		"zipf:1.1:1000000": {Name: "zipf", Links: 1000000, S: 1.1},
	} {
		if got, err := parseShape(v); err != nil || got != want {
			t.Errorf("parseShape(%q) = %+v, %v", v, got, err)
		}
	}
	for _, bad := range []string{"", "uniform", "uniform:0", "zipf:1:100", "zipf:1.1", "pareto:2:10"} {
		if _, err := parseShape(bad); err == nil {
			t.Errorf("parseShape(%q) accepted", bad)
		}
	}
	if got := (shape{Name: "zipf", Links: 1000000, S: 1.1}).String(); got != "Zipf s=1.1 over 1M links" {
		t.Errorf("String() = %q", got)
	}
}

// Ids look like linkgate's generated ones and do not repeat.
func TestLinkID(t *testing.T) {
	seen := map[string]int{}
	for k := range 50_000 {
		id := linkID(k)
		if len(id) != 10 {
			t.Fatalf("linkID(%d) = %q", k, id)
		}
		if j, dup := seen[id]; dup {
			t.Fatalf("linkID(%d) = linkID(%d) = %q", k, j, id)
		}
		seen[id] = k
	}
	if id := linkID(7); id != "xGhOV3XGDZ" {
		t.Errorf("linkID(7) = %q: the ids changed, so figures of earlier runs measured other traffic", id)
	}
}

// The sequences follow their distribution: uniform covers the links
// evenly; Zipf gives rank k a share ∝ (k+1)^-s.
func TestSequence(t *testing.T) {
	const n = 400_000
	u := shape{Name: "uniform", Links: 1000}.sequence(n, 1)
	counts := make([]int, 1000)
	for _, k := range u {
		counts[k]++
	}
	for k, c := range counts {
		if c < 300 || c > 500 {
			t.Fatalf("uniform: link %d drawn %d times of %d, want about 400", k, c, n)
		}
	}
	z := shape{Name: "zipf", Links: 1_000_000, S: 1.1}
	seq := z.sequence(n, 1)
	var h float64
	for k := 1; k <= z.Links; k++ {
		h += math.Pow(float64(k), -z.S)
	}
	var top, second int
	for _, k := range seq {
		switch k {
		case 0:
			top++
		case 1:
			second++
		}
	}
	for rank, got := range []int{top, second} {
		want := n * math.Pow(float64(rank+1), -z.S) / h
		if math.Abs(float64(got)-want) > 0.05*want {
			t.Errorf("zipf: rank %d drawn %d times, want %.0f", rank, got, want)
		}
	}
	if again := z.sequence(1000, 1); again[10] != seq[10] {
		t.Error("the same seed gave another sequence")
	}
	if d := distinct([]int{3, 1, 3, 2, 1}); len(d) != 3 || d[0] != 3 || d[1] != 1 || d[2] != 2 {
		t.Errorf("distinct = %v", d)
	}
}

func TestSummarize(t *testing.T) {
	r := runResult{Load: loadResult{Redirects: 4000}, Units: []opUnits{
		{opKey{"GetItem", "link"}, opCount{Calls: 100, Units: 50}},
		{opKey{"UpdateItem", "link"}, opCount{Calls: 3000, Units: 3600, Failed: 10, Computed: 10}},
		{opKey{"PutItem", "stats"}, opCount{Calls: 20, Units: 190}},
		{opKey{"BatchGetItem", "stats"}, opCount{Calls: 5, Units: 12.5}},
	}}
	s := summarize(r)
	if s.WriteUnits != 3800 || s.RefusedWrites != 10 || s.WriteCalls != 3030 || s.ReadUnits != 62.5 || s.Misses != 100 || s.MissUnits != 50 || s.Computed != 10 {
		t.Errorf("summary %+v", s)
	}
	if got := per1000(s.WriteUnits, s.Redirects); got != 950 {
		t.Errorf("writes per 1,000 = %v, want 950", got)
	}
	// A million redirects: 950,000 write units at $0.625/M and 15,625
	// read units at $0.125/M.
	if got, want := s.costPerMillion(), 950_000*0.625/1e6+15_625*0.125/1e6; math.Abs(got-want) > 1e-9 {
		t.Errorf("cost per million = %v, want %v", got, want)
	}
	if per1000(1, 0) != 0 {
		t.Error("per1000 of nothing")
	}
}

func TestHeadersFor(t *testing.T) {
	agentsSeen, refsSeen := map[string]bool{}, map[string]bool{}
	for i := range 10000 {
		ua, ref := headersFor(i)
		agentsSeen[ua] = true
		refsSeen[ref] = true
	}
	if len(agentsSeen) != len(agents) {
		t.Errorf("%d user agents used, want %d", len(agentsSeen), len(agents))
	}
	if len(refsSeen) < len(referrers)-1+40 || !refsSeen[""] {
		t.Errorf("%d referrers used (direct: %v)", len(refsSeen), refsSeen[""])
	}
}

func TestSummarizeAged(t *testing.T) {
	r := agedResult{Links: 100,
		First:     []opUnits{{opKey{"GetItem", "link"}, opCount{Calls: 100, Units: 150}}, {opKey{"UpdateItem", "link"}, opCount{Calls: 100, Units: 1100}}},
		Migration: []opUnits{{opKey{"TransactWriteItems", "mixed"}, opCount{Calls: 1400, Units: 5600}}, {opKey{"GetItem", "link"}, opCount{Calls: 100, Units: 200}}},
		Second:    []opUnits{{opKey{"GetItem", "link"}, opCount{Calls: 100, Units: 50}}},
	}
	s := summarizeAged(r)
	if s.FirstReads != 1500 || s.FirstWrites != 11000 || s.MigrationWrites != 56 || s.MigrationReads != 2 || s.SecondReads != 500 {
		t.Errorf("aged summary %+v", s)
	}
	// The old layout's item at its bounds, by DynamoDB's size rules.
	item := oldItemAttrs(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	if len(item) != 582 || itemBytes(item) < 8<<10 || itemBytes(item) > 12<<10 {
		t.Errorf("old item: %d attributes, %d bytes", len(item), itemBytes(item))
	}
}

// The Lambda runs send HTTP API (payload 2.0) events, as linkgate's Lambda
// adapter reads them.
func TestRedirectEvent(t *testing.T) {
	var ev struct {
		Version, RawPath string
		Headers          map[string]string
		RequestContext   struct{ HTTP struct{ Method string } }
	}
	if err := json.Unmarshal(redirectEvent("abcdefghij", 3), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Version != "2.0" || ev.RawPath != "/abcdefghij" || ev.RequestContext.HTTP.Method != "GET" || ev.Headers["user-agent"] == "" {
		t.Errorf("event %+v", ev)
	}
}
