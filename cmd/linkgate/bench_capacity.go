//go:build !functiononly

package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/url"
	"time"

	"github.com/linkgate/linkgate/bench"
	"github.com/linkgate/linkgate/bench/agent"
	"github.com/linkgate/linkgate/bench/capacity"
	"github.com/linkgate/linkgate/internal/cli"
)

const capacitySynopsis = "linkgate bench capacity --slo pXX=DURATION [flags] URL\n       linkgate bench capacity --slo pXX=DURATION [flags] --compare URL_A URL_B"

const capacityDescription = `Find the highest constant request rate the target sustains within the SLO.
Steps grow from --min (doubling) until one fails, then bisect; the final rate
is tried --repeat times and must pass every time. A step passes when every
--slo percentile of the corrected latency is within target, at least 99% of
the rate is achieved and errors stay within --error-budget. The generator's
own lateness is in the corrected latency, so it cannot make a step pass; a
failure it may explain (send lag p99 over 1 ms) is marked generator-limited
and run again. Prints a table of every step and the capacity with the
bracket it lies in, and writes an HTML report with a chart. With --agents
every step is spread over the agents (linkgate bench agent --help) and
merged exactly; an agent that fails ends the search, naming it.`

// capacityOptions is the parsed command line of bench capacity.
type capacityOptions struct {
	target      targetOptions
	search      capacity.Options
	slos        sloFlag
	budget      percentFlag
	connections int
	compare     bool
	jsonPath    string
	htmlPath    string
	urls        []*url.URL
	agents      agentsOptions
}

func parseCapacity(args []string, env cli.Env) (*capacityOptions, error) {
	d := capacity.Defaults
	var (
		c         = &capacityOptions{budget: percentFlag(d.ErrorBudget), htmlPath: "linkgate-capacity.html"}
		step      = durationFlag(d.StepDuration)
		warmup    = durationFlag(d.Warmup)
		minRate   = rateFlag(d.Min)
		maxRate   = rateFlag(d.Max)
		precision = percentFlag(d.Precision)
		repeat    = d.Repeat
		retries   = d.Retries
	)
	fs := cli.NewFlagSet("bench capacity", capacitySynopsis, capacityDescription, env.Stderr)
	c.target.register(fs)
	fs.Var(&c.slos, "slo", "latency objective `pXX=DURATION`, e.g. p99.9=70ms (repeatable, or comma-separated)")
	fs.Var(&c.budget, "error-budget", "largest `share` of failed requests a passing step may have (0.1% or 0.001)")
	fs.Var(&step, "step-duration", "measured `duration` of each step")
	fs.Var(&warmup, "warmup", "warm-up before each step, excluded from its figures")
	fs.Var(&minRate, "min", "first `rate` tried (req/s)")
	fs.Var(&maxRate, "max", "highest `rate` tried (req/s)")
	fs.IntVar(&c.connections, "connections", 0, "connections per step (default: Little's law, 2 × rate × the largest SLO latency, at most 1024)")
	fs.Var(&precision, "precision", "stop bisecting when the bracket is this narrow (`share` of the rate)")
	fs.IntVar(&repeat, "repeat", d.Repeat, "trials at the final rate, all of which must pass")
	fs.IntVar(&retries, "retries", d.Retries, "runs of a failing step again before its failure counts (one more at or below the best pass)")
	fs.BoolVar(&c.compare, "compare", false, "search two targets, URL_A and URL_B, alternating their steps, and print the ratio")
	fs.StringVar(&c.jsonPath, "json", "", "write every step and the outcome as JSON to `file` (- for stdout)")
	fs.StringVar(&c.htmlPath, "html", c.htmlPath, "write the HTML report with its SVG chart to `file` (empty: none)")
	c.agents.register(fs)

	flagArgs, scriptArgs := splitScriptArgs(args)
	pos, err := parseInterspersed(fs, flagArgs, env.Getenv)
	if err != nil {
		return nil, err
	}
	c.target.scriptArgs = scriptArgs
	want := 1
	if c.compare {
		want = 2
	}
	if len(pos) != want {
		fs.Usage()
		return nil, cli.Usagef("want %d URL(s), got %d arguments", want, len(pos))
	}
	for _, p := range pos {
		u, err := parseTargetURL(p)
		if err != nil {
			return nil, err
		}
		c.urls = append(c.urls, u)
	}
	if err := c.target.validate(); err != nil {
		return nil, err
	}
	if c.connections < 0 {
		return nil, cli.Usagef("--connections must not be negative")
	}
	if err := c.agents.parse(); err != nil {
		return nil, err
	}
	if c.agents.list != "" {
		if err := c.target.checkDistributable(); err != nil {
			return nil, err
		}
	}
	c.search = capacity.Options{
		SLOs: c.slos, ErrorBudget: float64(c.budget), StepDuration: time.Duration(step), Warmup: time.Duration(warmup),
		Min: float64(minRate), Max: float64(maxRate), Growth: d.Growth, Precision: float64(precision),
		Repeat: repeat, MaxRounds: d.MaxRounds, Retries: retries,
	}
	if err := c.search.Validate(); err != nil {
		return nil, &cli.UsageError{Err: err}
	}
	return c, nil
}

