//go:build !functiononly

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/linkgate/linkgate/bench"
	"github.com/linkgate/linkgate/bench/htmlreport"
	"github.com/linkgate/linkgate/bench/lua"
	"github.com/linkgate/linkgate/internal/cli"
)

const benchSynopsis = "linkgate bench [flags] URL [-- script args]\n       linkgate bench capacity --slo p99.9=70ms [flags] URL\n       linkgate bench merge [flags] RESULT.json…\n       linkgate bench agent --listen ADDR --token TOKEN"

const benchDescription = `A wrk2-compatible load generator. With -R it sends a constant total rate,
each connection on its own evenly phased schedule, and measures latency from
each request's planned send time (corrected for coordinated omission; -U adds
the uncorrected figures). Without -R it runs closed-loop at maximum
throughput, like wrk. Flags may come before or after the URL; arguments after
-- go to the Lua script's init(args).

'linkgate bench capacity --help' describes the capacity search, 'linkgate bench
merge --help' how results of several generators are merged, 'linkgate bench
agent --help' the agents that --agents spreads a run over (their rows follow
the report; a failed or lagging agent makes the run invalid, exit 1).`

// targetOptions are the flags that say what to send, shared by bench and
// bench capacity.
type targetOptions struct {
	threads    countFlag
	timeout    durationFlag
	headers    headerFlag
	script     string
	scenario   string
	preload    int
	uniform    bool
	scriptArgs []string

	noKeepAlive bool
	tls         bench.TLSOptions
}

func init() {
	commands["bench"] = command{"load-test an HTTP target (wrk2-compatible) or find its capacity", runBench}
}

func (t *targetOptions) register(fs *flag.FlagSet) {
	t.threads, t.timeout = bench.DefaultThreads, durationFlag(bench.DefaultTimeout)
	fs.Var(&t.threads, "t", "number of `threads` (one epoll loop each)")
	fs.Var(&t.threads, "threads", "same as -t (`threads`)")
	fs.Var(&t.timeout, "timeout", "a request unanswered this `long` is a timeout, recorded with that latency")
	fs.Var(&t.headers, "H", "add a request `header` \"Name: value\" (repeatable)")
	fs.Var(&t.headers, "header", "same as -H (`header`)")
	fs.StringVar(&t.script, "s", "", "wrk-compatible Lua `script`")
	fs.StringVar(&t.script, "script", "", "same as -s (`script`)")
	fs.StringVar(&t.scenario, "scenario", "", "built-in linkgate workload: shorten, redirect or mixed:90 (`name`)")
	fs.IntVar(&t.preload, "preload", 0, fmt.Sprintf("links to create before a redirect or mixed scenario (default %d)", bench.DefaultPreload))
	fs.BoolVar(&t.uniform, "uniform", false, "pick preloaded links uniformly instead of Zipf(1.1)")
	fs.BoolVar(&t.noKeepAlive, "no-keepalive", false, "a new connection for every request (sends Connection: close)")
	fs.StringVar(&t.tls.ServerName, "sni", "", "TLS server `name` sent and verified (default: the URL's host)")
	fs.BoolVar(&t.tls.Insecure, "insecure", false, "do not verify the server's TLS certificate")
	fs.BoolVar(&t.tls.Insecure, "k", false, "same as --insecure")
	fs.StringVar(&t.tls.CAFile, "ca", "", "verify the server against the CA certificates in PEM `file`")
	fs.StringVar(&t.tls.CertFile, "cert", "", "client certificate PEM `file` (with --key)")
	fs.StringVar(&t.tls.KeyFile, "key", "", "client private key PEM `file` (with --cert)")
}

// tlsConfig builds the TLS configuration for https:// targets.
func (t *targetOptions) tlsConfig() (*tls.Config, error) {
	c, err := bench.NewTLSConfig(t.tls)
	if err != nil {
		return nil, &cli.UsageError{Err: err}
	}
	return c, nil
}

