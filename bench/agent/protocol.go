// Package agent is linkgate bench's distributed mode: one agent protocol
// between a coordinator and the agents that generate the load, wherever
// they run (a host running linkgate bench agent, an AWS Lambda function, a
// Kubernetes pod).
//
// The coordinator asks each agent for its clock a few times (NTP-style:
// the sample with the shortest round trip gives the offset), then sends
// every agent one Step — the target, what to send, the agent's share of
// the rate and connections, and the wall-clock time to start at. Each agent
// runs bench.Run on its own (the coordinator adds nothing to the send
// loop) and answers with its whole result: the per-second series and the
// raw HdrHistograms and counters, as linkgate bench --json writes them. The
// coordinator merges them with bench.Merge, exactly as bench merge does,
// and marks the run invalid, naming the agent, when an agent failed, lagged
// its schedule, started late or has a clock further off than the bound.
//
// The wire format is JSON, one Request and one Response per exchange,
// whatever carries it: POST /v1/clock and /v1/run on an agent's HTTP
// listener (routes.go), or one Lambda invocation each.
package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/linkgate/linkgate/bench"
)

// Version is the protocol's version; an agent refuses another.
const Version = 1

// Size limits of the two messages. A step is a few hundred bytes; a
// result carries one encoded histogram per second of its window (a few
// hundred bytes each), so an hour-long step is about 2 MB.
const (
	MaxRequestBytes  = 1 << 20
	MaxResponseBytes = 64 << 20
)

// Bounds on a step an agent accepts.
const (
	MaxStepDuration = 24 * time.Hour
	MaxStartAhead   = time.Hour // how far in the future a step may start
	MaxLateStart    = time.Second
)

// Kinds of request.
const (
	KindClock = "clock" // what time is it on the agent
	KindRun   = "run"   // run a step
)

// Request is what the coordinator sends an agent.
type Request struct {
	Version int    `json:"version"`
	Kind    string `json:"kind"`
	Step    *Step  `json:"step,omitempty"`
}

// Step is one agent's share of a run.
type Step struct {
	// Agent is the name the coordinator gives the agent (its address, or
	// the function and the invocation's index), echoed in its report.
	Agent string `json:"agent"`
	// URL is the target; Method and Headers make the static request sent
	// when there is no Scenario.
	URL      string   `json:"url"`
	Method   string   `json:"method,omitempty"`
	Headers  []Header `json:"headers,omitempty"`
	Scenario string   `json:"scenario,omitempty"`
	Preload  int      `json:"preload,omitempty"`
	Uniform  bool     `json:"uniform,omitempty"`

	Threads     int      `json:"threads"`
	Connections int      `json:"connections"`
	Rate        float64  `json:"rate,omitempty"` // this agent's share; 0 is closed loop
	Duration    Duration `json:"duration"`
	Warmup      Duration `json:"warmup,omitempty"`
	Timeout     Duration `json:"timeout"`
	// StartAt is the wall-clock time to start at, on the agent's clock.
	StartAt time.Time `json:"start_at"`

	HTTP2       bool   `json:"http2,omitempty"`
	Streams     int    `json:"streams,omitempty"`
	NoKeepAlive bool   `json:"no_keepalive,omitempty"`
	Insecure    bool   `json:"insecure,omitempty"`
	SNI         string `json:"sni,omitempty"`
}

// Header is one request header field.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Duration is a time.Duration written as Go writes it ("1m30s").
type Duration time.Duration

