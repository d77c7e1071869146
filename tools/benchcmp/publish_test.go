package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The committed tables in docs/results are what their JSON gives: each
// target's page is generated from its latest quiet run, and every run's
// reports are what its templates print over its records.
func TestResultsTables(t *testing.T) {
	dir := filepath.Join("..", "..", "docs", "results")
	ts, err := targets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) == 0 {
		t.Fatal("docs/results holds no target")
	}
	for _, target := range ts {
		t.Run(target, func(t *testing.T) {
			runs, err := readRuns(dir, target)
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) == 0 {
				t.Fatalf("%s: no runs", target)
			}
			for _, r := range runs {
				if err := r.check(r.File); err != nil {
					t.Error(err)
				}
			}
			page, err := os.ReadFile(filepath.Join(dir, target+".md"))
			if err != nil {
				t.Fatal(err)
			}
			if want := tableText(target, runs); string(page) != want {
				t.Errorf("docs/results/%s.md disagrees with its JSON; regenerate it: go run ./tools/benchcmp tables\ngot:\n%s\nwant:\n%s", target, page, want)
			}
		})
	}
}

// publish keeps a run's tables with their records, in a file named by date
// and commit, and regenerates the target's page; a second run of the same
// commit and day gets a file of its own; the page shows the latest quiet
// run.
func TestPublish(t *testing.T) {
	dir, work := t.TempDir(), t.TempDir()
	res := filepath.Join(work, "results.jsonl")
	for i, rps := range []float64{100, 120, 110} {
		if err := appendRecord(res, &Record{Name: "a", Round: i + 1, Gen: "wrk", Values: map[string]float64{"rps": rps}}); err != nil {
			t.Fatal(err)
		}
		if err := appendRecord(res, &Record{Name: "b", Round: i + 1, Gen: "wrk", Values: map[string]float64{"rps": 2 * rps}}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2026, 12, 7, 6, 30, 0, 0, time.UTC)
	load := 0.2
	opts := func(runFile, text string) *publishOptions {
		return &publishOptions{dir: dir, target: "bench-x", command: "ROUNDS=3 make bench-x", runFile: runFile, text: text,
			loadStart: -1, files: []string{res},
			now: func() time.Time { return now }, commit: func() (string, error) { return "abc1234", nil },
			machine: func() Machine { return Machine{CPUs: 2, Model: "test CPU", LoadStart: load, LoadEnd: load} }}
	}
	var out bytes.Buffer
	run1 := filepath.Join(work, "run1.json")
	if err := publish(opts(run1, `a {{printf "%.0f" (med "a" "rps")}}`+"\n"), nil, &out); err != nil {
		t.Fatal(err)
	}
	if err := publish(opts(run1, `b/a {{printf "%.2f" (div (med "b" "rps") (med "a" "rps"))}}`+"\n"), nil, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "a 110\nb/a 2.00\n" {
		t.Errorf("printed %q", out.String())
	}
	runs, err := readRuns(dir, "bench-x")
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs: %d, %v", len(runs), err)
	}
	r := runs[0]
	if r.File != "2026-12-07-abc1234.json" || len(r.Tables) != 2 || !r.Quiet || len(r.Records["results.jsonl"]) != 6 {
		t.Errorf("run: %s, %d tables, quiet %v, %d records", r.File, len(r.Tables), r.Quiet, len(r.Records["results.jsonl"]))
	}
	if err := r.check(r.File); err != nil {
		t.Error(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "bench-x.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"command: `ROUNDS=3 make bench-x`", "commit: abc1234, 2026-12-07 06:30 UTC", "(quiet)", "a 110\n", "b/a 2.00\n", "(bench-x/2026-12-07-abc1234.json)"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}

	// A second run, same commit and day, on a busy machine: its own file;
	// the page keeps showing the quiet one.
	now, load = now.Add(time.Hour), 3.5
	if err := publish(opts(filepath.Join(work, "run2.json"), "second\n"), nil, &out); err != nil {
		t.Fatal(err)
	}
	runs, err = readRuns(dir, "bench-x")
	if err != nil || len(runs) != 2 || runs[1].File != "2026-12-07-abc1234-2.json" || runs[1].Quiet {
		t.Fatalf("second run: %d runs, %v", len(runs), err)
	}
	page, _ = os.ReadFile(filepath.Join(dir, "bench-x.md"))
	if !strings.Contains(string(page), "a 110\n") || strings.Contains(string(page), "second") ||
		!strings.Contains(string(page), "[2026-12-07-abc1234-2.json](bench-x/2026-12-07-abc1234-2.json) (shared machine)") {
		t.Errorf("page after a busy run:\n%s", page)
	}
}

// check catches a report edited by hand, a record changed after the
// report, and a file named for another commit.
func TestRunCheck(t *testing.T) {
	good := func() *Run {
		return &Run{Target: "bench-x", Commit: "abc1234", Date: time.Date(2026, 12, 7, 6, 30, 0, 0, time.UTC), File: "2026-12-07-abc1234.json",
			Records: map[string][]Record{"r.jsonl": {{Name: "a", Values: map[string]float64{"rps": 5}}}},
			Tables:  []Table{{Template: `{{med "a" "rps"}}`, Files: []string{"r.jsonl"}, Report: "5"}}}
	}
	if err := good().check("2026-12-07-abc1234.json"); err != nil {
		t.Fatalf("a consistent run: %v", err)
	}
	tests := []struct {
		name   string
		change func(r *Run)
		file   string
	}{
		{"report edited", func(r *Run) { r.Tables[0].Report = "6" }, "2026-12-07-abc1234.json"},
		{"record changed", func(r *Run) { r.Records["r.jsonl"][0].Values["rps"] = 7 }, "2026-12-07-abc1234.json"},
		{"records missing", func(r *Run) { r.Records = nil }, "2026-12-07-abc1234.json"},
		{"other commit", func(r *Run) {}, "2026-12-07-def5678.json"},
		{"other day", func(r *Run) {}, "2026-12-06-abc1234.json"},
		{"template without its file", func(r *Run) { r.Tables[0].Files = []string{"other.jsonl"} }, "2026-12-07-abc1234.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := good()
			tt.change(r)
			if err := r.check(tt.file); err == nil {
				t.Error("check passed")
			}
		})
	}
	// A recovered run has reports without templates or records.
	rec := &Run{Target: "bench-x", Commit: "abc1234", Date: time.Date(2026, 12, 2, 5, 25, 0, 0, time.UTC), Recovered: "docs/x.md at abc1234",
		Tables: []Table{{Report: "figures"}}}
	if err := rec.check("2026-12-02-abc1234.json"); err != nil {
		t.Errorf("recovered run: %v", err)
	}
	b, _ := json.Marshal(rec)
	if strings.Contains(string(b), `"records"`) {
		t.Errorf("a recovered run writes records: %s", b)
	}
}
