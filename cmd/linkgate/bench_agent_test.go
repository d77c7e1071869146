//go:build !functiononly

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/linkgate/linkgate/bench"
	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/syncbuf"
	"github.com/linkgate/linkgate/internal/testcert"
	"github.com/linkgate/linkgate/internal/testdep"
)

const agentToken = "distbench-test-token-0123456789"

var agentListenRE = regexp.MustCompile(`msg="linkgate bench agent listening" addr=(\S+)`)

// agentProc is a linkgate bench agent process.
type agentProc struct {
	addr string
	cmd  *exec.Cmd
	logs *syncbuf.Buffer
}

// startAgents starts n linkgate bench agent processes on 127.0.0.1 with
// the token (and extra flags), and waits for each to listen. Each is
// killed, with its process group, when the test ends.
func startAgents(t *testing.T, n int, extra ...string) []*agentProc {
	t.Helper()
	bin, err := buildLinkgate()
	if err != nil {
		t.Fatal(err)
	}
	var out []*agentProc
	for range n {
		cmd := exec.Command(bin, append([]string{"bench", "agent", "--listen", "127.0.0.1:0"}, extra...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LINKGATE_TOKEN=" + agentToken}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		a := &agentProc{cmd: cmd, logs: &syncbuf.Buffer{}}
		found := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				a.logs.Write(append(sc.Bytes(), '\n'))
				if m := agentListenRE.FindStringSubmatch(sc.Text()); m != nil {
					found <- m[1]
				}
			}
		}()
		t.Cleanup(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("agent %s log:\n%s", a.addr, a.logs)
			}
		})
		select {
		case a.addr = <-found:
		case <-time.After(60 * time.Second):
			t.Fatalf("the agent did not listen:\n%s", a.logs)
		}
		out = append(out, a)
	}
	return out
}

func agentList(as []*agentProc) string {
	var s []string
	for _, a := range as {
		s = append(s, a.addr)
	}
	return strings.Join(s, ",")
}

// fixedLatencyTarget answers every request after delay.
func fixedLatencyTarget(t *testing.T, delay time.Duration) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay) // the target's fixed latency
		w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// runCoordinator runs linkgate in-process with env and returns its
// stdout, its exit code and the error it exits with ("" for none).
func runCoordinator(t *testing.T, env map[string]string, args ...string) (stdout string, code int, errText string) {
	t.Helper()
	var out, errOut syncbuf.Buffer
	err := run(context.Background(), args, func(k string) string { return env[k] }, strings.NewReader(""), &out, &errOut)
	if err != nil {
		errText = err.Error()
	}
	return out.String(), cli.ExitCode(err), errText
}

func readSummary(t *testing.T, path string) bench.Summary {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s bench.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBenchAgentUsage(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("abc\n"), 0o600)
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no token", nil, []string{"bench", "agent", "--listen", "127.0.0.1:0"}, "never listens without one"},
		{"short token", map[string]string{"LINKGATE_TOKEN": "abc"}, []string{"bench", "agent"}, "at least 16 bytes"},
		{"short token file", nil, []string{"bench", "agent", "--token-file", short}, "at least 16 bytes"},
		{"ca without cert", map[string]string{"LINKGATE_TOKEN": agentToken}, []string{"bench", "agent", "--ca", short}, "--ca (client certificates) needs --cert"},
		{"agents without token", nil, []string{"bench", "--agents", "127.0.0.1:7070", "http://127.0.0.1:1/"}, "shared token"},
		{"agents bad entry", nil, []string{"bench", "--agents", "nohost", "http://127.0.0.1:1/"}, "HOST:PORT"},
		{"agents bad weight", nil, []string{"bench", "--agents", "a:1=-2", "http://127.0.0.1:1/"}, "positive number"},
		{"agents bad lambda", nil, []string{"bench", "--agents", "lambda:fn", "http://127.0.0.1:1/"}, "lambda:FUNCTION:N"},
		{"agents with a script", map[string]string{"LINKGATE_AGENTS_TOKEN": agentToken},
			[]string{"bench", "--agents", "a:1", "-s", "x.lua", "http://127.0.0.1:1/"}, "Lua script"},
		{"agents with stages", map[string]string{"LINKGATE_AGENTS_TOKEN": agentToken},
			[]string{"bench", "--agents", "a:1", "--stages", "1s:10", "http://127.0.0.1:1/"}, "--stages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, tt.env, tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr %q", code, errOut)
			}
		})
	}
}