func (t *targetOptions) validate() error {
	if t.script != "" && t.scenario != "" {
		return cli.Usagef("-s and --scenario are mutually exclusive")
	}
	if t.preload < 0 {
		return cli.Usagef("--preload must not be negative")
	}
	if t.scenario != "" {
		if _, err := bench.ParseScenario(t.scenario); err != nil {
			return &cli.UsageError{Err: err}
		}
	}
	return nil
}

type benchOptions struct {
	target      targetOptions
	url         *url.URL
	connections countFlag
	duration    durationFlag
	warmup      durationFlag
	rate        rateFlag
	latency     bool
	uncorrected bool
	out         outputFiles
	progress    bool
	thresholds  thresholdFlag
	startAt     string
	stages      []bench.Stage
	http2       bool
	streams     countFlag
	agents      agentsOptions
}

// splitScriptArgs separates the arguments after the first "--", which go
// to the script's init(args).
func splitScriptArgs(args []string) (flags, script []string) {
	for i, a := range args {
		if a == "--" {
			return args[:i], args[i+1:]
		}
	}
	return args, nil
}

// parseInterspersed parses flags that may come before and after the
// positional arguments, as wrk's getopt allows, and returns the positionals.
// It also accepts getopt's joined short forms: -c60 -t30 -d30m -R600 -LU.
func parseInterspersed(fs *flag.FlagSet, args []string, getenv func(string) string) ([]string, error) {
	args = expandShortFlags(fs, args)
	if err := cli.Parse(fs, args, getenv); err != nil {
		return nil, err
	}
	var pos []string
	for fs.NArg() > 0 {
		pos = append(pos, fs.Arg(0))
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, flag.ErrHelp
			}
			return nil, &cli.UsageError{Err: err}
		}
	}
	return pos, nil
}

// expandShortFlags rewrites getopt-style joined short flags into the form
// the flag package reads: "-c60" becomes "-c" "60", "-LU" becomes "-L" "-U".
// Arguments that name a defined flag are left alone.
func expandShortFlags(fs *flag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		name := strings.TrimPrefix(a, "-")
		if len(a) < 3 || a[0] != '-' || a[1] == '-' || strings.Contains(a, "=") || fs.Lookup(name) != nil {
			out = append(out, a)
			if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && i+1 < len(args) && !strings.Contains(a, "=") {
				out = append(out, args[i+1]) // the flag's value, whatever it looks like
				i++
			}
			continue
		}
		if f := fs.Lookup(name[:1]); f != nil && !isBoolFlag(f) {
			out = append(out, "-"+name[:1], name[1:])
			continue
		}
		allBool := true
		for _, c := range name {
			f := fs.Lookup(string(c))
			allBool = allBool && f != nil && isBoolFlag(f)
		}
		if !allBool {
			out = append(out, a)
			continue
		}
		for _, c := range name {
			out = append(out, "-"+string(c))
		}
	}
	return out
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// parseTargetURL checks a URL argument.
func parseTargetURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, cli.Usagef("invalid URL %q: want http(s)://host[:port]/path", s)
	}
	if u.Path == "" {
		u.Path = "/"
	}
	return u, nil
}

