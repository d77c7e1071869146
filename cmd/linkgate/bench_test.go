//go:build !functiononly

package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/cli"
)

func TestBenchUsageErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.lua")
	if err := os.WriteFile(bad, []byte("wrk.method = = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	u := "http://127.0.0.1:1/"
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no url", []string{"bench"}, "exactly one URL"},
		{"two urls", []string{"bench", u, u}, "exactly one URL"},
		{"-R word", []string{"bench", "-R", "fast", u}, "invalid value"},
		{"-R zero", []string{"bench", "-R", "0", u}, "positive rate"},
		{"-R negative", []string{"bench", "-R", "-5", u}, "invalid value"},
		{"-R joined zero", []string{"bench", "-R0", u}, "positive rate"},
		{"c < t", []string{"bench", "-c", "1", "-t", "2", u}, "at least threads"},
		{"c < t joined", []string{"bench", "-c1", "-t4", u}, "at least threads"},
		{"bad duration", []string{"bench", "-d", "soon", u}, "invalid duration"},
		{"zero duration", []string{"bench", "-d", "0", u}, "duration must be positive"},
		{"bad header", []string{"bench", "-H", "nocolon", u}, "invalid header"},
		{"https missing CA file", []string{"bench", "--ca", filepath.Join(dir, "none.pem"), "https://127.0.0.1:1/"}, "--ca"},
		{"https cert without key", []string{"bench", "--cert", bad, "https://127.0.0.1:1/"}, "go together"},
		{"not a url", []string{"bench", "localhost"}, "invalid URL"},
		{"bad start-at", []string{"bench", "--start-at", "noon", u}, "RFC 3339"},
		{"start-at past", []string{"bench", "--start-at", "2001-01-01T00:00:00Z", u}, "in the past"},
		{"merge nothing", []string{"bench", "merge"}, "at least one result"},
		{"merge not json", []string{"bench", "merge", bad}, "not a linkgate bench --json result"},
		{"bad stages", []string{"bench", "--stages", "30s", u}, "-stages"},
		{"stages and rate", []string{"bench", "--stages", "1s:10", "-R", "5", u}, "mutually exclusive"},
		{"stages and duration", []string{"bench", "--stages", "1s:10", "-d", "5s", u}, "mutually exclusive"},
		{"streams without http2", []string{"bench", "--streams", "4", u}, "--streams needs --http2"},
		{"bad threshold", []string{"bench", "--threshold", "p99<fast", u}, "-threshold"},
		{"unknown threshold metric", []string{"bench", "--threshold", "latency<1ms", u}, "unknown metric"},
		{"unknown flag", []string{"bench", "--nope", u}, "not defined"},
		{"scenario", []string{"bench", "--scenario", "delete", u}, "unknown scenario"},
		{"script and scenario", []string{"bench", "-s", bad, "--scenario", "shorten", u}, "mutually exclusive"},
		{"lua syntax error", []string{"bench", "-s", bad, u}, "syntax error"},
		{"missing script", []string{"bench", "-s", filepath.Join(dir, "none.lua"), u}, "no such file"},
		{"capacity no slo", []string{"bench", "capacity", u}, "--slo is required"},
		{"capacity bad slo", []string{"bench", "capacity", "--slo", "p99.9<70ms", u}, "invalid SLO"},
		{"capacity slo percentile", []string{"bench", "capacity", "--slo", "p120=70ms", u}, "percentile"},
		{"capacity budget", []string{"bench", "capacity", "--slo", "p99=1s", "--error-budget", "5", u}, "invalid share"},
		{"capacity min > max", []string{"bench", "capacity", "--slo", "p99=1s", "--min", "100", "--max", "10", u}, "--min"},
		{"capacity compare one url", []string{"bench", "capacity", "--slo", "p99=1s", "--compare", u}, "want 2 URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr strings.Builder
			err := run(context.Background(), tt.args, func(string) string { return "" }, strings.NewReader(""), discard{}, &stderr)
			if code := cli.ExitCode(err); code != 2 || !strings.Contains(fmt.Sprint(err), tt.wantErr) {
				t.Errorf("exit %d, error %v; want exit 2 and %q", code, err, tt.wantErr)
			}
		})
	}
}

// seedAPI imitates linkgate serve's seed-compatible routes: POST
// /shortenURL → 201 with a 10-character id, GET /{id} → 302.
type seedAPI struct {
	mu    sync.Mutex
	links map[string]string
	gets  map[string]int
	bad   int
}