// Three agent processes at a third of the rate each, and one plain
// generator at the whole rate, side by side against a target with a fixed
// latency of 10 ms: both record every request planned in the window
// (exactly), and their percentiles agree within the noise of a shared
// machine (both are logged). The merged histogram is the agents' summed
// bucket by bucket (bench/agent's TestCoordinateMergesExactly).
func TestDistributedEqualsSingleGenerator(t *testing.T) {
	const delay = 10 * time.Millisecond
	target := fixedLatencyTarget(t, delay)
	agents := startAgents(t, 3)
	dir := t.TempDir()
	bin, err := buildLinkgate()
	if err != nil {
		t.Fatal(err)
	}
	dist, single := filepath.Join(dir, "dist.json"), filepath.Join(dir, "single.json")
	start := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339Nano)
	common := []string{"bench", "-t1", "-c12", "-R300", "-d3s", "--start-at", start}
	var wg sync.WaitGroup
	var singleOut []byte
	var singleErr error
	wg.Go(func() {
		singleOut, singleErr = exec.Command(bin, append(common, "--json", single, target)...).CombinedOutput()
	})
	out, code, errOut := runCoordinator(t, map[string]string{"LINKGATE_AGENTS_TOKEN": agentToken},
		append(common, "--agents", agentList(agents), "--json", dist, "--html", filepath.Join(dir, "dist.html"), "-L", target)...)
	wg.Wait()
	if singleErr != nil {
		t.Fatalf("the single generator: %v\n%s", singleErr, singleOut)
	}
	d, s := readSummary(t, dist), readSummary(t, single)
	if code != 0 && len(d.Invalid) == 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "Agents:") || len(d.Agents) != 3 {
		t.Errorf("no agent rows:\n%s", out)
	}
	// Every request planned in the 3 s window, once: 3 × 100 and 300.
	if d.Latency.Count != 900 || s.Latency.Count != 900 || d.RequestedRate != 300 || d.Connections != 12 {
		t.Errorf("recorded %d distributed and %d single latencies, want 900 each; rate %v, %d connections",
			d.Latency.Count, s.Latency.Count, d.RequestedRate, d.Connections)
	}
	html, err := os.ReadFile(filepath.Join(dir, "dist.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range d.Agents {
		if a.RequestedRate != 100 || a.Connections != 4 {
			t.Errorf("agent %s: rate %v, %d connections; want 100 and 4", a.Agent, a.RequestedRate, a.Connections)
		}
		if !strings.Contains(string(html), "<tr><th>"+a.Agent+"</th>") {
			t.Errorf("the HTML report has no row for agent %s", a.Agent)
		}
	}
	for _, p := range []string{"50", "90", "99"} {
		t.Logf("p%s: distributed %.3f ms, single %.3f ms", p, d.Latency.Percentiles[p], s.Latency.Percentiles[p])
	}
	dp50, sp50 := d.Latency.Percentiles["50"], s.Latency.Percentiles["50"]
	if dp50 < 10 || sp50 < 10 {
		t.Errorf("p50 %.3f and %.3f ms, below the target's 10 ms", dp50, sp50)
	}
	if math.Abs(dp50-sp50) > 0.2*10 {
		t.Errorf("p50 distributed %.3f ms and single %.3f ms differ by more than 2 ms", dp50, sp50)
	}
	if len(d.Invalid) > 0 {
		t.Logf("the machine made the run invalid (an agent lagged): %q", d.Invalid)
		for _, p := range d.Invalid {
			if !strings.Contains(p, "lagged its schedule") {
				t.Errorf("invalid for another reason than lag: %s", p)
			}
		}
	}
}

