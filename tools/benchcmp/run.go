package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/linkgate/linkgate/bench"
)

// Target is one thing measured each round: a URL driven by a generator,
// and optionally the PID whose CPU time per request is recorded.
type Target struct {
	Name     string
	URL      string
	Gen      string // key of generators
	Bin      string // the generator's executable
	Threads  int
	Conns    int
	Duration time.Duration
	Rate     float64       // linkgate only: -R
	Warmup   time.Duration // linkgate only: its own --warmup, excluded from its figures
	Lua      string
	Streams  int           // h2load's -m
	Args     []string      // extra generator arguments
	PID      int           // process whose CPU time per request is measured (0: none)
	Prewarm  time.Duration // an unmeasured run before the first round
	Rewarm   time.Duration // an unmeasured run before every round
	Before   string        // shell command run before every measured run
}

// Record is one measured run. Values holds the figures: rps, requests,
// avg and pNN latencies in ms, errors (socket), non2xx, cpu (µs of the
// target PID per request), gencpu (µs of the generator per request),
// seconds (wall time of the run), and what the generator adds (linkgate:
// up50, up99 uncorrected, lag99 send lag).
type Record struct {
	Name   string             `json:"name"`
	Round  int                `json:"round"`
	Gen    string             `json:"gen"`
	URL    string             `json:"url"`
	Values map[string]float64 `json:"values"`
}

// runOptions are the flags of benchcmp run.
type runOptions struct {
	rounds    int
	order     string
	out       string
	cpu       string
	proc      string
	defaults  Target
	bins      map[string]string
	targets   []*Target
	beforeArg []string
}

// repeated collects a repeatable string flag.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, " ") }
func (r *repeated) Set(s string) error { *r = append(*r, s); return nil }