func (s *seedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case r.Method == "POST" && r.URL.Path == "/shortenURL":
		var in struct{ OriginalURL string }
		if json.NewDecoder(r.Body).Decode(&in) != nil || !strings.HasPrefix(in.OriginalURL, "https://") {
			s.bad++
			http.Error(w, `{"error":"invalid"}`, http.StatusBadRequest)
			return
		}
		id := fmt.Sprintf("%010d", len(s.links))
		s.links[id] = in.OriginalURL
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		out, _ := json.MarshalIndent(map[string]string{"shortURL": id, "originalURL": in.OriginalURL}, "", "    ")
		w.Write(out)
	case r.Method == "GET" && len(r.URL.Path) == 11:
		to, ok := s.links[r.URL.Path[1:]]
		if !ok {
			http.NotFound(w, r)
			return
		}
		s.gets[r.URL.Path[1:]]++
		http.Redirect(w, r, to, http.StatusFound)
	default:
		s.bad++
		http.NotFound(w, r)
	}
}

func newSeedAPI(t *testing.T) (*seedAPI, string) {
	api := &seedAPI{links: map[string]string{}, gets: map[string]int{}}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return api, srv.URL + "/"
}

func TestBenchEndToEnd(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Test") != "yes" {
			w.WriteHeader(400)
		}
		w.Write([]byte("hello"))
	}))
	defer srv.Close()
	dir := t.TempDir()
	jsonPath, hgrm, html := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.hgrm"), filepath.Join(dir, "r.html")
	out, errOut, code := runCLI(t, nil, "bench", "-t1", "-c2", "-d2s", "-R200", "-L", "-U", "-H", "X-Test: yes",
		srv.URL+"/", "--json", jsonPath, "--hgrm", hgrm, "--html", html, "--progress")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"Running 2s test @ " + srv.URL + "/", "  1 threads and 2 connections", "Thread Stats",
		"Latency Distribution (HdrHistogram - Recorded Latency)", "Uncorrected Latency", "Detailed Percentile spectrum",
		"#[Mean    =", "requests in", "Requests/sec:", "Transfer/sec:", "HTML report: " + html} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Non-2xx") || strings.Contains(out, "\r") || !strings.Contains(errOut, "p99 of the last second") {
		t.Errorf("errors in output or no progress line on stderr: %s / %s", out, errOut)
	}
	var s struct {
		Latency struct{ Count int64 }
		Mode    string
	}
	data, _ := os.ReadFile(jsonPath)
	if err := json.Unmarshal(data, &s); err != nil || s.Latency.Count != 400 || s.Mode != "constant-rate" {
		t.Errorf("json %v %+v; want the 400 requests planned", err, s)
	}
	if h, _ := os.ReadFile(hgrm); !strings.HasPrefix(string(h), "       Value   Percentile") {
		t.Errorf("hgrm %q", h)
	}
	if h, _ := os.ReadFile(html); !strings.Contains(string(h), "<h1>linkgate bench: "+srv.URL+"/</h1>") || strings.Count(string(h), "<svg") != 3 {
		t.Errorf("html report:\n%s", h)
	}
}

func TestBenchHTTPS(t *testing.T) {
	var closes, total atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		total.Add(1)
		if r.Close {
			closes.Add(1)
		}
		w.Write([]byte("hello"))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)
	// httptest's certificate is for example.com and 127.0.0.1.
	out, errOut, code := runCLI(t, nil, "bench", "-t1", "-c2", "-d1s", "-R100", "--ca", ca, "--sni", "example.com", "--no-keepalive", srv.URL+"/")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "ALPN http/1.1:") || !strings.Contains(out, "handshakes (") {
		t.Errorf("no TLS line:\n%s", out)
	}
	if closes.Load() != total.Load() || total.Load() < 10 {
		t.Errorf("%d of %d requests asked to close the connection, want every one with --no-keepalive", closes.Load(), total.Load())
	}
	err := run(context.Background(), []string{"bench", "-t1", "-c1", "-d1s", srv.URL + "/"}, func(string) string { return "" }, strings.NewReader(""), discard{}, discard{})
	if err == nil || !strings.Contains(err.Error(), "certificate") || !strings.Contains(err.Error(), "--insecure") {
		t.Errorf("unverified certificate: %v", err)
	}
	if _, errOut, code = runCLI(t, nil, "bench", "-t1", "-c1", "-d1s", "-k", srv.URL+"/"); code != 0 {
		t.Errorf("--insecure: exit %d: %s", code, errOut)
	}
}