func runCapacity(ctx context.Context, args []string, env cli.Env) error {
	c, err := parseCapacity(args, env)
	if err != nil {
		return err
	}
	opts := c
	o, target, slos, budget, connections, compare, urls := c.search, c.target, c.slos, c.budget, c.connections, c.compare, c.urls
	jsonPath, htmlPath := c.jsonPath, c.htmlPath
	// Targets are named by URL, or A and B when comparing (the same URL may
	// be compared with itself).
	names := []string{urls[0].String()}
	labels := map[string]string{}
	if compare {
		names = []string{"A", "B"}
		for i, u := range urls {
			labels[names[i]] = names[i]
			fmt.Fprintf(env.Stdout, "%s = %s\n", names[i], u)
		}
	}
	sources := map[string]*source{}
	byName := map[string]*url.URL{}
	var remotes []agent.Remote
	var weights []float64
	if c.agents.list != "" {
		if remotes, weights, err = c.agents.remotes(ctx); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "Every step distributed over %d agents\n", len(remotes))
	}
	for i, u := range urls {
		if remotes != nil {
			byName[names[i]] = u
			continue // the agents prepare the requests
		}
		src, err := newSource(ctx, &target, u, env.Stdout)
		if err != nil {
			return err
		}
		defer src.close()
		sources[names[i]], byName[names[i]] = src, u
	}
	maxSLO := time.Duration(0)
	for _, s := range slos {
		maxSLO = max(maxSLO, s.Max)
	}
	trial := func(ctx context.Context, name string, rate float64) (*bench.Result, error) {
		c := connections
		if c == 0 {
			c = autoConnections(rate, maxSLO)
		}
		threads := min(int(target.threads), c)
		if remotes != nil {
			return distributedTrial(ctx, remotes, weights, opts, byName[name], threads, conns(c, len(remotes), threads), rate, env)
		}
		return bench.Run(ctx, bench.Config{
			URL: byName[name], Threads: threads, Connections: c, Duration: o.StepDuration, Warmup: o.Warmup,
			Timeout: time.Duration(target.timeout), Rate: rate, NewRequester: sources[name].newRequester, TLS: sources[name].tls,
		})
	}
	fmt.Fprintf(env.Stdout, "Capacity search: %s, error budget %s, steps of %s after %s warm-up\n",
		slos.String(), budget.String(), o.StepDuration, o.Warmup)
	if err := capacity.WriteTableHeader(env.Stdout, compare); err != nil {
		return err
	}
	observe := func(st capacity.Step) { _ = capacity.WriteTableRow(env.Stdout, st, labels[st.Target]) }

	var outs []*capacity.Outcome
	if compare {
		a, b, err := capacity.Compare(ctx, o, names[0], names[1], trial, observe)
		if err != nil {
			return err
		}
		outs = []*capacity.Outcome{a, b}
	} else {
		out, err := capacity.Search(ctx, o, names[0], trial, observe)
		if err != nil {
			return err
		}
		outs = []*capacity.Outcome{out}
	}
	fmt.Fprintln(env.Stdout)
	for i, out := range outs {
		prefix := ""
		if compare {
			prefix = names[i] + ": "
		}
		out.Target = urls[i].String()
		fmt.Fprintf(env.Stdout, "%s%s\n", prefix, out.Summary())
	}
	report := capacity.NewReport(&o, outs...)
	if compare {
		if report.Ratio > 0 {
			fmt.Fprintf(env.Stdout, "B / A capacity ratio: %.3f\n", report.Ratio)
		} else {
			fmt.Fprintln(env.Stdout, "B / A capacity ratio: undefined (A has no capacity within the range)")
		}
	}
	if jsonPath != "" {
		if err := writeFileOrStdout(jsonPath, env.Stdout, report.WriteJSON); err != nil {
			return err
		}
	}
	if htmlPath != "" {
		if err := writeFileOrStdout(htmlPath, env.Stdout, func(w io.Writer) error { return capacity.WriteHTML(w, &o, outs...) }); err != nil {
			return err
		}
		if htmlPath != "-" {
			fmt.Fprintf(env.Stdout, "HTML report: %s\n", htmlPath)
		}
	}
	return nil
}

// conns is the connections of a distributed step: at least threads on
// every agent.
func conns(c, agents, threads int) int { return max(c, agents*threads) }

// distributedTrial runs one step of the search on the agents and returns
// the exact merge of their results. An agent that fails ends the search,
// named; one that lags is in the merged send lag, which the search's own
// generator check reads.
func distributedTrial(ctx context.Context, remotes []agent.Remote, weights []float64, c *capacityOptions, u *url.URL,
	threads, connections int, rate float64, env cli.Env) (*bench.Result, error) {
	p := agent.Plan{Step: distributedStep(&c.target, u.String(), threads, connections, rate, c.search.StepDuration, c.search.Warmup),
		Weights: weights, MaxClockOffset: time.Duration(c.agents.maxOffset), Lead: c.agents.lead()}
	out, err := agent.Coordinate(ctx, remotes, p)
	if err != nil {
		return nil, err
	}
	if out.Merged == nil {
		_ = agent.WriteAgents(env.Stdout, out)
		return nil, out.Err()
	}
	for _, p := range out.Invalid() {
		fmt.Fprintf(env.Stdout, "  (%.0f req/s) %s\n", rate, p)
	}
	return out.Merged, nil
}

// maxAutoConnections bounds the Little's-law default: beyond it a step at
// a high rate would spend more on connections than on requests. Steps that
// need more say so (Little's law warning, achieved < 99%); --connections
// overrides.
const maxAutoConnections = 1024

// autoConnections applies Little's law with headroom: at the SLO's latency,
// rate × latency requests are in flight; twice that many connections keep
// the schedule even when latency reaches the objective.
func autoConnections(rate float64, slo time.Duration) int {
	c := int(math.Ceil(2 * rate * slo.Seconds()))
	return min(max(c, 4), maxAutoConnections)
}