func parseRun(args []string, stderr io.Writer) (*runOptions, error) {
	o := &runOptions{bins: map[string]string{}}
	fs := flag.NewFlagSet("benchcmp run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var specs repeated
	var d, warmup string
	var wrkBin, lgBin, vegetaBin, h2loadBin string
	fs.IntVar(&o.rounds, "rounds", 3, "measured rounds; each round runs every target once")
	fs.StringVar(&o.order, "order", "interleave", "target order per round: interleave (as given) or alternate (reversed every other round)")
	fs.StringVar(&o.out, "o", "", "append one JSON record per run to this `file` (required)")
	fs.StringVar(&o.cpu, "cpu", "", "pin generators to this taskset CPU `list` (empty: not pinned)")
	fs.StringVar(&o.proc, "proc", "/proc", "procfs mount")
	fs.StringVar(&o.defaults.Gen, "gen", "wrk", "default generator: "+genNames())
	fs.IntVar(&o.defaults.Threads, "t", 1, "default generator threads")
	fs.IntVar(&o.defaults.Conns, "c", 50, "default connections")
	fs.StringVar(&d, "d", "10s", "default measured `duration` of a run")
	fs.StringVar(&warmup, "warmup", "", "default linkgate --warmup")
	fs.StringVar(&wrkBin, "wrk", "wrk", "wrk executable")
	fs.StringVar(&lgBin, "linkgate", "linkgate", "linkgate executable (gen=linkgate)")
	fs.StringVar(&vegetaBin, "vegeta", "vegeta", "vegeta executable (gen=vegeta)")
	fs.StringVar(&h2loadBin, "h2load", "h2load", "h2load executable (gen=h2load)")
	fs.Var(&specs, "target", "`'NAME URL [key=value…]'`, repeatable, in round order (keys: gen pid lua t c m d R warmup prewarm rewarm arg)")
	fs.Var((*repeated)(&o.beforeArg), "before", "`NAME=COMMAND` run with bash -c before every measured run of NAME")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.bins["wrk"], o.bins["linkgate"], o.bins["vegeta"], o.bins["h2load"] = wrkBin, lgBin, vegetaBin, h2loadBin
	var err error
	if o.defaults.Duration, err = bench.ParseDuration(d); err != nil {
		return nil, fmt.Errorf("-d: %w", err)
	}
	if warmup != "" {
		if o.defaults.Warmup, err = bench.ParseDuration(warmup); err != nil {
			return nil, fmt.Errorf("-warmup: %w", err)
		}
	}
	switch {
	case o.out == "":
		return nil, errors.New("-o FILE is required")
	case o.rounds < 1:
		return nil, errors.New("-rounds must be at least 1")
	case o.order != "interleave" && o.order != "alternate":
		return nil, fmt.Errorf("-order %q: want interleave or alternate", o.order)
	case len(specs) == 0 || fs.NArg() > 0:
		return nil, errors.New("want one -target per thing measured, and no other arguments")
	}
	for _, s := range specs {
		t, err := parseTarget(s, o.defaults)
		if err != nil {
			return nil, err
		}
		t.Bin = o.bins[t.Gen]
		o.targets = append(o.targets, t)
	}
	for _, b := range o.beforeArg {
		name, cmd, ok := strings.Cut(b, "=")
		t := o.find(name)
		if !ok || t == nil {
			return nil, fmt.Errorf("-before %q: want NAME=COMMAND for a NAME given by -target", b)
		}
		t.Before = cmd
	}
	return o, nil
}

func (o *runOptions) find(name string) *Target {
	for _, t := range o.targets {
		if t.Name == name {
			return t
		}
	}
	return nil
}

func genNames() string {
	names := make([]string, 0, len(generators))
	for n := range generators {
		names = append(names, n)
	}
	return strings.Join(sortedStrings(names), ", ")
}

// parseTarget reads 'NAME URL [key=value…]' over the defaults d.
func parseTarget(spec string, d Target) (*Target, error) {
	f := strings.Fields(spec)
	if len(f) < 2 || strings.Contains(f[0], "=") {
		return nil, fmt.Errorf("-target %q: want 'NAME URL [key=value…]'", spec)
	}
	t := d
	t.Name, t.URL, t.Args = f[0], f[1], nil
	for _, kv := range f[2:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("-target %s: %q is not key=value", t.Name, kv)
		}
		var err error
		switch k {
		case "gen":
			t.Gen = v
		case "lua":
			t.Lua = v
		case "arg":
			// Percent-escapes let an argument hold a space: arg=Connection:%20close.
			a, uerr := url.PathUnescape(v)
			t.Args, err = append(t.Args, a), uerr
		case "pid":
			t.PID, err = strconv.Atoi(v)
		case "t":
			t.Threads, err = strconv.Atoi(v)
		case "c":
			t.Conns, err = strconv.Atoi(v)
		case "m":
			t.Streams, err = strconv.Atoi(v)
		case "R":
			t.Rate, err = strconv.ParseFloat(v, 64)
		case "d":
			t.Duration, err = bench.ParseDuration(v)
		case "warmup":
			t.Warmup, err = bench.ParseDuration(v)
		case "prewarm":
			t.Prewarm, err = bench.ParseDuration(v)
		case "rewarm":
			t.Rewarm, err = bench.ParseDuration(v)
		default:
			return nil, fmt.Errorf("-target %s: unknown key %q", t.Name, k)
		}
		if err != nil {
			return nil, fmt.Errorf("-target %s: %s: %w", t.Name, k, err)
		}
	}
	if _, ok := generators[t.Gen]; !ok {
		return nil, fmt.Errorf("-target %s: unknown generator %q (want %s)", t.Name, t.Gen, genNames())
	}
	if t.Threads < 1 || t.Conns < t.Threads || t.Duration <= 0 || t.Rate < 0 {
		return nil, fmt.Errorf("-target %s: need t ≥ 1, c ≥ t, d > 0, R ≥ 0", t.Name)
	}
	if t.Rate > 0 && t.Gen != "linkgate" {
		return nil, fmt.Errorf("-target %s: R= needs gen=linkgate", t.Name)
	}
	return &t, nil
}