// MarshalJSON writes d as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string such as \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Validate reports the first problem with s.
func (s *Step) Validate() error {
	u, err := url.Parse(s.URL)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		return fmt.Errorf("url %q: want http(s)://host[:port]/path", s.URL)
	case s.Threads < 1 || s.Threads > 1024:
		return fmt.Errorf("threads %d: want 1 to 1024", s.Threads)
	case s.Connections < s.Threads || s.Connections > 1<<20:
		return fmt.Errorf("connections %d: want %d (the threads) to %d", s.Connections, s.Threads, 1<<20)
	case s.Rate < 0 || s.Rate > 1e9 || s.Rate != s.Rate:
		return fmt.Errorf("rate %v: want 0 (closed loop) to 1e9", s.Rate)
	case s.Duration <= 0 || s.Warmup < 0 || time.Duration(s.Duration+s.Warmup) > MaxStepDuration:
		return fmt.Errorf("duration %v and warm-up %v: want a positive duration, together at most %v", time.Duration(s.Duration), time.Duration(s.Warmup), MaxStepDuration)
	case s.Timeout <= 0 || time.Duration(s.Timeout) > time.Hour:
		return fmt.Errorf("timeout %v: want up to 1h", time.Duration(s.Timeout))
	case s.StartAt.IsZero():
		return errors.New("no start_at")
	case s.HTTP2 && (s.Streams < 1 || s.Streams > 1<<16):
		return fmt.Errorf("streams %d: want 1 to 65536 with http2", s.Streams)
	case s.Preload < 0 || s.Preload > 10_000_000:
		return fmt.Errorf("preload %d: want 0 to 10000000", s.Preload)
	case s.Method != "" && !isToken(s.Method):
		return fmt.Errorf("method %q is not an HTTP token", s.Method)
	case len(s.Agent) > 256:
		return errors.New("agent name longer than 256 bytes")
	}
	for _, h := range s.Headers {
		if !isToken(h.Name) || strings.ContainsAny(h.Value, "\r\n") {
			return fmt.Errorf("header %q: not a valid field", h.Name)
		}
	}
	if s.Scenario != "" {
		if _, err := bench.ParseScenario(s.Scenario); err != nil {
			return err
		}
	}
	return nil
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// Response is an agent's answer: its clock, or the report of a step, or
// why it could not run it.
type Response struct {
	Version int     `json:"version"`
	Clock   *Clock  `json:"clock,omitempty"`
	Report  *Report `json:"report,omitempty"`
	Error   string  `json:"error,omitempty"`
}

// Clock is the agent's wall clock when it answered.
type Clock struct {
	UnixNano int64 `json:"unix_nano"`
}

// Report is what an agent measured in a step.
type Report struct {
	Agent string `json:"agent"`
	// StartedAt is when the agent started the step, on its own clock;
	// StartLag how much later than the step's StartAt that was.
	StartedAt time.Time `json:"started_at"`
	StartLag  Duration  `json:"start_lag"`
	// Result is the step's result as linkgate bench --json writes it,
	// with its histograms and per-second series.
	Result bench.Summary `json:"result"`
}

// DecodeRequest reads one request of at most MaxRequestBytes and checks it.
func DecodeRequest(r io.Reader) (*Request, error) {
	var req Request
	if err := decodeLimited(r, MaxRequestBytes, true, &req); err != nil {
		return nil, err
	}
	if req.Version != Version {
		return nil, fmt.Errorf("protocol version %d, this agent speaks %d", req.Version, Version)
	}
	switch req.Kind {
	case KindClock:
	case KindRun:
		if req.Step == nil {
			return nil, errors.New("a run request without a step")
		}
		if err := req.Step.Validate(); err != nil {
			return nil, fmt.Errorf("step: %w", err)
		}
	default:
		return nil, fmt.Errorf("unknown request kind %q", req.Kind)
	}
	return &req, nil
}

// DecodeResponse reads one response of at most MaxResponseBytes. A report
// in it is checked by its Result.
func DecodeResponse(r io.Reader) (*Response, error) {
	var resp Response
	if err := decodeLimited(r, MaxResponseBytes, false, &resp); err != nil {
		return nil, err
	}
	if resp.Version != Version {
		return nil, fmt.Errorf("protocol version %d, this coordinator speaks %d", resp.Version, Version)
	}
	return &resp, nil
}

// Decode rebuilds the bench result of a report from its histograms, as
// bench merge does with a --json file.
func (r *Report) Decode() (*bench.Result, error) {
	return bench.ResultFromSummary(&r.Result)
}

// decodeLimited decodes one JSON value of at most limit bytes; strict
// refuses unknown fields (a request's typo), a response may carry fields of
// a newer agent.
func decodeLimited(r io.Reader, limit int64, strict bool, v any) error {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if int64(len(data)) > limit {
		return fmt.Errorf("message larger than %d bytes", limit)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return errors.New("decode: data after the message")
	}
	return nil
}

// Encode writes v (a Request or a Response) as one line of JSON.
func Encode(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}