func TestBenchThresholds(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	out, errOut, code := runCLI(t, nil, "bench", "-t1", "-c2", "-d1s", "-R100", "--threshold", "p99<1s", "--threshold", "errors<0.1%",
		"--json", jsonPath, srv.URL+"/")
	if code != 0 || !strings.Contains(out, "Thresholds:\n  p99<1s: ") || !strings.Contains(out, "errors<0.1%: 0% ok") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	var s struct {
		Thresholds []struct {
			Threshold string
			Pass      bool
		}
	}
	data, _ := os.ReadFile(jsonPath)
	if err := json.Unmarshal(data, &s); err != nil || len(s.Thresholds) != 2 || !s.Thresholds[0].Pass {
		t.Errorf("json thresholds %+v (%v)", s.Thresholds, err)
	}
	var stdout strings.Builder
	err := run(context.Background(), []string{"bench", "-t1", "-c2", "-d1s", "-R100", "--threshold", "rps>1M", "--threshold", "p99<1s", srv.URL + "/"},
		func(string) string { return "" }, strings.NewReader(""), &stdout, discard{})
	if cli.ExitCode(err) != 1 || !strings.Contains(err.Error(), "1 of 2 thresholds broken: rps>1M") || !strings.Contains(stdout.String(), "rps>1M: ") {
		t.Errorf("broken threshold: exit %d, %v\n%s", cli.ExitCode(err), err, stdout.String())
	}
}

func TestBenchMerge(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	dir := t.TempDir()
	start := time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, codes[i] = runCLI(t, nil, "bench", "-t1", "-c2", "-d1s", "-R100", "--start-at", start,
				"--json", filepath.Join(dir, fmt.Sprintf("%d.json", i)), srv.URL+"/")
		}()
	}
	wg.Wait()
	if codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("generators exited %v", codes)
	}
	merged, html := filepath.Join(dir, "merged.json"), filepath.Join(dir, "merged.html")
	out, errOut, code := runCLI(t, nil, "bench", "merge", "-L", "--json", merged, "--html", html, "--threshold", "errors<=100%",
		filepath.Join(dir, "0.json"), filepath.Join(dir, "1.json"))
	if code != 0 || !strings.Contains(out, "merged from 2 results") || !strings.Contains(out, "2 threads and 4 connections") ||
		!strings.Contains(out, "Latency Distribution") || !strings.Contains(out, "errors<=100%: ") {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	var s struct {
		Latency       struct{ Count int64 }
		RequestedRate float64 `json:"requested_rate"`
		Series        []struct{ Requests int64 }
	}
	data, _ := os.ReadFile(merged)
	if err := json.Unmarshal(data, &s); err != nil || s.Latency.Count != 200 || s.RequestedRate != 200 || len(s.Series) == 0 {
		t.Errorf("merged json %+v (%v); want the 2 × 100 requests planned", s, err)
	}
	if h, _ := os.ReadFile(html); !strings.Contains(string(h), "linkgate bench merge (2 results)") || strings.Count(string(h), "<svg") != 3 {
		t.Errorf("merged html report:\n%s", h)
	}
}

func TestBenchStages(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	// A jump to 300 req/s held for a second, then down to 100 over the next:
	// 300 + 200 requests planned, request k when the integral reaches k+1
	// (the pacer's tests check when), so the 500th at the very end, out of
	// the window: 499. Counted, not timed: each is recorded once however
	// late the machine ran it.
	out, errOut, code := runCLI(t, nil, "bench", "-t1", "-c16", "--stages", "0s:300,1s:300,1s:100", "--json", jsonPath, srv.URL+"/")
	if code != 0 || !strings.Contains(out, "Running 2s test") {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	var s struct {
		Mode     string
		Requests int64
		Latency  struct{ Count int64 }
		Series   []struct{ Requests int64 }
		Stages   []struct {
			Target float64 `json:"target_rate"`
		}
	}
	data, _ := os.ReadFile(jsonPath)
	if err := json.Unmarshal(data, &s); err != nil || s.Mode != "stages" || len(s.Stages) != 3 || len(s.Series) != 2 {
		t.Fatalf("json %+v (%v)", s, err)
	}
	if s.Latency.Count != 499 || s.Requests > 499 || s.Series[0].Requests+s.Series[1].Requests != s.Requests {
		t.Errorf("%d latencies, %d requests, per second %+v; want the 499 planned", s.Latency.Count, s.Requests, s.Series)
	}
}

func TestBenchHTTP2(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			w.WriteHeader(505)
		}
		w.Write([]byte("ok"))
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	out, errOut, code := runCLI(t, nil, "bench", "--http2", "-c2", "-m4", "-d1s", "-R200", "--json", jsonPath, srv.URL+"/")
	if code != 0 || !strings.Contains(out, "HTTP/2: 2 connections × 4 streams") || strings.Contains(out, "Non-2xx") {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	var s struct {
		Requests int64
		HTTP2    struct {
			Streams int `json:"streams_per_connection"`
		}
	}
	data, _ := os.ReadFile(jsonPath)
	if err := json.Unmarshal(data, &s); err != nil || s.Requests < 150 || s.HTTP2.Streams != 4 {
		t.Errorf("json %+v (%v)", s, err)
	}
}

func TestBenchScenarios(t *testing.T) {
	// mixed:50, not the default 90: the mix is drawn at random and a busy
	// race run sends only ~20 requests in 300 ms, where 90 % redirects gave
	// no create at all one time in twelve (CI, 2026-12-07: 24 requests, all
	// redirects). At 50 % both kinds appear except about once in 10⁶.
	for _, sc := range []string{"shorten", "redirect", "mixed:50"} {
		t.Run(sc, func(t *testing.T) {
			api, u := newSeedAPI(t)
			out, errOut, code := runCLI(t, nil, "bench", "-t1", "-c2", "-d300ms", "-R200", "--scenario", sc, "--preload", "50", u)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if strings.Contains(out, "Non-2xx") || strings.Contains(out, "Socket errors") {
				t.Errorf("errors:\n%s", out)
			}
			api.mu.Lock()
			defer api.mu.Unlock()
			if api.bad != 0 {
				t.Errorf("%d malformed requests reached the target", api.bad)
			}
			created := len(api.links)
			switch sc {
			case "shorten":
				if created < 40 {
					t.Errorf("%d links created", created)
				}
			case "redirect":
				if created != 50 || len(api.gets) == 0 {
					t.Errorf("%d links preloaded, %d redirected", created, len(api.gets))
				}
			default:
				if created <= 50 || len(api.gets) == 0 {
					t.Errorf("mixed: %d links, %d redirected", created, len(api.gets))
				}
			}
		})
	}
}

func TestBenchLuaDoneAndArgs(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	script := filepath.Join(t.TempDir(), "done.lua")
	src := `function init(args) wrk.headers["X-Arg"] = args[1] end
function done(summary, latency, requests) print("done " .. summary.requests .. " " .. tostring(latency:percentile(50) > 0)) end`
	if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, nil, "bench", "-t1", "-c1", "-d200ms", "-s", script, srv.URL, "--", "a1")
	if code != 0 || !strings.Contains(out, "done ") || !strings.Contains(out, " true") {
		t.Errorf("exit %d out %q err %q", code, out, errOut)
	}
}

