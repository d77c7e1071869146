package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// invoke is one invocation as the dashboard sees it.
type invoke struct {
	Round         int     `json:"round"`
	Cold          bool    `json:"cold"`
	Status        int     `json:"status"`          // the function's HTTP status
	ClientMs      float64 `json:"client_ms"`       // request to the emulator until its answer
	DurationMs    float64 `json:"duration_ms"`     // REPORT Duration: runtime plus extensions after it
	RuntimeMs     float64 `json:"runtime_ms"`      // INVOKE RTDONE duration: the function alone
	PostRuntimeMs float64 `json:"post_runtime_ms"` // Duration − runtime: the emulated PostRuntimeExtensionsDuration
}

// result is one variant's measurements.
type result struct {
	Variant        string    `json:"variant"`
	Invokes        []invoke  `json:"invokes"`
	InitsMs        []float64 `json:"inits_ms"`         // INIT REPORT durationMs, one per cold start
	FunctionHWMKB  int64     `json:"function_hwm_kb"`  // largest VmHWM of the function process
	ExtensionHWMKB int64     `json:"extension_hwm_kb"` // largest VmHWM of the extension process
	ExtensionCPUMs float64   `json:"extension_cpu_ms"` // extension CPU during the warm invokes, summed over restarts
	TurnaroundUs   []float64 `json:"turnaround_us"`    // linkgate-extension's own ExtensionProcessingTime (its EMF lines)
	WarmInvokes    int       `json:"warm_invokes"`
	FunctionBytes  int64     `json:"function_bytes"`
	ExtensionBytes int64     `json:"extension_bytes"`
	Baseline       bool      `json:"baseline,omitempty"` // the function of another build (-baseline), no extension
}

// measure runs one emulator for variant v: one cold invoke, then warm
// ones, adding to r.
func measure(ctx context.Context, c config, v variant, round, warm int, r *result) error {
	if v.function != "" {
		c.function = v.function
	}
	fi, err := os.Stat(c.function)
	if err != nil {
		return err
	}
	r.FunctionBytes = fi.Size()
	opt, err := os.MkdirTemp("", "lambdabench-opt-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(opt)
	if v.extension != "" {
		if err := os.MkdirAll(filepath.Join(opt, "extensions"), 0o755); err != nil {
			return err
		}
		b, err := os.ReadFile(v.extension)
		if err != nil {
			return err
		}
		r.ExtensionBytes = int64(len(b))
		if err := os.WriteFile(filepath.Join(opt, "extensions", v.file), b, 0o755); err != nil {
			return err
		}
	}
	logf, err := os.Create(filepath.Join(c.out, fmt.Sprintf("emulator-%s-%02d.log", strings.Fields(v.name)[0], round)))
	if err != nil {
		return err
	}
	defer logf.Close()
	e, err := startEmulator(ctx, c, opt, append(c.env[:len(c.env):len(c.env)], v.env...), logf)
	if err != nil {
		return err
	}
	defer func() {
		e.stop() // the extension writes its EMF line at SHUTDOWN
		e.mu.Lock()
		r.TurnaroundUs = append(r.TurnaroundUs, e.turnaround...)
		e.mu.Unlock()
	}()
	var lastID string
	var cpuAfterCold float64
	for i := 0; i <= warm; i++ {
		if i == 1 {
			cpuAfterCold = extensionCPU(e.children())
		}
		inv, id, initMs, err := e.invoke(i, lastID)
		if err != nil {
			return fmt.Errorf("round %d, invoke %d: %w", round, i, err)
		}
		if id != "" {
			lastID = id
		}
		inv.Cold, inv.Round = i == 0, round
		if inv.Cold {
			if initMs < 0 {
				return fmt.Errorf("round %d: no INIT REPORT before the first REPORT", round)
			}
			r.InitsMs = append(r.InitsMs, initMs)
		}
		r.Invokes = append(r.Invokes, inv)
	}
	children := e.children()
	for _, p := range children {
		if p.comm == "bootstrap" {
			r.FunctionHWMKB = max(r.FunctionHWMKB, p.hwmKB)
		} else {
			r.ExtensionHWMKB = max(r.ExtensionHWMKB, p.hwmKB)
		}
	}
	r.ExtensionCPUMs += extensionCPU(children) - cpuAfterCold
	r.WarmInvokes += warm
	return nil
}

// extensionCPU sums the CPU time of the extension processes.
func extensionCPU(children []proc) float64 {
	var ms float64
	for _, p := range children {
		if p.comm != "bootstrap" {
			ms += p.cpuMs
		}
	}
	return ms
}

// warmUp runs invokes that are not recorded, so DynamoDB Local's JVM is
// warm before the first measured variant.
func warmUp(ctx context.Context, c config, v variant) error {
	var discard result
	saved := c.out
	c.out = filepath.Join(saved, "warm-up")
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	return measure(ctx, c, v, 0, 100, &discard)
}

// emulator is one running aws-lambda-rie with its function.
type emulator struct {
	cmd        *exec.Cmd
	url        string
	events     chan logEvent
	client     *http.Client
	mu         sync.Mutex
	turnaround []float64
	cgroup     string
	exited     chan struct{}
}

// logEvent is a line of the emulator's log that the dashboard needs.
type logEvent struct {
	kind string // init, rtdone, report
	ms   float64
}

// emfTurnaround returns the ExtensionProcessingTime values of an EMF line
// linkgate-extension wrote, if line is one.
func emfTurnaround(line string) []float64 {
	if !strings.HasPrefix(line, `{"_aws":`) {
		return nil
	}
	var doc struct {
		ExtensionProcessingTime []float64
	}
	json.Unmarshal([]byte(line), &doc)
	return doc.ExtensionProcessingTime
}

var (
	reInit   = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)
	reRTDone = regexp.MustCompile(`INVOKE RTDONE\(status: \w+, produced bytes: \d+, duration: ([0-9.]+)ms\)`)
	reReport = regexp.MustCompile(`^REPORT RequestId: \S+\t(?:Init Duration: [0-9.]+ ms\t)?Duration: ([0-9.]+) ms`)
)