// An agent killed during its step invalidates the run: exit 1, the agent
// named as failed, no merged report (remove the check that a failed agent
// leaves the run unmerged and this goes red).
func TestDistributedKilledAgent(t *testing.T) {
	target := fixedLatencyTarget(t, time.Millisecond)
	agents := startAgents(t, 2)
	type result struct {
		out, errOut string
		code        int
	}
	done := make(chan result, 1)
	go func() {
		out, code, errOut := runCoordinator(t, map[string]string{"LINKGATE_AGENTS_TOKEN": agentToken},
			"bench", "-t1", "-c2", "-R100", "-d60s", "--agents", agentList(agents), target)
		done <- result{out, errOut, code}
	}()
	victim := agents[1]
	eventually.True(t, 60*time.Second, "the agent to start its step", func() bool {
		return strings.Contains(victim.logs.String(), `msg="step started"`)
	})
	_ = syscall.Kill(-victim.cmd.Process.Pid, syscall.SIGKILL)
	var r result
	select {
	case r = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the coordinator did not end after an agent was killed")
	}
	if r.code != 1 || !strings.Contains(r.errOut, "agent "+victim.addr+" failed") || !strings.Contains(r.out, "FAILED") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.errOut)
	}
	if strings.Contains(r.out, "Latency Distribution") || strings.Contains(r.out, "Requests/sec") {
		t.Errorf("a report was merged without the killed agent:\n%s", r.out)
	}
}

// A coordinator with the wrong token is refused by the agent (401), before
// any load, and exits 1 naming it.
func TestDistributedWrongToken(t *testing.T) {
	agents := startAgents(t, 1)
	_, code, errOut := runCoordinator(t, map[string]string{"LINKGATE_AGENTS_TOKEN": agentToken + "-wrong"},
		"bench", "-t1", "-c1", "-R10", "-d1s", "--agents", agents[0].addr, "http://127.0.0.1:1/")
	if code != 1 || !strings.Contains(errOut, "agent "+agents[0].addr+": clock: 401 Unauthorized") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// Mutual TLS: an agent with --ca/--cert/--key serves a coordinator whose
// client certificate the CA signed, and refuses one without.
func TestDistributedMutualTLS(t *testing.T) {
	ca := testcert.NewCA(t, "distbench CA")
	dir := t.TempDir()
	srvDir, cliDir := filepath.Join(dir, "agent"), filepath.Join(dir, "coordinator")
	os.Mkdir(srvDir, 0o700)
	os.Mkdir(cliDir, 0o700)
	caFile, cert, key := testcert.WriteFiles(t, srvDir, ca, ca.Issue(t, testcert.Options{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}))
	_, ccert, ckey := testcert.WriteFiles(t, cliDir, ca, ca.Issue(t, testcert.Options{Client: true}))
	agents := startAgents(t, 1, "--ca", caFile, "--cert", cert, "--key", key)
	target := fixedLatencyTarget(t, 0)
	env := map[string]string{"LINKGATE_AGENTS_TOKEN": agentToken}
	args := []string{"bench", "-t1", "-c1", "-R20", "-d1s", "--agents", agents[0].addr, "--agents-ca", caFile}
	out, code, errOut := runCoordinator(t, env, append(args, "--agents-cert", ccert, "--agents-key", ckey, target)...)
	if !strings.Contains(out, "20 requests in") || (code != 0 && !strings.Contains(errOut, "lagged")) {
		t.Errorf("with a client certificate: exit %d\n%s%s", code, out, errOut)
	}
	_, code, errOut = runCoordinator(t, env, append(args, target)...)
	if code != 1 || !strings.Contains(errOut, fmt.Sprintf("agent %s: clock:", agents[0].addr)) {
		t.Errorf("without a client certificate: exit %d, stderr %q", code, errOut)
	}
}

// buildBenchAgentFunction builds the agent function's bootstrap
// (cmd/linkgate-bench-agent), once per test run.
var buildBenchAgentFunction = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "linkgate-bench-agent-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "bootstrap")
	if out, err := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bin, "../linkgate-bench-agent").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// startEmulators starts n runtime interface emulators, each running the
// agent function, and returns their invocation URLs.
func startEmulators(t *testing.T, n int) []string {
	t.Helper()
	rie := testdep.Binary(t, testdep.LambdaRIE, "aws-lambda-rie")
	bootstrap, err := buildBenchAgentFunction()
	if err != nil {
		t.Fatal(err)
	}
	freeAddr := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	var urls []string
	for range n {
		// Each its own Runtime API address: the default, 127.0.0.1:9001,
		// is one per machine.
		addr := freeAddr()
		cmd := exec.Command(rie, "--runtime-interface-emulator-address", addr, "--runtime-api-address", freeAddr(), bootstrap)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "AWS_LAMBDA_FUNCTION_NAME=linkgate-bench-agent", "AWS_LAMBDA_FUNCTION_TIMEOUT=120"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		logs := &syncbuf.Buffer{}
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			werr := cmd.Wait()
			if t.Failed() {
				t.Logf("emulator %s (%v) log:\n%s", addr, werr, logs)
			}
		})
		eventually.True(t, 30*time.Second, "the emulator to listen", func() bool {
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
		urls = append(urls, "http://"+addr+"/2015-03-31/functions/function/invocations")
	}
	return urls
}

