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
	WriteUnits    float64 // as DynamoDB reported, plus one per refused conditional write
	ReadUnits     float64
	RefusedWrites int64 // conditional writes refused: billed, not reported; counted as one unit each
	WriteCalls    int64
	Misses        int64   // GetItem calls for link items: cache misses and refreshes
	MissUnits     float64 // their read units
}

func summarize(r runResult) summary {
	s := summary{Redirects: r.Load.Redirects}
	for _, u := range r.Units {
		if writeOps[u.Op] {
			s.WriteUnits += u.Units + float64(u.Failed)
			s.RefusedWrites += u.Failed
			s.WriteCalls += u.Calls + u.Failed
			continue
		}
		s.ReadUnits += u.Units
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
	fmt.Fprintln(w, "| build | traffic | instances | redirects | write units | per 1,000 redirects | write calls | read units | per 1,000 redirects | read units per 1,000 misses | $ per 1M redirects |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		s := summarize(r)
		refused := ""
		if s.RefusedWrites > 0 {
			refused = fmt.Sprintf(" (%d refused)", s.RefusedWrites)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %.0f%s | **%.1f** | %d | %.1f | %.1f | %.0f | %.4f |\n",
			r.Build, r.Shape, r.Instances, s.Redirects, s.WriteUnits, refused, per1000(s.WriteUnits, s.Redirects), s.WriteCalls,
			s.ReadUnits, per1000(s.ReadUnits, s.Redirects), per1000(s.MissUnits, s.Misses), s.costPerMillion())
	}
}

// printUnits writes every run's units per operation and item class.
func printUnits(w io.Writer, results []runResult) {
	for _, r := range results {
		fmt.Fprintf(w, "%s, %s, %d instance(s): %d sent, %d redirects, %d other, %d errors, max send lag %v; visits %v\n",
			r.Build, r.Shape, r.Instances, r.Load.Sent, r.Load.Redirects, r.Load.Other, r.Load.Errors, r.Load.MaxLag, r.Visits)
		for _, u := range r.Units {
			fmt.Fprintf(w, "  %-18s %-6s calls %8d  items %9d  units %10.1f  refused %d  errors %d\n",
				u.Op, u.Class, u.Calls, u.Items, u.Units, u.Failed, u.Errors)
		}
	}
}

func sortRows(rs []opUnits) {
	slices.SortFunc(rs, func(a, b opUnits) int {
		return cmp.Or(cmp.Compare(a.Op, b.Op), cmp.Compare(a.Class, b.Class))
	})
}