// runRounds measures every target once per round, in the order asked, and
// appends each run's Record to the results file as it completes.
func runRounds(ctx context.Context, o *runOptions, stdout, stderr io.Writer) error {
	tmp, err := os.MkdirTemp("", "benchcmp")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	r := &runner{o: o, tmp: tmp, stderr: stderr}
	for round := range o.rounds {
		order := o.targets
		if o.order == "alternate" && round%2 == 1 {
			order = reversed(order)
		}
		for _, t := range order {
			if round == 0 && t.Prewarm > 0 {
				if err := r.warm(ctx, t, t.Prewarm); err != nil {
					return err
				}
			}
			if t.Before != "" {
				cmd := exec.CommandContext(ctx, "bash", "-c", t.Before)
				cmd.Stdout, cmd.Stderr = stderr, stderr
				if err := cmd.Run(); err != nil {
					return fmt.Errorf("%s: before %q: %w", t.Name, t.Before, err)
				}
			}
			if t.Rewarm > 0 {
				if err := r.warm(ctx, t, t.Rewarm); err != nil {
					return err
				}
			}
			rec, err := r.measure(ctx, t)
			if err != nil {
				return err
			}
			rec.Round = round + 1
			if err := appendRecord(o.out, rec); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "round %d/%d %-12s %s\n", round+1, o.rounds, t.Name, describe(rec.Values))
		}
	}
	return nil
}

func reversed(ts []*Target) []*Target {
	out := make([]*Target, len(ts))
	for i, t := range ts {
		out[len(ts)-1-i] = t
	}
	return out
}

func describe(v map[string]float64) string {
	s := fmt.Sprintf("%10.0f req/s  p99 %.3f ms", v["rps"], v["p99"])
	if c, ok := v["cpu"]; ok {
		s += fmt.Sprintf("  target CPU %.2f µs/req", c)
	}
	if c, ok := v["gencpu"]; ok {
		s += fmt.Sprintf("  generator CPU %.2f µs/req", c)
	}
	if n := v["errors"] + v["non2xx"]; n > 0 {
		s += fmt.Sprintf("  errors %.0f", n)
	}
	return s
}

type runner struct {
	o      *runOptions
	tmp    string
	stderr io.Writer
	n      int
}

// warm runs t unmeasured for d.
func (r *runner) warm(ctx context.Context, t *Target, d time.Duration) error {
	w := *t
	w.Duration, w.Warmup, w.PID = d, 0, 0
	_, err := r.measure(ctx, &w)
	return err
}

// measure runs t's generator once and reads its figures, the target PID's
// CPU time and the generator's own.
func (r *runner) measure(ctx context.Context, t *Target) (*Record, error) {
	r.n++
	jsonPath := filepath.Join(r.tmp, fmt.Sprintf("run%d.json", r.n))
	g := generators[t.Gen]
	args := g.args(t, jsonPath)
	if r.o.cpu != "" {
		args = append([]string{"taskset", "-c", r.o.cpu}, args...)
	}
	var before time.Duration
	var err error
	if t.PID > 0 {
		if before, err = cpuTime(r.o.proc, t.PID); err != nil {
			return nil, err
		}
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %s: %w\n%s%s", t.Name, strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	wall := time.Since(start)
	v, err := g.parse(stdout.Bytes(), jsonPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.Name, err)
	}
	v["seconds"] = wall.Seconds()
	if n := v["requests"]; n > 0 {
		st := cmd.ProcessState
		v["gencpu"] = float64((st.UserTime() + st.SystemTime()).Microseconds()) / n
		if t.PID > 0 {
			after, err := cpuTime(r.o.proc, t.PID)
			if err != nil {
				return nil, err
			}
			v["cpu"] = float64((after - before).Microseconds()) / n
		}
	}
	if n := v["non2xx"]; n > 0 {
		fmt.Fprintf(r.stderr, "warning: %s: %.0f responses were not 2xx or 3xx (%s)\n", t.Name, n, t.URL)
	}
	return &Record{Name: t.Name, Gen: t.Gen, URL: t.URL, Values: v}, nil
}

// appendRecord adds one JSON line to the results file.
func appendRecord(path string, rec *Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readRecords loads results files, in order.
func readRecords(paths []string) ([]Record, error) {
	var out []Record
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		for i, line := range bytes.Split(b, []byte("\n")) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			var r Record
			if err := json.Unmarshal(line, &r); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", p, i+1, err)
			}
			out = append(out, r)
		}
	}
	return out, nil
}
