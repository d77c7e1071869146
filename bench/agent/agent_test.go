package agent_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/linkgate/linkgate/bench"
	"github.com/linkgate/linkgate/bench/agent"
	"github.com/linkgate/linkgate/internal/testdep"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestMain(m *testing.M) {
	testdep.SpareProcs(8) // the agents and the target share the test's process
	os.Exit(m.Run())
}

const token = "0123456789abcdef-test-token"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// goldenStep is the step of the golden files.
func goldenStep() *agent.Step {
	return &agent.Step{
		Agent: "10.0.0.7:7000", URL: "http://target:8080/abc", Method: "GET",
		Headers: []agent.Header{{Name: "Accept", Value: "*/*"}},
		Threads: 2, Connections: 50, Rate: 2500, Duration: agent.Duration(30 * time.Second),
		Warmup: agent.Duration(5 * time.Second), Timeout: agent.Duration(2 * time.Second),
		StartAt: time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC),
	}
}

// goldenResult is a result with known histograms and two seconds.
func goldenResult() *bench.Result {
	h := func(vals ...int64) *hdrhistogram.Histogram {
		x := hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)
		for _, v := range vals {
			_ = x.RecordValue(v)
		}
		return x
	}
	rates := hdrhistogram.New(1, 1<<40, 3)
	_ = rates.RecordValue(1250)
	return &bench.Result{
		URL: "http://target:8080/abc", Threads: 2, Connections: 50, Rate: 2500,
		Duration: 2 * time.Second, Elapsed: 2 * time.Second, Requests: 4, Bytes: 400,
		Errors:  bench.Errors{Status: map[int]int64{503: 1}},
		Latency: h(900, 1100, 1500, 40000), Uncorrected: h(800, 1000, 1400, 2000), SendLag: h(3, 5, 8, 12), ReqPerSec: rates,
		Series: []bench.Second{{Index: 0, Requests: 2, Latency: h(900, 1100)}, {Index: 1, Requests: 2, Errors: 1, Latency: h(1500, 40000)}},
	}
}

// The wire format: a run request and a report, byte for byte; each
// decodes back to what was encoded.
func TestWireFormatGolden(t *testing.T) {
	rep := &agent.Report{Agent: "10.0.0.7:7000", StartedAt: time.Date(2026, 12, 7, 6, 0, 0, 300_000, time.UTC),
		StartLag: agent.Duration(300 * time.Microsecond), Result: goldenResult().Summarize(false)}
	tests := []struct {
		name string
		msg  any
	}{
		{"request_run", &agent.Request{Version: agent.Version, Kind: agent.KindRun, Step: goldenStep()}},
		{"request_clock", &agent.Request{Version: agent.Version, Kind: agent.KindClock}},
		{"response_clock", &agent.Response{Version: agent.Version, Clock: &agent.Clock{UnixNano: 1796623200000000000}}},
		{"response_report", &agent.Response{Version: agent.Version, Report: rep}},
		{"response_error", &agent.Response{Version: agent.Version, Error: "the agent is running another step"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := agent.Encode(&b, tt.msg); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tt.name+".golden.json")
			if *update {
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("encoded %s differs from %s:\n%s", tt.name, path, b.Bytes())
			}
			var back bytes.Buffer
			if strings.HasPrefix(tt.name, "request") {
				req, err := agent.DecodeRequest(bytes.NewReader(want))
				if err != nil {
					t.Fatal(err)
				}
				_ = agent.Encode(&back, req)
			} else {
				resp, err := agent.DecodeResponse(bytes.NewReader(want))
				if err != nil {
					t.Fatal(err)
				}
				if resp.Report != nil {
					r, err := resp.Report.Decode()
					if err != nil {
						t.Fatal(err)
					}
					if r.Latency.TotalCount() != 4 || r.Latency.Max() != goldenResult().Latency.Max() || len(r.Series) != 2 {
						t.Errorf("decoded report: %d latencies, max %d, %d seconds", r.Latency.TotalCount(), r.Latency.Max(), len(r.Series))
					}
				}
				_ = agent.Encode(&back, resp)
			}
			if !bytes.Equal(back.Bytes(), want) {
				t.Errorf("decoded and encoded again:\n%s\nwant\n%s", back.Bytes(), want)
			}
		})
	}
}

