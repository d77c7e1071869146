//go:build !functiononly

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	sdklambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/linkgate/linkgate/bench"
	"github.com/linkgate/linkgate/bench/agent"
	lambdaagent "github.com/linkgate/linkgate/bench/agent/lambda"
	"github.com/linkgate/linkgate/internal/cli"
)

const agentSynopsis = "linkgate bench agent --listen ADDR --token TOKEN [--ca FILE --cert FILE --key FILE]"

const agentDescription = `Run a load-generating agent for distributed runs: a coordinator (linkgate
bench --agents HOST:PORT,…) measures this machine's clock, sends it its share
of a run and gets back its raw histograms and per-second series, which it
merges exactly with the other agents'. Each step runs as a plain linkgate
bench run: nothing of the protocol is in the send loop.

Every request must carry the shared token (--token, at least 16 bytes, or
--token-file); the agent does not listen without one. With --cert and --key
it speaks HTTPS; with --ca as well, it requires a client certificate signed
by that CA (mutual TLS). Anyone holding the token can point this machine's
load at any address it reaches: keep it on a private network.`

// agentOptions is the parsed command line of bench agent.
type agentOptions struct {
	listen, token, tokenFile string
	ca, cert, key            string
	logFormat, logLevel      string
}

func parseAgent(args []string, env cli.Env) (*agentOptions, error) {
	o := &agentOptions{}
	fs := cli.NewFlagSet("bench agent", agentSynopsis, agentDescription, env.Stderr)
	fs.StringVar(&o.listen, "listen", ":7070", "`address` to listen on (host:port)")
	fs.StringVar(&o.token, "token", "", "the shared `token` every request must carry (at least 16 bytes)")
	fs.StringVar(&o.tokenFile, "token-file", "", "read the shared token from `file` (instead of --token)")
	fs.StringVar(&o.ca, "ca", "", "require client certificates signed by the CA in PEM `file` (mutual TLS)")
	fs.StringVar(&o.cert, "cert", "", "serve HTTPS with the certificate in PEM `file` (with --key)")
	fs.StringVar(&o.key, "key", "", "the certificate's private key PEM `file`")
	fs.StringVar(&o.logFormat, "log-format", "text", "log `format`: text or json (durations as Go writes them, \"10s\", in both)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, cli.Usagef("bench agent takes no arguments, got %q", fs.Args())
	}
	if o.tokenFile != "" {
		if o.token != "" {
			return nil, cli.Usagef("--token and --token-file are mutually exclusive")
		}
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return nil, &cli.UsageError{Err: err}
		}
		o.token = strings.TrimSpace(string(b))
	}
	if len(o.token) < agent.MinTokenBytes {
		return nil, cli.Usagef("bench agent needs a shared token of at least %d bytes (--token, --token-file or LINKGATE_TOKEN): it never listens without one", agent.MinTokenBytes)
	}
	if (o.cert == "") != (o.key == "") {
		return nil, cli.Usagef("--cert and --key go together")
	}
	if o.ca != "" && o.cert == "" {
		return nil, cli.Usagef("--ca (client certificates) needs --cert and --key (the agent's own)")
	}
	return o, nil
}

func runBenchAgent(ctx context.Context, args []string, env cli.Env) error {
	o, err := parseAgent(args, env)
	if err != nil {
		return err
	}
	logger, err := cli.NewLogger(env.Stderr, o.logFormat, o.logLevel)
	if err != nil {
		return err
	}
	var tc *tls.Config
	if o.cert != "" {
		cert, err := tls.LoadX509KeyPair(o.cert, o.key)
		if err != nil {
			return &cli.UsageError{Err: fmt.Errorf("--cert/--key: %w", err)}
		}
		tc = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if o.ca != "" {
			pool, err := loadPool(o.ca)
			if err != nil {
				return err
			}
			tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
		}
	}
	h, err := agent.NewHandler(agent.NewAgent(logger, time.Now), o.token, logger)
	if err != nil {
		return &cli.UsageError{Err: err}
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, TLSConfig: tc, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 16 << 10, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	scheme := "http"
	if tc != nil {
		scheme = "https"
		ln = tls.NewListener(ln, tc)
	}
	logger.Info("linkgate bench agent listening", "addr", ln.Addr().String(), "scheme", scheme, "mtls", o.ca != "")
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	_ = srv.Close() // a step still running ends with its connection
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func loadPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, &cli.UsageError{Err: err}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, cli.Usagef("%s: no PEM certificate in it", path)
	}
	return pool, nil
}

