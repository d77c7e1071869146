package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
)

// On-demand prices of DynamoDB, Standard table class, US East (N.
// Virginia), in dollars per unit: $0.625 per million write request units
// and $0.125 per million read request units, in effect since 1 November
// 2024 (docs/dynamodb.md says where the figures come from).
const (
	PriceDate     = "2024-11-01"
	PricePerWrite = 0.625 / 1e6
	PricePerRead  = 0.125 / 1e6
)

// writeOps are the operations billed in write units; every other
// operation the meter counts is billed in read units.
var writeOps = map[string]bool{
	"PutItem": true, "UpdateItem": true, "DeleteItem": true, "BatchWriteItem": true, "TransactWriteItems": true,
}

// summary is one run reduced to the figures of the table.
type summary struct {
	Redirects     int64
	WriteUnits    float64 // as DynamoDB Local reported, plus what it did not (Computed)
	ReadUnits     float64
	Computed      float64 // units DynamoDB Local did not report, computed by DynamoDB's rules (units.go)
	RefusedWrites int64   // conditional writes refused: billed, not reported
	WriteCalls    int64
	Misses        int64   // GetItem calls for link items: cache misses and refreshes
	MissUnits     float64 // their read units
}

func summarize(r runResult) summary {
	s := summary{Redirects: r.Load.Redirects}
	for _, u := range r.Units {
		if writeOps[u.Op] {
			s.WriteUnits += u.Units + u.Computed
			s.Computed += u.Computed
			s.RefusedWrites += u.Failed
			s.WriteCalls += u.Calls + u.Failed
			continue
		}
		s.ReadUnits += u.Units + u.Computed
		s.Computed += u.Computed
		if u.Op == "GetItem" && u.Class == "link" {
			s.Misses += u.Calls
			s.MissUnits += u.Units
		}
	}
	return s
}

// per1000 returns units per 1,000 of n; 0 when n is 0.
func per1000(units float64, n int64) float64 {
	if n == 0 {
		return 0
	}
	return units * 1000 / float64(n)
}

// costPerMillion is what a million redirects cost in DynamoDB requests at
// the on-demand prices.
func (s summary) costPerMillion() float64 {
	return (per1000(s.WriteUnits, s.Redirects)*PricePerWrite + per1000(s.ReadUnits, s.Redirects)*PricePerRead) * 1000
}

// printTable writes the Markdown table of the runs.
func printTable(w io.Writer, results []runResult) {
	fmt.Fprintln(w, "| build | traffic | instances | redirects | write units | of which fold | per 1,000 redirects | write calls | read units | per 1,000 redirects | read units per 1,000 misses | of which computed | $ per 1M redirects |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		s := summarize(r)
		refused := ""
		if s.RefusedWrites > 0 {
			refused = fmt.Sprintf(" (%d refused)", s.RefusedWrites)
		}
		fold := summarize(runResult{Units: r.Fold})
		traffic := r.Shape
		if r.Lambda != "" {
			traffic += "; Lambda: " + r.Lambda
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %.0f%s | %.0f | **%.1f** | %d | %.1f | %.1f | %.0f | %.1f | %.4f |\n",
			r.Build, traffic, r.Instances, s.Redirects, s.WriteUnits, refused, fold.WriteUnits, per1000(s.WriteUnits, s.Redirects), s.WriteCalls,
			s.ReadUnits, per1000(s.ReadUnits, s.Redirects), per1000(s.MissUnits, s.Misses), s.Computed, s.costPerMillion())
	}
}

// printUnits writes every run's units per operation and item class.
func printUnits(w io.Writer, results []runResult) {
	for _, r := range results {
		lambda := ""
		if r.Lambda != "" {
			lambda = " (Lambda: " + r.Lambda + ")"
		}
		fmt.Fprintf(w, "%s, %s, %d instance(s)%s: %d sent, %d redirects, %d other, %d errors, max send lag %v; visits %v; stored totals of %d links checked, %d wrong\n",
			r.Build, r.Shape, r.Instances, lambda, r.Load.Sent, r.Load.Redirects, r.Load.Other, r.Load.Errors, r.Load.MaxLag, r.Visits, r.Checked, r.Wrong)
		for _, u := range r.Units {
			fmt.Fprintf(w, "  %-18s %-6s calls %8d  items %9d  units %10.1f  computed %7.1f  refused %d  errors %d\n",
				u.Op, u.Class, u.Calls, u.Items, u.Units, u.Computed, u.Failed, u.Errors)
		}
	}
}

func sortRows(rs []opUnits) {
	slices.SortFunc(rs, func(a, b opUnits) int {
		return cmp.Or(cmp.Compare(a.Op, b.Op), cmp.Compare(a.Class, b.Class))
	})
}

// agedSummary is one build's cold reads of old items.
type agedSummary struct {
	FirstReads, SecondReads         float64 // read units per 1,000 misses
	FirstWrites                     float64 // write units per 1,000 redirects, first pass
	MigrationWrites, MigrationReads float64 // units per item migrated
}

func summarizeAged(r agedResult) agedSummary {
	pass := func(us []opUnits) (reads, writes float64) {
		var misses int64
		var missUnits, w float64
		for _, u := range us {
			if writeOps[u.Op] {
				w += u.Units + u.Computed
			} else if u.Op == "GetItem" && u.Class == "link" {
				misses += u.Calls
				missUnits += u.Units
			}
		}
		return per1000(missUnits, misses), per1000(w, int64(r.Links))
	}
	var s agedSummary
	s.FirstReads, s.FirstWrites = pass(r.First)
	s.SecondReads, _ = pass(r.Second)
	for _, u := range r.Migration {
		if writeOps[u.Op] {
			s.MigrationWrites += u.Units + u.Computed
		} else {
			s.MigrationReads += u.Units + u.Computed
		}
	}
	s.MigrationWrites /= float64(max(r.Links, 1))
	s.MigrationReads /= float64(max(r.Links, 1))
	return s
}

// printAged writes the Markdown table of the cold reads of old items.
func printAged(w io.Writer, results []agedResult) {
	fmt.Fprintln(w, "| build | old item | read units per 1,000 misses, 1st pass | write units per 1,000 redirects, 1st pass | migration: write, read units per item | read units per 1,000 misses, 2nd pass |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range results {
		s := summarizeAged(r)
		fmt.Fprintf(w, "| %s | %.1f KB | %.0f | %.0f | %.1f, %.1f | **%.0f** |\n",
			r.Build, float64(r.ItemBytes)/1024, s.FirstReads, s.FirstWrites, s.MigrationWrites, s.MigrationReads, s.SecondReads)
	}
}
