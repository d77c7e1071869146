package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Results as data: every make bench-* run is kept as one JSON file,
// docs/results/<target>/<date>-<commit>.json, holding its raw records,
// the table templates and what they printed. docs/results/<target>.md, the
// table the docs link to, is generated from the latest quiet run (the
// latest run when none was quiet); TestResultsTables fails when a
// committed table disagrees with its JSON, or a report with its records.
//
//	benchcmp publish -dir docs/results -target NAME -command CMD -run WORK/run.json \
//	    [-load-start L] -t TEMPLATE FILE…
//	benchcmp tables -dir docs/results
//
// publish prints the table as report does, adds it (and the records of
// FILE…) to the run (WORK/run.json, created by the first table of a run),
// writes the run to dir/NAME/<date>-<commit>.json and regenerates
// dir/NAME.md. tables regenerates every NAME.md from the JSON.

// Run is one run of a make bench-* target.
type Run struct {
	Target  string `json:"target"`  // bench-serve
	Command string `json:"command"` // what produced it: ROUNDS=5 make bench-serve
	Commit  string `json:"commit"`  // short hash, +dirty for a changed tree
	// Date is when the first table of the run was printed (UTC).
	Date    time.Time `json:"date"`
	Machine Machine   `json:"machine"`
	// Quiet says nothing else kept the machine busy: the 1-minute load
	// average before the run was below half its CPUs.
	Quiet bool `json:"quiet"`
	// Recovered says where a run without raw records came from (the
	// figures of a doc, before results were kept as data).
	Recovered string `json:"recovered,omitempty"`
	// File is the run's file name in dir/target (set by publish).
	File   string  `json:"file"`
	Tables []Table `json:"tables"`
	// Records are the raw records the tables were printed from, by the
	// base name of the results file they were read from.
	Records map[string][]Record `json:"records,omitempty"`
}

// Machine is what the run ran on.
type Machine struct {
	CPUs      int     `json:"cpus"`
	Model     string  `json:"model,omitempty"`
	LoadStart float64 `json:"load_start"` // 1-minute load average before the run
	LoadEnd   float64 `json:"load_end"`   // and when its last table was printed
	// Note is what a recovered run's doc said of the machine (its load
	// was not recorded).
	Note string `json:"note,omitempty"`
}

// Table is one table of a run: its template, the results files it was
// executed over (base names, keys of Run.Records) and what it printed.
type Table struct {
	Template string   `json:"template,omitempty"`
	Files    []string `json:"files,omitempty"`
	Report   string   `json:"report"`
}

// render executes the table's template over the run's records.
func (r *Run) render(t Table) (string, error) {
	var recs []Record
	for _, f := range t.Files {
		rs, ok := r.Records[f]
		if !ok {
			return "", fmt.Errorf("table reads %s, which the run does not hold", f)
		}
		recs = append(recs, rs...)
	}
	var b bytes.Buffer
	if err := report(&b, t.Template, recs); err != nil {
		return "", err
	}
	return b.String(), nil
}

// check says whether the run is consistent: its file name is its date and
// commit, and every table with a template prints what it holds.
func (r *Run) check(file string) error {
	if want := r.fileName(); file != want && !strings.HasPrefix(file, strings.TrimSuffix(want, ".json")+"-") {
		return fmt.Errorf("%s: named for another date or commit (want %s)", file, want)
	}
	if r.Recovered == "" && r.Records == nil {
		return fmt.Errorf("%s: no records and not marked recovered", file)
	}
	for i, t := range r.Tables {
		if t.Template == "" {
			if r.Recovered == "" {
				return fmt.Errorf("%s: table %d has no template", file, i+1)
			}
			continue
		}
		got, err := r.render(t)
		if err != nil {
			return fmt.Errorf("%s: table %d: %w", file, i+1, err)
		}
		if got != t.Report {
			return fmt.Errorf("%s: table %d says other figures than its records give:\n%s\nwant:\n%s", file, i+1, t.Report, got)
		}
	}
	return nil
}

// fileName is <date>-<commit>.json.
func (r *Run) fileName() string {
	return r.Date.UTC().Format("2006-01-02") + "-" + strings.ReplaceAll(r.Commit, "+", "-") + ".json"
}