// agentsOptions are the coordinator's flags: which agents, and how to
// reach and check them.
type agentsOptions struct {
	list             string
	token, tokenFile string
	ca, cert, key    string
	maxOffset        durationFlag
	lambdaEndpoint   string
	step             durationFlag
	specs            []agentSpec
	clientTLS        *tls.Config
}

// agentSpec is one entry of --agents.
type agentSpec struct {
	kind   string // "host", "lambda" or "k8s"
	addr   string // host:port, the function, or the job's service
	n      int    // lambda's concurrent invocations
	weight float64
}

func (a *agentsOptions) register(fs *flag.FlagSet) {
	a.maxOffset = durationFlag(agent.DefaultMaxClockOffset)
	fs.StringVar(&a.list, "agents", "", "run distributed on these `agents`: HOST:PORT[=WEIGHT],… (linkgate bench agent), lambda:FUNCTION:N or k8s:SERVICE:PORT")
	fs.StringVar(&a.token, "agents-token", "", "the agents' shared `token`")
	fs.StringVar(&a.tokenFile, "agents-token-file", "", "read the agents' shared token from `file`")
	fs.StringVar(&a.ca, "agents-ca", "", "reach the agents over HTTPS, verifying them against the CA in PEM `file`")
	fs.StringVar(&a.cert, "agents-cert", "", "client certificate PEM `file` for the agents (mutual TLS, with --agents-key)")
	fs.StringVar(&a.key, "agents-key", "", "the client certificate's private key PEM `file`")
	fs.Var(&a.maxOffset, "max-clock-offset", "an agent whose clock is further off than this (beyond half the round trip), or starts later, invalidates the run")
	fs.StringVar(&a.lambdaEndpoint, "lambda-endpoint", "", "the Lambda API's `URL` for lambda: agents (default: AWS's for the region)")
	fs.Var(&a.step, "agents-step", "cut the run into consecutive steps of at most this `long` on the agents (default: 14m with lambda: agents, else the whole run)")
}

// maxLambdaStep is the longest step (warm-up and measured window) sent to
// a Lambda agent: an invocation lasts at most 15 minutes, and the lead,
// the timeout and the report need some of them.
const maxLambdaStep = 14 * time.Minute

// hasLambda reports whether an agent is a Lambda function.
func (a *agentsOptions) hasLambda() bool {
	for _, s := range a.specs {
		if s.kind == "lambda" {
			return true
		}
	}
	return false
}

// lead is how long before the start the steps are sent: longer when a
// Lambda function may start new execution environments.
func (a *agentsOptions) lead() time.Duration {
	if a.hasLambda() {
		return 5 * time.Second
	}
	return agent.DefaultLead
}

// steps cuts a run of d after warmup into the durations of consecutive
// steps, each with the warm-up, in whole seconds: one step unless
// --agents-step (or a Lambda agent's limit) is shorter than the run.
func (a *agentsOptions) steps(d, warmup time.Duration) ([]time.Duration, error) {
	limit := time.Duration(a.step)
	if limit == 0 && a.hasLambda() {
		limit = maxLambdaStep
	}
	if limit == 0 || d+warmup <= limit {
		return []time.Duration{d}, nil
	}
	per := (limit - warmup).Truncate(time.Second)
	if per < time.Second {
		return nil, cli.Usagef("--agents-step %s leaves no measured second after the %s warm-up", limit, warmup)
	}
	var out []time.Duration
	for left := d; left > 0; left -= per {
		out = append(out, min(per, left))
	}
	return out, nil
}

// parse reads --agents and the agents' credentials; nothing when --agents
// is not given.
func (a *agentsOptions) parse() error {
	if a.list == "" {
		return nil
	}
	for _, e := range strings.Split(a.list, ",") {
		s, err := parseAgentSpec(e)
		if err != nil {
			return cli.Usagef("--agents %q: %v", e, err)
		}
		a.specs = append(a.specs, s)
	}
	if a.tokenFile != "" {
		b, err := os.ReadFile(a.tokenFile)
		if err != nil {
			return &cli.UsageError{Err: err}
		}
		a.token = strings.TrimSpace(string(b))
	}
	needsToken := false
	for _, s := range a.specs {
		needsToken = needsToken || s.kind != "lambda"
	}
	if a.step < 0 {
		return cli.Usagef("--agents-step must not be negative")
	}
	if needsToken && a.token == "" {
		return cli.Usagef("--agents needs the agents' shared token (--agents-token, --agents-token-file or LINKGATE_AGENTS_TOKEN)")
	}
	if (a.cert == "") != (a.key == "") {
		return cli.Usagef("--agents-cert and --agents-key go together")
	}
	if a.ca != "" || a.cert != "" {
		a.clientTLS = &tls.Config{MinVersion: tls.VersionTLS12}
		if a.ca != "" {
			pool, err := loadPool(a.ca)
			if err != nil {
				return err
			}
			a.clientTLS.RootCAs = pool
		}
		if a.cert != "" {
			cert, err := tls.LoadX509KeyPair(a.cert, a.key)
			if err != nil {
				return &cli.UsageError{Err: fmt.Errorf("--agents-cert/--agents-key: %w", err)}
			}
			a.clientTLS.Certificates = []tls.Certificate{cert}
		}
	}
	return nil
}