func TestDecodeRequestRefuses(t *testing.T) {
	step := func(edit func(s *agent.Step)) string {
		s := goldenStep()
		edit(s)
		var b bytes.Buffer
		_ = agent.Encode(&b, &agent.Request{Version: agent.Version, Kind: agent.KindRun, Step: s})
		return b.String()
	}
	tests := []struct {
		name, in, want string
	}{
		{"empty", ``, "decode"},
		{"version", `{"version":2,"kind":"clock"}`, "protocol version 2"},
		{"kind", `{"version":1,"kind":"shell"}`, "unknown request kind"},
		{"unknown field", `{"version":1,"kind":"clock","command":"rm"}`, "unknown field"},
		{"two values", `{"version":1,"kind":"clock"}{}`, "after the message"},
		{"run without step", `{"version":1,"kind":"run"}`, "without a step"},
		{"scheme", step(func(s *agent.Step) { s.URL = "file:///etc/passwd" }), "url"},
		{"threads", step(func(s *agent.Step) { s.Threads = 0 }), "threads"},
		{"connections", step(func(s *agent.Step) { s.Connections = 1 }), "connections"},
		{"duration", step(func(s *agent.Step) { s.Duration = agent.Duration(25 * time.Hour) }), "duration"},
		{"start", step(func(s *agent.Step) { s.StartAt = time.Time{} }), "start_at"},
		{"header", step(func(s *agent.Step) { s.Headers = []agent.Header{{Name: "X", Value: "a\r\nEvil: 1"}} }), "header"},
		{"method", step(func(s *agent.Step) { s.Method = "GET /x" }), "method"},
		{"scenario", step(func(s *agent.Step) { s.Scenario = "delete-all" }), "scenario"},
		{"duration text", strings.Replace(step(func(*agent.Step) {}), `"30s"`, `30`, 1), "duration"},
		{"too large", `{"version":1,"kind":"clock","x":"` + strings.Repeat("a", agent.MaxRequestBytes) + `"}`, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := agent.DecodeRequest(strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func FuzzDecodeRequest(f *testing.F) {
	for _, name := range []string{"request_run", "request_clock"} {
		b, err := os.ReadFile(filepath.Join("testdata", name+".golden.json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := agent.DecodeRequest(bytes.NewReader(b))
		if err != nil {
			return
		}
		// What decodes is valid, and encodes to something that decodes.
		var again bytes.Buffer
		if err := agent.Encode(&again, req); err != nil {
			t.Fatal(err)
		}
		if _, err := agent.DecodeRequest(&again); err != nil {
			t.Fatalf("a decoded request does not decode again: %v\n%s", err, again.Bytes())
		}
	})
}

func FuzzDecodeResponse(f *testing.F) {
	for _, name := range []string{"response_report", "response_clock", "response_error"} {
		b, err := os.ReadFile(filepath.Join("testdata", name+".golden.json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		resp, err := agent.DecodeResponse(bytes.NewReader(b))
		if err != nil || resp.Report == nil {
			return
		}
		// A report's histograms decode or are refused; never a panic.
		_, _ = resp.Report.Decode()
	})
}

// startAgent serves an agent on the clock now over HTTP, on 127.0.0.1.
func startAgent(t *testing.T, now func() time.Time) string {
	t.Helper()
	h, err := agent.NewHandler(agent.NewAgent(quiet, now), token, quiet)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestNewHandlerNeedsAToken(t *testing.T) {
	for _, tok := range []string{"", "short"} {
		if _, err := agent.NewHandler(agent.NewAgent(quiet, time.Now), tok, quiet); err == nil {
			t.Errorf("token %q accepted", tok)
		}
	}
}

// Every answer is JSON with the status of what went wrong; nothing is
// served without the token (remove the check in NewHandler and the
// "no token" and "wrong token" cases go red).
func TestHandlerStatuses(t *testing.T) {
	base := startAgent(t, time.Now)
	clock := `{"version":1,"kind":"clock"}`
	past := goldenStep()
	past.URL, past.StartAt = "http://127.0.0.1:1/", time.Now().Add(-time.Minute)
	var late bytes.Buffer
	_ = agent.Encode(&late, &agent.Request{Version: agent.Version, Kind: agent.KindRun, Step: past})
	tests := []struct {
		name, path, auth, body string
		want                   int
		wantErr                string
	}{
		{"clock", "/v1/clock", "Bearer " + token, clock, 200, ""},
		{"no token", "/v1/clock", "", clock, 401, "Bearer token"},
		{"wrong token", "/v1/clock", "Bearer " + token + "x", clock, 401, "Bearer token"},
		{"basic auth", "/v1/clock", "Basic " + token, clock, 401, "Bearer token"},
		{"unknown path", "/v1/shell", "Bearer " + token, clock, 404, "no such endpoint"},
		{"bad body", "/v1/clock", "Bearer " + token, `{`, 400, "decode"},
		{"kind on the wrong endpoint", "/v1/run", "Bearer " + token, clock, 400, "clock request on the run endpoint"},
		{"too large", "/v1/clock", "Bearer " + token, `{"x":"` + strings.Repeat("a", agent.MaxRequestBytes) + `"}`, 413, ""},
		{"late start", "/v1/run", "Bearer " + token, late.String(), 422, "start_at has passed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", base+tt.path, strings.NewReader(tt.body))
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			r, err := agent.DecodeResponse(resp.Body)
			if err != nil || resp.StatusCode != tt.want || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("%d %s (%v), want %d with a JSON body", resp.StatusCode, resp.Header.Get("Content-Type"), err, tt.want)
			}
			if !strings.Contains(r.Error, tt.wantErr) || (tt.want == 200 && r.Clock == nil) {
				t.Errorf("response %+v, want an error containing %q", r, tt.wantErr)
			}
		})
	}
}

// fixedLatency is a target that answers every request after delay.
func fixedLatency(t *testing.T, delay time.Duration) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay) // the latency under test
		w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

func clients(bases ...string) []agent.Remote {
	var rs []agent.Remote
	for _, b := range bases {
		rs = append(rs, agent.NewClient(strings.TrimPrefix(b, "http://"), b, token, http.DefaultClient))
	}
	return rs
}

func plan(target string, rate float64, conns int, d time.Duration) agent.Plan {
	return agent.Plan{Step: agent.Step{URL: target, Threads: 1, Connections: conns, Rate: rate,
		Duration: agent.Duration(d), Timeout: agent.Duration(2 * time.Second)}, Lead: 500 * time.Millisecond}
}

// Two agents at half the rate each: the merged result is the exact merge
// of theirs (every bucket of the merged histogram is the sum of theirs),
// every request planned in the window is counted once, and the rate,
// connections and threads add up.
func TestCoordinateMergesExactly(t *testing.T) {
	target := fixedLatency(t, 2*time.Millisecond)
	a, b := startAgent(t, time.Now), startAgent(t, time.Now)
	p := plan(target, 200, 8, 2*time.Second)
	p.Weights = []float64{1, 3}
	out, err := agent.Coordinate(context.Background(), clients(a, b), p)
	if err != nil {
		t.Fatal(err)
	}
	if out.Merged == nil {
		t.Fatalf("no merged result: %v", out.Invalid())
	}
	m := out.Merged
	if got, want := []float64{out.Agents[0].Rate, out.Agents[1].Rate}, []float64{50, 150}; got[0] != want[0] || got[1] != want[1] {
		t.Errorf("rates by weight %v, want %v", got, want)
	}
	if out.Agents[0].Connections != 2 || out.Agents[1].Connections != 6 || m.Connections != 8 || m.Threads != 2 || m.Rate != 200 {
		t.Errorf("connections %d+%d=%d, threads %d, rate %v", out.Agents[0].Connections, out.Agents[1].Connections, m.Connections, m.Threads, m.Rate)
	}
	// Every request planned in the 2 s window: 100 + 300.
	if n := m.Latency.TotalCount(); n != 400 {
		t.Errorf("%d latencies recorded, want the 400 planned", n)
	}
	sum := hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)
	for _, a := range out.Agents {
		sum.Merge(a.Result.Latency)
	}
	if !sum.Equals(m.Latency) {
		t.Error("the merged histogram is not the bucket-by-bucket sum of the agents'")
	}
	if p50 := m.Latency.ValueAtPercentile(50); p50 < 2000 {
		t.Errorf("merged p50 %d µs is below the target's 2 ms", p50)
	}
	var rows bytes.Buffer
	if err := agent.WriteAgents(&rows, out); err != nil {
		t.Fatal(err)
	}
	if strings.Count(rows.String(), " ok\n") != 2 && out.Err() == nil {
		t.Errorf("agent rows:\n%s", rows.String())
	}
}

// An agent whose clock is 300 ms ahead (less than the lead, so it runs
// its step) is named, and the run is invalid (remove the offset check in
// Coordinate and this goes red).
func TestCoordinateDetectsClockOffset(t *testing.T) {
	target := fixedLatency(t, 0)
	good := startAgent(t, time.Now)
	ahead := startAgent(t, func() time.Time { return time.Now().Add(300 * time.Millisecond) })
	out, err := agent.Coordinate(context.Background(), clients(good, ahead), plan(target, 100, 2, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if off := out.Agents[1].Offset; off < 250*time.Millisecond || off > 350*time.Millisecond {
		t.Errorf("offset measured %v, want 300ms", off)
	}
	// Only the clock problems: on a loaded machine either agent may also
	// lag its schedule, which is a problem of its own.
	var ie *agent.InvalidError
	if err := out.Err(); !errors.As(err, &ie) {
		t.Fatalf("verdict %v, want the run invalid", err)
	}
	var clock []string
	for _, p := range ie.Problems {
		if strings.Contains(p, "clock") {
			clock = append(clock, p)
		}
	}
	if len(clock) != 1 || !strings.Contains(clock[0], "agent "+strings.TrimPrefix(ahead, "http://")+" has a clock ") {
		t.Errorf("clock problems %q, want one naming the agent ahead", clock)
	}
}

// failing is an agent that answers its clock and fails its step.
type failing struct{ agent.Remote }

func (f failing) Do(ctx context.Context, req *agent.Request) (*agent.Response, error) {
	if req.Kind == agent.KindRun {
		return nil, errors.New("connection reset by peer")
	}
	return f.Remote.Do(ctx, req)
}

// An agent that fails its step invalidates the run: no merged result, the
// agent named, and the other agent's step cancelled instead of run out.
func TestCoordinateFailedAgent(t *testing.T) {
	target := fixedLatency(t, 0)
	rs := clients(startAgent(t, time.Now), startAgent(t, time.Now))
	rs[1] = failing{rs[1]}
	begin := time.Now()
	out, err := agent.Coordinate(context.Background(), rs, plan(target, 100, 2, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if out.Merged != nil {
		t.Error("a run with a failed agent was merged")
	}
	if err := out.Err(); err == nil || !strings.Contains(err.Error(), "agent "+rs[1].Name()+" failed: connection reset") {
		t.Errorf("verdict %v", err)
	}
	if time.Since(begin) > 20*time.Second {
		t.Error("the other agent's 30 s step was not cancelled")
	}
}

// A wrong token fails the clock round trip, before any load is sent.
func TestCoordinateWrongToken(t *testing.T) {
	base := startAgent(t, time.Now)
	rs := []agent.Remote{agent.NewClient("a", base, "not-the-token-at-all", http.DefaultClient)}
	_, err := agent.Coordinate(context.Background(), rs, plan("http://127.0.0.1:1/", 100, 2, time.Second))
	if err == nil || !strings.Contains(err.Error(), "agent a: clock: 401") {
		t.Errorf("error %v, want the agent named with a 401", err)
	}
}

// skewed answers the clock as an agent offset by off would, after a
// one-way delay out and back.
type skewed struct {
	off, out, back time.Duration
	now            *time.Time
}

func (s skewed) Name() string { return "skewed" }
func (s skewed) Do(_ context.Context, _ *agent.Request) (*agent.Response, error) {
	*s.now = s.now.Add(s.out)
	read := s.now.Add(s.off)
	*s.now = s.now.Add(s.back)
	return &agent.Response{Version: agent.Version, Clock: &agent.Clock{UnixNano: read.UnixNano()}}, nil
}

// The offset is exact for a symmetric round trip and off by half the
// asymmetry otherwise, which the round trip bounds.
func TestMeasureClock(t *testing.T) {
	tests := []struct {
		name           string
		off, out, back time.Duration
		want           time.Duration
	}{
		{"symmetric", 2 * time.Second, 5 * time.Millisecond, 5 * time.Millisecond, 2 * time.Second},
		{"behind", -300 * time.Millisecond, time.Millisecond, time.Millisecond, -300 * time.Millisecond},
		{"asymmetric", 0, 9 * time.Millisecond, time.Millisecond, 4 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
			off, rtt, err := agent.MeasureClock(context.Background(), skewed{tt.off, tt.out, tt.back, &now}, 3, func() time.Time { return now })
			if err != nil || off != tt.want || rtt != tt.out+tt.back {
				t.Errorf("offset %v rtt %v (%v), want %v and %v", off, rtt, err, tt.want, tt.out+tt.back)
			}
		})
	}
}
