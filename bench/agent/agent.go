package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/linkgate/linkgate/bench"
)

// Agent runs steps on this machine, one at a time. Serve answers the
// protocol's requests whatever carries them (HTTP, a Lambda invocation).
type Agent struct {
	now    func() time.Time
	logger *slog.Logger
	busy   atomic.Bool
}

// NewAgent returns an agent on the clock now (time.Now outside tests).
func NewAgent(logger *slog.Logger, now func() time.Time) *Agent {
	return &Agent{now: now, logger: logger}
}

// Errors Serve returns, mapped to status codes at the edge.
var (
	ErrBusy      = errors.New("the agent is running another step")
	ErrLateStart = errors.New("the step's start_at has passed on this agent's clock")
)

// Serve answers one request: the clock, or a step run to its end.
func (a *Agent) Serve(ctx context.Context, req *Request) (*Response, error) {
	switch req.Kind {
	case KindClock:
		return &Response{Version: Version, Clock: &Clock{UnixNano: a.now().UnixNano()}}, nil
	case KindRun:
		rep, err := a.run(ctx, req.Step)
		if err != nil {
			return nil, err
		}
		return &Response{Version: Version, Report: rep}, nil
	}
	return nil, fmt.Errorf("unknown request kind %q", req.Kind)
}

// run prepares the step's requests (a scenario's preload included), waits
// for its start time on the agent's clock and runs it with bench.Run:
// nothing of the protocol is in the send loop.
func (a *Agent) run(ctx context.Context, s *Step) (*Report, error) {
	if !a.busy.CompareAndSwap(false, true) {
		return nil, ErrBusy
	}
	defer a.busy.Store(false)
	if late := a.now().Sub(s.StartAt); late > MaxLateStart {
		return nil, fmt.Errorf("%w: it was %s ago", ErrLateStart, late.Round(time.Millisecond))
	}
	cfg, err := s.config(ctx)
	if err != nil {
		return nil, err
	}
	wait := s.StartAt.Sub(a.now())
	if wait < -MaxLateStart {
		return nil, fmt.Errorf("%w: preparing the requests took until %s after it", ErrLateStart, (-wait).Round(time.Millisecond))
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	started := a.now()
	a.logger.LogAttrs(ctx, slog.LevelInfo, "step started", slog.String("agent", s.Agent), slog.String("url", s.URL),
		slog.Float64("rate", s.Rate), slog.Int("connections", s.Connections), slog.Duration("duration", time.Duration(s.Duration)))
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("step interrupted: %w", err)
	}
	a.logger.LogAttrs(ctx, slog.LevelInfo, "step done", slog.String("agent", s.Agent), slog.Int64("requests", res.Requests),
		slog.Float64("achieved", res.Achieved()))
	return &Report{Agent: s.Agent, StartedAt: started, StartLag: Duration(started.Sub(s.StartAt)), Result: res.Summarize(false)}, nil
}

// config turns a step into the bench configuration it runs, preparing a
// scenario's links on the way.
func (s *Step) config(ctx context.Context) (bench.Config, error) {
	u, err := url.Parse(s.URL)
	if err != nil {
		return bench.Config{}, err
	}
	if u.Path == "" {
		u.Path = "/"
	}
	var headers bench.Fields
	for _, h := range s.Headers {
		headers = headers.Set(h.Name, h.Value)
	}
	if s.NoKeepAlive {
		headers = headers.Set("Connection", "close")
	}
	tc, err := bench.NewTLSConfig(bench.TLSOptions{ServerName: s.SNI, Insecure: s.Insecure})
	if err != nil {
		return bench.Config{}, err
	}
	var newRequester func(int) (bench.Requester, error)
	if s.Scenario != "" {
		sc, err := bench.ParseScenario(s.Scenario)
		if err != nil {
			return bench.Config{}, err
		}
		sc.Preload, sc.Uniform, sc.TLS = s.Preload, s.Uniform, tc
		if newRequester, err = sc.Prepare(ctx, u, headers); err != nil {
			return bench.Config{}, fmt.Errorf("scenario %s: %w", s.Scenario, err)
		}
	} else {
		method := s.Method
		if method == "" {
			method = "GET"
		}
		fields := bench.Fields{{Name: "Host", Value: bench.HostHeader(u.Hostname(), u.Port())}}
		for _, h := range headers {
			fields = fields.Set(h.Name, h.Value)
		}
		req := bench.Static(bench.AppendRequest(nil, method, u.RequestURI(), fields, nil))
		newRequester = func(int) (bench.Requester, error) { return req, nil }
	}
	streams := s.Streams
	if streams == 0 {
		streams = 1
	}
	return bench.Config{
		URL: u, TLS: tc, Threads: s.Threads, Connections: s.Connections,
		Duration: time.Duration(s.Duration), Warmup: time.Duration(s.Warmup), Timeout: time.Duration(s.Timeout),
		Rate: s.Rate, HTTP2: s.HTTP2, Streams: streams, NewRequester: newRequester,
	}, nil
}

// ServeJSON answers one request encoded as JSON with its response encoded
// (what a Lambda invocation carries). Whatever fails, including a request
// that does not decode, is a Response with Error: the coordinator always
// gets the protocol's answer.
func (a *Agent) ServeJSON(ctx context.Context, payload []byte) []byte {
	var resp *Response
	req, err := DecodeRequest(bytes.NewReader(payload))
	if err == nil {
		resp, err = a.Serve(ctx, req)
	}
	if err != nil {
		resp = &Response{Version: Version, Error: err.Error()}
	}
	var b bytes.Buffer
	_ = Encode(&b, resp)
	return b.Bytes()
}