// parseAgentSpec reads one agent: HOST:PORT[=WEIGHT], lambda:FUNCTION:N
// or k8s:SERVICE:PORT.
func parseAgentSpec(e string) (agentSpec, error) {
	e = strings.TrimSpace(e)
	switch kind, rest, _ := strings.Cut(e, ":"); kind {
	case "lambda":
		fn, n, ok := strings.Cut(rest, ":")
		count, err := strconv.Atoi(n)
		if !ok || fn == "" || err != nil || count < 1 || count > 10_000 {
			return agentSpec{}, errors.New("want lambda:FUNCTION:N with N from 1 to 10000 concurrent invocations")
		}
		return agentSpec{kind: "lambda", addr: fn, n: count, weight: 1}, nil
	case "k8s":
		host, port, err := net.SplitHostPort(rest)
		if err != nil || host == "" || port == "" {
			return agentSpec{}, errors.New("want k8s:SERVICE:PORT, the Job's headless Service (deploy/k8s/)")
		}
		return agentSpec{kind: "k8s", addr: rest, weight: 1}, nil
	}
	addr, w, hasW := strings.Cut(e, "=")
	weight := 1.0
	if hasW {
		v, err := strconv.ParseFloat(w, 64)
		if err != nil || !(v > 0) || v > 1e6 {
			return agentSpec{}, errors.New("the weight after = must be a positive number")
		}
		weight = v
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return agentSpec{}, errors.New("want HOST:PORT of a linkgate bench agent")
	}
	return agentSpec{kind: "host", addr: addr, weight: weight}, nil
}

// remotes resolves the specs into the agents to coordinate, with their
// weights.
func (a *agentsOptions) remotes(ctx context.Context) ([]agent.Remote, []float64, error) {
	scheme := "http"
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if a.clientTLS != nil {
		scheme, tr.TLSClientConfig = "https", a.clientTLS
	}
	hc := &http.Client{Transport: tr}
	var rs []agent.Remote
	var ws []float64
	var lc *sdklambda.Client
	for _, s := range a.specs {
		switch s.kind {
		case "host":
			rs = append(rs, agent.NewClient(s.addr, scheme+"://"+s.addr, a.token, hc))
			ws = append(ws, s.weight)
		case "lambda":
			if lc == nil {
				var err error
				if lc, err = lambdaagent.NewClient(ctx, a.lambdaEndpoint); err != nil {
					return nil, nil, err
				}
			}
			for _, r := range lambdaagent.Remotes(lc, s.addr, s.n) {
				rs = append(rs, r)
				ws = append(ws, 1)
			}
		case "k8s":
			// The Job's headless Service resolves to every ready pod.
			host, port, _ := net.SplitHostPort(s.addr) // checked by parseAgentSpec
			ips, err := net.DefaultResolver.LookupHost(ctx, host)
			if err != nil {
				return nil, nil, fmt.Errorf("--agents k8s:%s: %w", s.addr, err)
			}
			slices.Sort(ips)
			for _, ip := range slices.Compact(ips) {
				addr := net.JoinHostPort(ip, port)
				rs = append(rs, agent.NewClient(host+"/"+addr, scheme+"://"+addr, a.token, hc))
				ws = append(ws, 1)
			}
		}
	}
	return rs, ws, nil
}

// distributedStep is the whole run as one step, from bench's options; the
// coordinator splits its rate and connections between the agents.
func distributedStep(t *targetOptions, u string, threads, connections int, rate float64, d, warmup time.Duration) agent.Step {
	s := agent.Step{URL: u, Scenario: t.scenario, Preload: t.preload, Uniform: t.uniform,
		Threads: threads, Connections: connections, Rate: rate, Duration: agent.Duration(d), Warmup: agent.Duration(warmup),
		Timeout: agent.Duration(t.timeout), NoKeepAlive: t.noKeepAlive, Insecure: t.tls.Insecure, SNI: t.tls.ServerName}
	for _, h := range t.headers {
		s.Headers = append(s.Headers, agent.Header{Name: h.Name, Value: h.Value})
	}
	return s
}