func parseBench(args []string, env cli.Env) (*benchOptions, error) {
	o := &benchOptions{connections: bench.DefaultConnections, duration: durationFlag(bench.DefaultDuration)}
	fs := cli.NewFlagSet("bench", benchSynopsis, benchDescription, env.Stderr)
	o.target.register(fs)
	fs.Var(&o.connections, "c", "`connections` to keep open (one request in flight on each)")
	fs.Var(&o.connections, "connections", "same as -c (`connections`)")
	fs.Var(&o.duration, "d", "`duration` of the measured run: 30s, 5m, 1h")
	fs.Var(&o.duration, "duration", "same as -d (`duration`)")
	fs.Var(&o.warmup, "warmup", "run this `long` first at the same rate, excluded from every figure")
	fs.Var(&o.rate, "R", "constant total `rate` in requests/second (omit for closed-loop maximum throughput)")
	fs.Var(&o.rate, "rate", "same as -R (`rate`)")
	fs.BoolVar(&o.latency, "L", false, "print the latency distribution (corrected)")
	fs.BoolVar(&o.latency, "latency", false, "same as -L")
	fs.BoolVar(&o.uncorrected, "U", false, "print the uncorrected latency distribution too")
	fs.BoolVar(&o.uncorrected, "u_latency", false, "same as -U")
	fs.StringVar(&o.out.json, "json", "", "write every figure as JSON to `file` (- for stdout)")
	fs.StringVar(&o.out.html, "html", "", "write an HTML report to `file`: the figures, latency and rate second by second, the percentile spectrum")
	fs.StringVar(&o.out.hgrm, "hgrm", "", "write the corrected percentile spectrum to `file` for the HdrHistogram plotter")
	fs.BoolVar(&o.progress, "progress", false, "print the live line (once a second) on stderr when stdout is not a terminal")
	fs.Func("stages", "open-model ramp `DURATION:RATE,…`, e.g. 30s:1000,1m:5000,30s:0 (instead of -R and -d)", func(v string) error {
		st, err := bench.ParseStages(v)
		o.stages = st
		return err
	})
	fs.BoolVar(&o.http2, "http2", false, "speak HTTP/2: h2 by ALPN for https://, h2c with prior knowledge for http://")
	o.streams = 1
	fs.Var(&o.streams, "streams", "concurrent `streams` per HTTP/2 connection, each on its own schedule (total: -c × --streams)")
	fs.Var(&o.streams, "m", "same as --streams (h2load's -m)")
	fs.StringVar(&o.startAt, "start-at", "", "start at this RFC 3339 `time` (several generators together; see bench merge)")
	fs.Var(&o.thresholds, "threshold", "fail the run (exit 1) unless `METRIC<VALUE` holds: p99.9<70ms, max<1s, errors<0.1%, errors<10, rps>900 (repeatable)")
	o.agents.register(fs)

	flagArgs, scriptArgs := splitScriptArgs(args)
	pos, err := parseInterspersed(fs, flagArgs, env.Getenv)
	if err != nil {
		return nil, err
	}
	o.target.scriptArgs = scriptArgs
	if len(pos) != 1 {
		fs.Usage()
		return nil, cli.Usagef("want exactly one URL, got %d arguments", len(pos))
	}
	if o.url, err = parseTargetURL(pos[0]); err != nil {
		return nil, err
	}
	if int(o.connections) < int(o.target.threads) {
		return nil, cli.Usagef("connections (-c %d) must be at least threads (-t %d)", o.connections, o.target.threads)
	}
	if o.duration <= 0 {
		return nil, cli.Usagef("duration must be positive")
	}
	if o.streams > 1 && !o.http2 {
		return nil, cli.Usagef("--streams needs --http2")
	}
	if len(o.stages) > 0 {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		switch {
		case set["R"] || set["rate"]:
			return nil, cli.Usagef("--stages and -R are mutually exclusive: the stages give the rate")
		case set["d"] || set["duration"]:
			return nil, cli.Usagef("--stages and -d are mutually exclusive: the stages give the duration")
		case o.warmup > 0:
			return nil, cli.Usagef("--stages and --warmup are mutually exclusive: make the first stage the warm-up")
		}
		o.duration = durationFlag(bench.StagesDuration(o.stages))
	}
	if o.target.timeout <= 0 {
		return nil, cli.Usagef("--timeout must be positive")
	}
	if _, err := time.Parse(time.RFC3339Nano, o.startAt); o.startAt != "" && err != nil {
		return nil, cli.Usagef("--start-at %q: want an RFC 3339 time such as 2026-12-01T12:00:00Z", o.startAt)
	}
	if err := o.agents.parse(); err != nil {
		return nil, err
	}
	if o.agents.list != "" {
		if len(o.stages) > 0 {
			return nil, cli.Usagef("--stages does not run with --agents yet: use -R and -d")
		}
		if err := o.target.checkDistributable(); err != nil {
			return nil, err
		}
	}
	return o, o.target.validate()
}