type publishOptions struct {
	dir, target, command, runFile, text string
	loadStart                           float64
	files                               []string
	now                                 func() time.Time
	commit                              func() (string, error)
	machine                             func() Machine
}

func parsePublish(args []string, stderr io.Writer) (*publishOptions, error) {
	fs := flag.NewFlagSet("benchcmp publish", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &publishOptions{now: time.Now, commit: gitCommit, machine: thisMachine}
	fs.StringVar(&o.dir, "dir", "docs/results", "the results `folder`")
	fs.StringVar(&o.target, "target", "", "the make target, e.g. bench-serve")
	fs.StringVar(&o.command, "command", "", "the command that produced the run (default make TARGET)")
	fs.StringVar(&o.runFile, "run", "", "the run being built, a work `file` (created by the first table)")
	fs.StringVar(&o.text, "t", "", "the table `template` (default: read from stdin)")
	fs.Float64Var(&o.loadStart, "load-start", -1, "the 1-minute load average before the run (default: now)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case o.target == "":
		return nil, errors.New("publish: -target is required")
	case strings.ContainsAny(o.target, "/. "):
		return nil, fmt.Errorf("publish: -target %q: want a make target name", o.target)
	case o.runFile == "":
		return nil, errors.New("publish: -run is required")
	case fs.NArg() == 0:
		return nil, errors.New("publish: name at least one results file")
	}
	if o.command == "" {
		o.command = "make " + o.target
	}
	o.files = fs.Args()
	return o, nil
}

// publish prints a table and keeps it with its records in the run.
func publish(o *publishOptions, stdin io.Reader, stdout io.Writer) error {
	if o.text == "" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return err
		}
		o.text = string(b)
	}
	recs := map[string][]Record{}
	var all []Record
	var names []string
	for _, f := range o.files {
		rs, err := readRecords([]string{f})
		if err != nil {
			return err
		}
		name := filepath.Base(f)
		recs[name] = rs
		names = append(names, name)
		all = append(all, rs...)
	}
	var out bytes.Buffer
	if err := report(&out, o.text, all); err != nil {
		return err
	}
	if _, err := stdout.Write(out.Bytes()); err != nil {
		return err
	}
	run, err := loadRun(o)
	if err != nil {
		return err
	}
	for name, rs := range recs {
		run.Records[name] = rs // the latest state of each results file
	}
	run.Tables = append(run.Tables, Table{Template: o.text, Files: names, Report: out.String()})
	run.Machine.LoadEnd = o.machine().LoadEnd
	if err := writeJSON(o.runFile, run); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(o.dir, o.target), 0o755); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(o.dir, o.target, run.File), run); err != nil {
		return err
	}
	return writeTable(o.dir, o.target)
}

// loadRun reads the run being built, or starts it.
func loadRun(o *publishOptions) (*Run, error) {
	b, err := os.ReadFile(o.runFile)
	if err == nil {
		var r Run
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", o.runFile, err)
		}
		return &r, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	commit, err := o.commit()
	if err != nil {
		return nil, err
	}
	m := o.machine()
	if o.loadStart >= 0 {
		m.LoadStart = o.loadStart
	}
	r := &Run{Target: o.target, Command: o.command, Commit: commit, Date: o.now().UTC().Truncate(time.Second),
		Machine: m, Quiet: m.LoadStart < float64(m.CPUs)/2, Records: map[string][]Record{}}
	r.File = r.fileName()
	// A second run of the same commit on the same day gets its own file.
	for i := 2; exists(filepath.Join(o.dir, o.target, r.File)); i++ {
		r.File = strings.TrimSuffix(r.fileName(), ".json") + "-" + strconv.Itoa(i) + ".json"
	}
	return r, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// gitCommit is HEAD's short hash, +dirty when tracked files changed.
func gitCommit() (string, error) {
	out, err := execOutput("git", "rev-parse", "--short", "HEAD")
	if err != nil {
		return "", fmt.Errorf("git rev-parse: %w", err)
	}
	commit := strings.TrimSpace(out)
	if _, err := execOutput("git", "diff", "--quiet", "HEAD", "--"); err != nil {
		commit += "+dirty"
	}
	return commit, nil
}

// execOutput runs a command and returns its standard output.
func execOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	return string(out), err
}