func startEmulator(ctx context.Context, c config, opt string, env []string, logf io.Writer) (*emulator, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	// A private mount namespace with the variant's folder over /opt.
	script := `mount --bind "$1" /opt && exec "$2" --runtime-interface-emulator-address "127.0.0.1:$3" "$4"`
	args := []string{"unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", opt, c.rie, strconv.Itoa(port), c.function}
	if c.cpus != "" {
		args = append([]string{"taskset", "-c", c.cpus}, args...)
	}
	e := &emulator{url: fmt.Sprintf("http://127.0.0.1:%d/2015-03-31/functions/function/invocations", port),
		events: make(chan logEvent, 64), client: &http.Client{Timeout: 30 * time.Second}, exited: make(chan struct{})}
	if c.cpuQuota > 0 {
		if e.cgroup, err = cpuCgroup(c.cpuQuota); err != nil {
			return nil, err
		}
		// Join the cgroup first, so the emulator and all it starts are in it.
		args = append([]string{"sh", "-c", `echo $$ > "$0" && exec "$@"`, filepath.Join(e.cgroup, "cgroup.procs")}, args...)
	}
	e.cmd = exec.CommandContext(ctx, args[0], args[1:]...)
	e.cmd.Env = env
	pr, pw := io.Pipe()
	e.cmd.Stdout, e.cmd.Stderr = pw, pw
	if err := e.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if v := emfTurnaround(line); v != nil {
				e.mu.Lock()
				e.turnaround = append(e.turnaround, v...)
				e.mu.Unlock()
			}
			for _, m := range []struct {
				re   *regexp.Regexp
				kind string
			}{{reInit, "init"}, {reRTDone, "rtdone"}, {reReport, "report"}} {
				if s := m.re.FindStringSubmatch(line); s != nil {
					ms, _ := strconv.ParseFloat(s[1], 64)
					e.events <- logEvent{m.kind, ms}
				}
			}
		}
	}()
	go func() { e.cmd.Wait(); pw.Close(); close(e.exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return e, nil
		}
		if time.Now().After(deadline) {
			e.stop()
			return nil, fmt.Errorf("emulator did not listen on %d", port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// invoke sends request i: even ones create a link (POST /shortenURL, a
// DynamoDB PutItem), odd ones follow the last link created (GET /{id}, a
// GetItem). It returns the id created, if any, and the init duration that
// preceded it (-1 if none).
func (e *emulator) invoke(i int, lastID string) (invoke, string, float64, error) {
	var payload string
	if i%2 == 0 || lastID == "" {
		payload = fmt.Sprintf(`{"version":"2.0","rawPath":"/shortenURL","headers":{"host":"sho.rt","x-forwarded-proto":"https","content-type":"application/json"},`+
			`"requestContext":{"http":{"method":"POST","sourceIp":"192.0.2.1"}},"body":"{\"originalURL\":\"https://example.com/bench/%d\"}"}`, i)
	} else {
		payload = fmt.Sprintf(`{"version":"2.0","rawPath":"/%s","headers":{"host":"sho.rt","x-forwarded-proto":"https"},`+
			`"requestContext":{"http":{"method":"GET","sourceIp":"192.0.2.1"}}}`, lastID)
	}
	start := time.Now()
	resp, err := e.client.Post(e.url, "application/json", strings.NewReader(payload))
	if err != nil {
		return invoke{}, "", -1, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	inv := invoke{ClientMs: float64(time.Since(start)) / float64(time.Millisecond)}
	if err != nil {
		return inv, "", -1, err
	}
	var proxy struct {
		StatusCode int    `json:"statusCode"`
		Body       string `json:"body"`
	}
	if err := json.Unmarshal(body, &proxy); err != nil || resp.StatusCode != 200 {
		return inv, "", -1, fmt.Errorf("emulator answered %d %q", resp.StatusCode, body)
	}
	inv.Status = proxy.StatusCode
	var id string
	switch proxy.StatusCode {
	case 201:
		var created struct{ ShortURL string }
		if err := json.Unmarshal([]byte(proxy.Body), &created); err != nil || created.ShortURL == "" {
			return inv, "", -1, fmt.Errorf("create answered %q", proxy.Body)
		}
		id = created.ShortURL
	case 302:
	default:
		return inv, "", -1, fmt.Errorf("function answered %d %q", proxy.StatusCode, proxy.Body)
	}
	initMs := -1.0
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-e.events:
			switch ev.kind {
			case "init":
				initMs = ev.ms
			case "rtdone":
				inv.RuntimeMs = ev.ms
			case "report":
				inv.DurationMs = ev.ms
				inv.PostRuntimeMs = max(0, inv.DurationMs-inv.RuntimeMs)
				return inv, id, initMs, nil
			}
		case <-timeout:
			return inv, id, initMs, fmt.Errorf("no REPORT line for the invoke")
		}
	}
}

// proc is a process the emulator started.
type proc struct {
	comm  string
	hwmKB int64   // VmHWM: peak resident set
	cpuMs float64 // user + system
}

// children reads /proc for the emulator's child processes: the function
// and its extensions.
func (e *emulator) children() []proc {
	var out []proc
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid … utime stime: fields after the last ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 13 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid != e.cmd.Process.Pid {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join(d, "comm"))
		p := proc{comm: strings.TrimSpace(string(comm))}
		// The threads' schedstat have the CPU time in ns; stat only in
		// 10 ms ticks.
		if ns, ok := threadsCPU(d); ok {
			p.cpuMs = ns / 1e6
		} else {
			utime, _ := strconv.ParseFloat(f[11], 64)
			stime, _ := strconv.ParseFloat(f[12], 64)
			p.cpuMs = (utime + stime) * 1000 / clockTicks
		}
		status, _ := os.ReadFile(filepath.Join(d, "status"))
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				p.hwmKB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			}
		}
		out = append(out, p)
	}
	return out
}