func TestCapacityEndToEnd(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	u := srv.URL + "/"
	dir := t.TempDir()
	html, js := filepath.Join(dir, "r.html"), filepath.Join(dir, "r.json")
	out, errOut, code := runCLI(t, nil, "bench", "capacity", "--slo", "p99=1s", "--min", "50", "--max", "100",
		"--step-duration", "200ms", "--warmup", "0", "--repeat", "1", "--html", html, "--json", js, "--compare", u, u)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// The verdicts depend on the machine (a loaded one makes the generator
	// late, and says so); the wiring does not.
	for _, want := range []string{"A = " + u, "B = " + u, "| target |", "| A      |        50 |", "| B      |        50 |",
		"\nA: capacity", "\nB: capacity", "B / A capacity ratio: ", "HTML report: " + html} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if b, err := os.ReadFile(html); err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("html %v", err)
	}
	var rep struct{ Targets []struct{ URL string } }
	if b, err := os.ReadFile(js); err != nil || json.Unmarshal(b, &rep) != nil || len(rep.Targets) != 2 || rep.Targets[1].URL != u {
		t.Errorf("json %v %+v", err, rep)
	}
}

func TestExpandShortFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Int("c", 0, "")
	fs.String("s", "", "")
	fs.Bool("L", false, "")
	fs.Bool("U", false, "")
	fs.String("slo", "", "")
	got := strings.Join(expandShortFlags(fs, []string{"-c60", "-LU", "-s", "-odd", "-slo", "p99=1s", "-Lx", "url"}), " ")
	want := "-c 60 -L -U -s -odd -slo p99=1s -Lx url"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// FuzzBenchArgs: no command line makes the parsers panic, and every
// rejection is a usage error (exit status 2).
func FuzzBenchArgs(f *testing.F) {
	for _, s := range []string{
		"-c60 -t30 -d 30m -L -R 600 http://127.0.0.1:1/",
		"-R 0 http://h/",
		"http://h/ -c 1 -t 2",
		"--slo p99.9=70ms --error-budget 0.1% --compare http://a/ http://b/",
		"-H X:1 -- a b",
	} {
		f.Add(s)
	}
	env := cli.Env{Getenv: func(string) string { return "" }, Stdout: discard{}, Stderr: discard{}}
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Fields(s)
		for _, parse := range []func() error{
			func() error { _, err := parseBench(args, env); return err },
			func() error { _, err := parseCapacity(args, env); return err },
		} {
			if err := parse(); err != nil && !errors.Is(err, flag.ErrHelp) && cli.ExitCode(err) != 2 {
				t.Fatalf("%q: %v is not a usage error", s, err)
			}
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