// lambdaFrontEnd stands for the Lambda service in front of the
// emulators: it takes the Invoke API's requests for function (POST
// /2015-03-31/functions/FUNCTION/invocations, synchronous) and hands each
// to an emulator that is not busy, as Lambda hands concurrent invocations
// to separate execution environments.
func lambdaFrontEnd(t *testing.T, function string, emulators []string) string {
	t.Helper()
	free := make(chan string, len(emulators))
	for _, e := range emulators {
		free <- e
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/2015-03-31/functions/"+function+"/invocations" ||
			r.Header.Get("X-Amz-Invocation-Type") != "RequestResponse" || !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
			t.Errorf("not a signed synchronous Invoke of %s: %s %s %v", function, r.Method, r.URL, r.Header)
			http.Error(w, "bad invoke", http.StatusBadRequest)
			return
		}
		e := <-free
		defer func() { free <- e }()
		resp, err := http.Post(e, "application/json", r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// The Lambda path: the coordinator invokes three instances of the agent
// function under the runtime interface emulator through the Invoke API
// (signed, synchronous; the endpoint overridden), the run cut into two
// steps of 2 s; side by side with one plain generator at the whole rate
// against a target with a fixed 10 ms latency. Both record every request
// planned in their 4 s (exactly), and their p50s agree within 2 ms.
func TestDistributedLambdaUnderEmulator(t *testing.T) {
	const function = "linkgate-bench-agent"
	front := lambdaFrontEnd(t, function, startEmulators(t, 3))
	for k, v := range map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"} {
		t.Setenv(k, v)
	}
	target := fixedLatencyTarget(t, 10*time.Millisecond)
	bin, err := buildLinkgate()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dist, single := filepath.Join(dir, "dist.json"), filepath.Join(dir, "single.json")
	start := time.Now().Add(6 * time.Second).UTC().Format(time.RFC3339Nano)
	common := []string{"bench", "-t1", "-c6", "-R150", "-d4s", "--start-at", start}
	var wg sync.WaitGroup
	var singleOut []byte
	var singleErr error
	wg.Go(func() {
		singleOut, singleErr = exec.Command(bin, append(common, "--json", single, target)...).CombinedOutput()
	})
	out, code, errOut := runCoordinator(t, nil, append(common, "--agents", "lambda:"+function+":3", "--lambda-endpoint", front,
		"--agents-step", "2s", "--json", dist, target)...)
	wg.Wait()
	if singleErr != nil {
		t.Fatalf("the single generator: %v\n%s", singleErr, singleOut)
	}
	if _, err := os.Stat(dist); err != nil {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	d, s := readSummary(t, dist), readSummary(t, single)
	if code != 0 && len(d.Invalid) == 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	if !strings.Contains(out, "in 2 consecutive steps") || len(d.Agents) != 6 || d.Agents[0].Agent != function+"#1 (step 1)" {
		t.Errorf("want 3 invocations in each of 2 steps:\n%s", out)
	}
	if d.Latency.Count != 600 || s.Latency.Count != 600 || d.RequestedRate != 150 || d.DurationSeconds != 4 {
		t.Errorf("recorded %d distributed and %d single latencies, want 600 each; rate %v over %v s",
			d.Latency.Count, s.Latency.Count, d.RequestedRate, d.DurationSeconds)
	}
	for _, p := range []string{"50", "90", "99"} {
		t.Logf("p%s: Lambda agents %.3f ms, single %.3f ms", p, d.Latency.Percentiles[p], s.Latency.Percentiles[p])
	}
	dp50, sp50 := d.Latency.Percentiles["50"], s.Latency.Percentiles["50"]
	if dp50 < 10 || sp50 < 10 || math.Abs(dp50-sp50) > 2 {
		t.Errorf("p50 Lambda agents %.3f ms, single %.3f ms: want both at least 10 ms, within 2 ms", dp50, sp50)
	}
	for _, p := range d.Invalid {
		t.Logf("invalid: %s", p)
		if !strings.Contains(p, "lagged its schedule") {
			t.Errorf("invalid for another reason than lag: %s", p)
		}
	}
}