// threadsCPU sums the CPU time of every thread of the process at /proc
// folder d, in ns, from their schedstat.
func threadsCPU(d string) (float64, bool) {
	stats, _ := filepath.Glob(filepath.Join(d, "task", "*", "schedstat"))
	var ns float64
	for _, f := range stats {
		b, err := os.ReadFile(f)
		fields := strings.Fields(string(b))
		if err != nil || len(fields) == 0 {
			return 0, false
		}
		v, _ := strconv.ParseFloat(fields[0], 64)
		ns += v
	}
	return ns, len(stats) > 0
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat times (100 on Linux).
const clockTicks = 100

// stop shuts the emulator down as Lambda would (SHUTDOWN to extensions).
func (e *emulator) stop() {
	e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.exited:
	case <-time.After(5 * time.Second):
		e.cmd.Process.Kill()
		<-e.exited
	}
	if e.cgroup != "" {
		for i := 0; i < 50 && os.Remove(e.cgroup) != nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// cpuCgroup makes a cgroup limited to cpus CPUs (cgroup v2 cpu.max, or v1
// cpu.cfs_quota_us) and returns its folder.
func cpuCgroup(cpus float64) (string, error) {
	const period = 100000
	quota := strconv.Itoa(int(cpus * period))
	name := fmt.Sprintf("linkgate-lambdabench-%d-%d", os.Getpid(), time.Now().UnixNano())
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		dir := filepath.Join("/sys/fs/cgroup", name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return "", err
		}
		return dir, os.WriteFile(filepath.Join(dir, "cpu.max"), []byte(quota+" "+strconv.Itoa(period)), 0o644)
	}
	dir := filepath.Join("/sys/fs/cgroup/cpu", name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("no cgroup v2 and no v1 cpu controller: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cpu.cfs_period_us"), []byte(strconv.Itoa(period)), 0o644); err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "cpu.cfs_quota_us"), []byte(quota), 0o644)
}
