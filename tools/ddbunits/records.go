package main

import (
	"encoding/json"
	"fmt"
	"os"
)

// record is one figure set in tools/benchcmp's record format (one JSON
// object per line), so that a run is published like every other benchmark
// (docs/results/bench-dynamodb-units/, a generated table).
type record struct {
	Name   string             `json:"name"`
	Round  int                `json:"round"`
	Gen    string             `json:"gen"`
	URL    string             `json:"url"`
	Values map[string]float64 `json:"values"`
}

// records reduces the runs as printTable and printAged do. A run's name
// holds the table's first three columns (build | traffic | instances);
// "order" keeps the order they were measured in.
func records(runs []runResult, aged []agedResult) []record {
	var out []record
	for i, r := range runs {
		s := summarize(r)
		fold := summarize(runResult{Units: r.Fold})
		traffic := r.Shape
		if r.Lambda != "" {
			traffic += "; Lambda: " + r.Lambda
		}
		out = append(out, record{Name: fmt.Sprintf("%s | %s | %d", r.Build, traffic, r.Instances), Round: 1, Gen: "ddbunits",
			Values: map[string]float64{
				"order": float64(i), "redirects": float64(s.Redirects), "write_units": s.WriteUnits,
				"refused": float64(s.RefusedWrites), "fold_write_units": fold.WriteUnits,
				"wru_per_1000": per1000(s.WriteUnits, s.Redirects), "write_calls": float64(s.WriteCalls),
				"read_units": s.ReadUnits, "rru_per_1000": per1000(s.ReadUnits, s.Redirects),
				"rru_per_1000_misses": per1000(s.MissUnits, s.Misses), "computed": s.Computed,
				"usd_per_million": s.costPerMillion(), "stored_wrong": float64(r.Wrong), "errors": float64(r.Load.Errors),
			}})
	}
	for i, r := range aged {
		s := summarizeAged(r)
		out = append(out, record{Name: r.Build, Round: 1, Gen: "ddbunits",
			Values: map[string]float64{
				"order": float64(len(runs) + i), "item_kb": float64(r.ItemBytes) / 1024,
				"first_rru_per_1000_misses": s.FirstReads, "first_wru_per_1000": s.FirstWrites,
				"migration_wru_per_item": s.MigrationWrites, "migration_rru_per_item": s.MigrationReads,
				"second_rru_per_1000_misses": s.SecondReads,
			}})
	}
	return out
}

// writeRecords writes recs to path, one JSON object per line.
func writeRecords(path string, recs []record) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// convert reads a run kept by -json (its runs and aged reads) and writes
// its records: runs kept before the records existed are published from it.
func convert(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	var kept struct {
		Runs []runResult  `json:"runs"`
		Aged []agedResult `json:"aged"`
	}
	if err := json.Unmarshal(b, &kept); err != nil {
		return fmt.Errorf("%s: %w", from, err)
	}
	if len(kept.Runs) == 0 {
		return fmt.Errorf("%s: no runs", from)
	}
	return writeRecords(to, records(kept.Runs, kept.Aged))
}