// thisMachine reads the CPU count, model and load average (LoadStart and
// LoadEnd both: now).
func thisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			m.LoadStart, _ = strconv.ParseFloat(f[0], 64)
			m.LoadEnd = m.LoadStart
		}
	}
	return m
}

// readRuns reads every run of a target, oldest first.
func readRuns(dir, target string) ([]*Run, error) {
	paths, err := filepath.Glob(filepath.Join(dir, target, "*.json"))
	if err != nil {
		return nil, err
	}
	var runs []*Run
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r Run
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if r.File != filepath.Base(p) || r.Target != target {
			return nil, fmt.Errorf("%s: says it is %s/%s", p, r.Target, r.File)
		}
		runs = append(runs, &r)
	}
	slices.SortStableFunc(runs, func(a, b *Run) int { return a.Date.Compare(b.Date) })
	return runs, nil
}

// latest is the latest quiet run, else the latest run.
func latest(runs []*Run) *Run {
	for i := len(runs) - 1; i >= 0; i-- {
		if runs[i].Quiet {
			return runs[i]
		}
	}
	return runs[len(runs)-1]
}

// tableText is the generated page of a target: its latest quiet run's
// tables, with the command that produced them, and every run kept.
func tableText(target string, runs []*Run) string {
	r := latest(runs)
	var b strings.Builder
	fmt.Fprintf(&b, "# `%s`: the latest run\n\n", target)
	fmt.Fprintf(&b, "<!-- Generated by tools/benchcmp from %s/%s; do not edit (go run ./tools/benchcmp tables). -->\n\n", target, r.File)
	fmt.Fprintf(&b, "- command: `%s`\n", r.Command)
	fmt.Fprintf(&b, "- commit: %s, %s\n", r.Commit, r.Date.UTC().Format("2006-01-02 15:04 UTC"))
	machine := fmt.Sprintf("%d CPUs", r.Machine.CPUs)
	if r.Machine.Model != "" {
		machine += " (" + r.Machine.Model + ")"
	}
	quiet := "quiet"
	if !r.Quiet {
		quiet = "shared: no quiet run is kept, read the ratios only"
	}
	if r.Machine.Note != "" {
		fmt.Fprintf(&b, "- machine: %s, %s (%s)\n", machine, r.Machine.Note, quiet)
	} else {
		fmt.Fprintf(&b, "- machine: %s, load %.2f before the run, %.2f at its end (%s)\n", machine, r.Machine.LoadStart, r.Machine.LoadEnd, quiet)
	}
	if r.Recovered != "" {
		fmt.Fprintf(&b, "- recovered: %s\n", r.Recovered)
	}
	fmt.Fprintf(&b, "- data: [%s](%s/%s)\n", r.File, target, r.File)
	for _, t := range r.Tables {
		fmt.Fprintf(&b, "\n```text\n%s\n```\n", strings.TrimRight(t.Report, "\n"))
	}
	if len(runs) > 1 {
		b.WriteString("\nEvery run kept, newest first:\n\n")
		for i := len(runs) - 1; i >= 0; i-- {
			q := ""
			if !runs[i].Quiet {
				q = " (shared machine)"
			}
			fmt.Fprintf(&b, "- [%s](%s/%s)%s\n", runs[i].File, target, runs[i].File, q)
		}
	}
	return b.String()
}

// writeTable regenerates dir/target.md.
func writeTable(dir, target string) error {
	runs, err := readRuns(dir, target)
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		return fmt.Errorf("%s/%s: no runs", dir, target)
	}
	return os.WriteFile(filepath.Join(dir, target+".md"), []byte(tableText(target, runs)), 0o644)
}

// targets lists the targets with runs in dir.
func targets(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// writeTables regenerates every table in dir.
func writeTables(dir string) error {
	ts, err := targets(dir)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if err := writeTable(dir, t); err != nil {
			return err
		}
	}
	return nil
}
