//go:build !functiononly

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/linkgate/linkgate/bench"
	"github.com/linkgate/linkgate/internal/cli"
)

const mergeSynopsis = "linkgate bench merge [flags] RESULT.json…"

const mergeDescription = `Merge the --json results of generators that ran side by side against one
target (each at its share of the rate, started together with --start-at)
into one result: the HdrHistograms merge bucket by bucket (never averages of
percentiles), counts add up, and the per-second series add up second by
second. Prints the wrk2 report, and writes the JSON, .hgrm and HTML as a run
does.
Each generator's own check (send lag, achieved rate) is in its own file:
read those before trusting the merged figures.`

func runMerge(_ context.Context, args []string, env cli.Env) error {
	fs := cli.NewFlagSet("bench merge", mergeSynopsis, mergeDescription, env.Stderr)
	var latency, uncorrected bool
	var out outputFiles
	var thresholds thresholdFlag
	fs.BoolVar(&latency, "L", false, "print the latency distribution (corrected)")
	fs.BoolVar(&uncorrected, "U", false, "print the uncorrected latency distribution too")
	fs.StringVar(&out.json, "json", "", "write the merged result as JSON to `file` (- for stdout)")
	fs.StringVar(&out.hgrm, "hgrm", "", "write the merged corrected percentile spectrum to `file`")
	fs.StringVar(&out.html, "html", "", "write the merged result's HTML report to `file`, as bench --html does")
	fs.Var(&thresholds, "threshold", "check `METRIC<VALUE` on the merged result, as bench does (repeatable)")
	pos, err := parseInterspersed(fs, args, env.Getenv)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fs.Usage()
		return cli.Usagef("name at least one result file (linkgate bench --json)")
	}
	var rs []*bench.Result
	for _, p := range pos {
		data, err := os.ReadFile(p)
		if err != nil {
			return &cli.UsageError{Err: err}
		}
		var s bench.Summary
		if err := json.Unmarshal(data, &s); err != nil {
			return cli.Usagef("%s: not a linkgate bench --json result: %v", p, err)
		}
		r, err := bench.ResultFromSummary(&s)
		if err != nil {
			return cli.Usagef("%s: %v", p, err)
		}
		rs = append(rs, r)
		if s.Generator.Limited {
			fmt.Fprintf(env.Stdout, "Warning: %s: the generator was the limit: %v\n", p, s.Generator.Reasons)
		}
	}
	m, err := bench.Merge(rs)
	if err != nil {
		return err
	}
	if err := bench.WriteHeader(env.Stdout, m.URL, m.Duration, m.Threads, m.Connections); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "  merged from %d results\n", len(rs))
	if err := bench.WriteText(env.Stdout, m, bench.TextOptions{Latency: latency, Uncorrected: uncorrected}); err != nil {
		return err
	}
	return finishRun(env, m, thresholds, out, fmt.Sprintf("linkgate bench merge (%d results)", len(rs)), runExtra{})
}

// waitUntil sleeps until the RFC 3339 time at, for a synchronised start
// of several generators; a time already past is an error.
func waitUntil(ctx context.Context, at string, now func() time.Time, stderr io.Writer) error {
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return cli.Usagef("--start-at %q: want an RFC 3339 time such as 2026-12-01T12:00:00Z", at)
	}
	d := t.Sub(now())
	if d < -time.Second {
		return cli.Usagef("--start-at %s is %s in the past", at, (-d).Round(time.Millisecond))
	}
	if d <= 0 {
		return nil
	}
	fmt.Fprintf(stderr, "waiting %s until %s\n", d.Round(time.Millisecond), at)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