// source is where a run's requests come from: a static request, a Lua
// script or a built-in scenario.
type source struct {
	newRequester func(thread int) (bench.Requester, error)
	script       *lua.Script
	tls          *tls.Config
}

func (s *source) close() {
	if s.script != nil {
		s.script.Close()
	}
}

func newSource(ctx context.Context, t *targetOptions, u *url.URL, stdout io.Writer) (*source, error) {
	headers := bench.Fields(t.headers)
	if t.noKeepAlive {
		headers = append(bench.Fields(nil), headers...).Set("Connection", "close")
	}
	tc, err := t.tlsConfig()
	if err != nil {
		return nil, err
	}
	switch {
	case t.script != "":
		sc, err := lua.Load(lua.Options{Path: t.script, URL: u, Headers: headers, Args: t.scriptArgs, Stdout: stdout})
		if err != nil {
			return nil, &cli.UsageError{Err: err}
		}
		return &source{newRequester: sc.NewRequester, script: sc, tls: tc}, nil
	case t.scenario != "":
		sc, err := bench.ParseScenario(t.scenario)
		if err != nil {
			return nil, &cli.UsageError{Err: err}
		}
		sc.Preload, sc.Uniform, sc.TLS = t.preload, t.uniform, tc
		f, err := sc.Prepare(ctx, u, headers)
		if err != nil {
			return nil, err
		}
		return &source{newRequester: f, tls: tc}, nil
	}
	fields := bench.Fields{{Name: "Host", Value: bench.HostHeader(u.Hostname(), u.Port())}}
	for _, h := range headers {
		fields = fields.Set(h.Name, h.Value)
	}
	req := bench.Static(bench.AppendRequest(nil, "GET", u.RequestURI(), fields, nil))
	return &source{newRequester: func(int) (bench.Requester, error) { return req, nil }, tls: tc}, nil
}

func runBench(ctx context.Context, args []string, env cli.Env) error {
	if len(args) > 0 && args[0] == "capacity" {
		return runCapacity(ctx, args[1:], env)
	}
	if len(args) > 0 && args[0] == "merge" {
		return runMerge(ctx, args[1:], env)
	}
	if len(args) > 0 && args[0] == "agent" {
		return runBenchAgent(ctx, args[1:], env)
	}
	o, err := parseBench(args, env)
	if err != nil {
		return err
	}
	if o.agents.list != "" {
		return runDistributed(ctx, o, env)
	}
	src, err := newSource(ctx, &o.target, o.url, env.Stdout)
	if err != nil {
		return err
	}
	defer src.close()
	if o.startAt != "" {
		if err := waitUntil(ctx, o.startAt, time.Now, env.Stderr); err != nil {
			return err
		}
	}

	out := &lockedWriter{w: env.Stdout}
	if err := bench.WriteHeader(out, o.url.String(), time.Duration(o.duration), int(o.target.threads), int(o.connections)); err != nil {
		return err
	}
	cfg := bench.Config{
		URL: o.url, Threads: int(o.target.threads), Connections: int(o.connections),
		Duration: time.Duration(o.duration), Warmup: time.Duration(o.warmup), Timeout: time.Duration(o.target.timeout),
		Rate: float64(o.rate), Stages: o.stages, NewRequester: src.newRequester, TLS: src.tls,
		HTTP2: o.http2, Streams: int(o.streams),
		OnCalibrated: func(_ int, mean time.Duration) { _ = bench.WriteCalibration(out, mean) },
	}
	// The live line: rewritten in place once a second when stdout is a
	// terminal, nothing of it otherwise unless --progress asks for lines on
	// stderr.
	var prog *progressLine
	switch {
	case isTerminal(env.Stdout):
		prog = &progressLine{w: out, tty: true}
	case o.progress:
		prog = &progressLine{w: env.Stderr}
	}
	if prog != nil {
		cfg.Progress = prog.show
	}
	res, err := bench.Run(ctx, cfg)
	prog.clear()
	if err != nil {
		return err
	}
	if err := bench.WriteText(out, res, bench.TextOptions{Latency: o.latency, Uncorrected: o.uncorrected}); err != nil {
		return err
	}
	if src.script != nil && src.script.HasDone() {
		if err := src.script.Done(res); err != nil {
			return err
		}
	}
	return finishRun(env, res, o.thresholds, o.out, "linkgate bench", runExtra{})
}