// checkDistributable refuses what cannot be sent to an agent: files on
// this machine (a script, TLS files).
func (t *targetOptions) checkDistributable() error {
	switch {
	case t.script != "":
		return cli.Usagef("-s (a Lua script) does not run with --agents yet: use -H, or --scenario")
	case t.tls.CAFile != "" || t.tls.CertFile != "":
		return cli.Usagef("--ca, --cert and --key are files on this machine and do not go to --agents: use --insecure or --sni")
	}
	return nil
}

// runDistributed runs bench's run on the agents: the same report, JSON,
// HTML and thresholds as a single run, from the exact merge, plus a row
// per agent. A failed or invalid run exits non-zero naming the agents.
func runDistributed(ctx context.Context, o *benchOptions, env cli.Env) error {
	rs, ws, err := o.agents.remotes(ctx)
	if err != nil {
		return err
	}
	steps, err := o.agents.steps(time.Duration(o.duration), time.Duration(o.warmup))
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "Distributed over %d agents", len(rs))
	if len(steps) > 1 {
		fmt.Fprintf(env.Stdout, " in %d consecutive steps", len(steps))
	}
	fmt.Fprintln(env.Stdout)
	var merged []*bench.Result
	var rows []bench.AgentSummary
	var invalid []string
	for i, d := range steps {
		p := agent.Plan{Step: distributedStep(&o.target, o.url.String(), int(o.target.threads), int(o.connections), float64(o.rate),
			d, time.Duration(o.warmup)),
			Weights: ws, MaxClockOffset: time.Duration(o.agents.maxOffset), Lead: o.agents.lead()}
		p.Step.HTTP2, p.Step.Streams = o.http2, int(o.streams)
		if o.startAt != "" && i == 0 {
			p.Step.StartAt, _ = time.Parse(time.RFC3339Nano, o.startAt) // checked by parseBench
		}
		out, err := agent.Coordinate(ctx, rs, p)
		if err != nil {
			return err
		}
		if len(steps) > 1 {
			fmt.Fprintf(env.Stdout, "Step %d of %d (%s):\n", i+1, len(steps), d)
		}
		if out.Merged == nil {
			if err := agent.WriteAgents(env.Stdout, out); err != nil {
				return err
			}
			return out.Err()
		}
		if len(steps) > 1 {
			if err := agent.WriteAgents(env.Stdout, out); err != nil {
				return err
			}
		}
		merged = append(merged, out.Merged)
		for _, r := range out.Summaries() {
			if len(steps) > 1 {
				r.Agent = fmt.Sprintf("%s (step %d)", r.Agent, i+1)
			}
			rows = append(rows, r)
		}
		for _, p := range out.Invalid() {
			if len(steps) > 1 {
				p = fmt.Sprintf("step %d: %s", i+1, p)
			}
			invalid = append(invalid, p)
		}
		if len(steps) == 1 {
			m := out.Merged
			if err := bench.WriteHeader(env.Stdout, o.url.String(), time.Duration(o.duration), m.Threads, m.Connections); err != nil {
				return err
			}
			if err := bench.WriteText(env.Stdout, m, bench.TextOptions{Latency: o.latency, Uncorrected: o.uncorrected}); err != nil {
				return err
			}
			if err := agent.WriteAgents(env.Stdout, out); err != nil {
				return err
			}
		}
	}
	m := merged[0]
	if len(steps) > 1 {
		if m, err = bench.Concat(merged); err != nil {
			return err
		}
		if err := bench.WriteHeader(env.Stdout, o.url.String(), time.Duration(o.duration), m.Threads, m.Connections); err != nil {
			return err
		}
		if err := bench.WriteText(env.Stdout, m, bench.TextOptions{Latency: o.latency, Uncorrected: o.uncorrected}); err != nil {
			return err
		}
		for _, p := range invalid {
			fmt.Fprintf(env.Stdout, "Invalid: %s\n", p)
		}
	}
	err = finishRun(env, m, o.thresholds, o.out, fmt.Sprintf("linkgate bench (%d agents)", len(rs)), runExtra{agents: rows, invalid: invalid})
	var verdict error
	if len(invalid) > 0 {
		verdict = &agent.InvalidError{Problems: invalid}
	}
	switch {
	case verdict != nil && err != nil:
		return fmt.Errorf("%w; %w", verdict, err)
	case verdict != nil:
		return verdict
	}
	return err
}