// outputFiles are the files a run (or a merge) writes its result to; ""
// is none, "-" stdout.
type outputFiles struct{ json, hgrm, html string }

// runExtra is what a distributed run adds to the JSON and HTML: a row per
// agent, and why the run is invalid.
type runExtra struct {
	agents  []bench.AgentSummary
	invalid []string
}

// finishRun checks the thresholds on a finished (or merged) result, lists
// them after the report, writes the JSON, .hgrm and HTML files asked for
// (the HTML titled title), and returns the failure of a broken threshold.
func finishRun(env cli.Env, res *bench.Result, thresholds []bench.Threshold, out outputFiles, title string, extra runExtra) error {
	verdicts := res.Check(thresholds)
	if len(verdicts) > 0 {
		fmt.Fprintln(env.Stdout, "Thresholds:")
		for _, v := range verdicts {
			fmt.Fprintf(env.Stdout, "  %s\n", v.Describe())
		}
	}
	if out.json != "" {
		s := res.Summarize(true)
		s.WithVerdicts(verdicts)
		s.Agents, s.Invalid = extra.agents, extra.invalid
		if err := writeFileOrStdout(out.json, env.Stdout, func(w io.Writer) error { return bench.WriteSummary(w, s) }); err != nil {
			return err
		}
	}
	if out.hgrm != "" {
		if err := writeFileOrStdout(out.hgrm, env.Stdout, func(w io.Writer) error { return bench.WriteSpectrum(w, res.Latency) }); err != nil {
			return err
		}
	}
	if out.html != "" {
		o := htmlreport.Options{Title: title, Verdicts: verdicts, Generated: time.Now(), Agents: extra.agents, Invalid: extra.invalid}
		if err := writeFileOrStdout(out.html, env.Stdout, func(w io.Writer) error { return htmlreport.Write(w, res, o) }); err != nil {
			return err
		}
		if out.html != "-" {
			fmt.Fprintf(env.Stdout, "HTML report: %s\n", out.html)
		}
	}
	return brokenThresholds(verdicts)
}

// brokenThresholds is the run's failure when a threshold did not hold.
func brokenThresholds(vs []bench.Verdict) error {
	var broken []string
	for _, v := range vs {
		if !v.Pass {
			broken = append(broken, v.Describe())
		}
	}
	if len(broken) == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d thresholds broken: %s", len(broken), len(vs), strings.Join(broken, "; "))
}

// writeFileOrStdout writes to path, or to stdout when path is "-".
func writeFileOrStdout(path string, stdout io.Writer, write func(io.Writer) error) error {
	if path == "-" {
		return write(stdout)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// lockedWriter serializes writes from the run's callbacks and the report.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// progressLine is the live status on stderr: rewritten in place on a
// terminal, one line per update otherwise.
type progressLine struct {
	w   io.Writer
	tty bool
}

func (p *progressLine) show(s bench.Progress) {
	phase := fmt.Sprintf("%5.1fs / %s", s.Elapsed.Seconds(), s.Total)
	if s.Warmup {
		phase = "warming up"
	}
	line := fmt.Sprintf("[%s] %10.1f req/s  errors %d  p99 of the last second %s", phase, s.Rate, s.Errors,
		bench.FormatTimeUS(float64(s.P99.Microseconds())))
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

func (p *progressLine) clear() {
	if p != nil && p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// isTerminal reports whether w is a character device such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && !strings.HasPrefix(st.Name(), "null")
}
