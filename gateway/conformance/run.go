package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// AdminKey is the admin key the harness starts gateways with.
const AdminKey = "edd1c9f034335f136f87ad84b625c8f1"

// Env is what a run needs from the machine.
type Env struct {
	Binary   string    // the linkgate binary
	Upstream *Upstream // the test upstream
	Redis    string    // "127.0.0.1:PORT" of a redis-server, or ""
	TempDir  string    // where gateways keep their stores
	// Etcd is the store of files with store: etcd, used by one file at a
	// time under the /apisix prefix.
	Etcd Etcd
}

// Etcd is what the harness needs of an etcd server.
type Etcd interface {
	Endpoint() string
	// Reset deletes everything under /apisix; Put and Delete write there.
	Reset() error
	Put(key, value string) error
	Delete(key string) error
	Lock()
	Unlock()
}

// Result is the outcome of one case.
type Result struct {
	Name    string
	Skipped string // the reason, when not run
	Differs string // the documented difference, when expected to fail
	Gap     string // the known gap, when expected to fail
	Err     error  // nil: passed
}

// Passed reports whether the case ran and matched.
func (r Result) Passed() bool { return r.Skipped == "" && r.Err == nil }

// gatewayProc is one running `linkgate gateway`.
type gatewayProc struct {
	cmd                        *exec.Cmd
	stderr                     *lockedBuffer
	addr, prom, control, admin string
	stream                     string // the first plain --listen-stream listener, or ""
	args                       []string
	done                       chan error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var listeningRE = regexp.MustCompile(`msg="gateway listening" addr=(\S+) prometheus=(\S+) control=(\S+) tls=\S* admin=(\S+)(?: stream=(\S*))?`)

// startGateway runs the binary as a user would, on random loopback ports.
func startGateway(env Env, store string, args []string) (*gatewayProc, error) {
	all := []string{"gateway", "--listen", "127.0.0.1:0", "--prometheus-listen", "127.0.0.1:0",
		"--control-listen", "127.0.0.1:0", "--admin-key", AdminKey, "--config-store", store,
		"--log-level", "info", "--listen-tls", "127.0.0.1:0"}
	if slices.Contains(args, "v3") {
		all = append(all, "--admin-listen", "127.0.0.1:0") // 3.x's own admin port, on a free one
	}
	all = append(all, args...)
	cmd := exec.Command(env.Binary, all...)
	g := &gatewayProc{cmd: cmd, stderr: &lockedBuffer{}, args: args, done: make(chan error, 1)}
	cmd.Stderr = g.stderr
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { g.done <- cmd.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if m := listeningRE.FindStringSubmatch(g.stderr.String()); m != nil {
			g.addr, g.prom, g.control, g.admin = m[1], m[2], m[3], m[4]
			g.stream = firstStreamAddr(m[5])
			return g, nil
		}
		select {
		case err := <-g.done:
			return nil, fmt.Errorf("gateway exited: %v\n%s", err, g.stderr)
		case <-time.After(5 * time.Millisecond):
		}
	}
	g.stop()
	return nil, fmt.Errorf("gateway did not start in 15s:\n%s", g.stderr)
}

func (g *gatewayProc) stop() {
	_ = g.cmd.Process.Signal(os.Interrupt)
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
	}
}

// RunFile runs the cases of f in order against one gateway with a fresh
// store, restarting it (same store) where a case asks for other flags.
func RunFile(env Env, f *File) []Result {
	results := make([]Result, 0, len(f.Cases))
	var g *gatewayProc
	defer func() {
		if g != nil {
			g.stop()
		}
	}()
	dir, err := os.MkdirTemp(env.TempDir, "gw")
	if err != nil {
		return []Result{{Name: f.Source, Err: err}}
	}
	store := "bolt:" + filepath.Join(dir, "gateway.db")
	if f.Store == "file" { // APISIX's standalone mode: an empty configuration file
		path := filepath.Join(dir, "apisix.yaml")
		if err := os.WriteFile(path, []byte("#END\n"), 0o644); err != nil {
			return []Result{{Name: f.Source, Err: err}}
		}
		store = "file:" + path
	}
	if f.Store == "etcd" {
		if env.Etcd == nil {
			return []Result{{Name: f.Source, Err: errors.New("store: etcd, but no etcd server")}}
		}
		env.Etcd.Lock()
		defer env.Etcd.Unlock()
		if err := env.Etcd.Reset(); err != nil {
			return []Result{{Name: f.Source, Err: err}}
		}
		store = "etcd://" + env.Etcd.Endpoint() + "?prefix=/apisix"
	}
	if len(f.PortServers) > 0 {
		addrs, stop, err := env.Upstream.StartPortServers(f.PortServers)
		if err != nil {
			return []Result{{Name: f.Source, Err: err}}
		}
		defer stop()
		env.Upstream = &Upstream{Addrs: addrs}
	}
	if env.Redis != "" {
		_ = redisDo(env.Redis, []string{"FLUSHALL"})
	}
	if hasStreamSteps(f) {
		addrs, stop, err := startStreamUpstream(env.Upstream.Addrs)
		if err != nil {
			return []Result{{Name: f.Source, Err: err}}
		}
		defer stop()
		env.Upstream = &Upstream{Addrs: addrs, Addr6: env.Upstream.Addr6}
	}
	for _, c := range f.Cases {
		r := Result{Name: f.CaseName(c), Differs: c.Differs, Gap: c.Gap}
		switch {
		case f.Skip != "":
			r.Skipped = f.Skip
		case c.Skip != "":
			r.Skipped = c.Skip
		}
		if r.Skipped != "" {
			results = append(results, r)
			continue
		}
		args := slices.Concat(f.Args, c.Args)
		if g == nil || !slices.Equal(g.args, args) || c.Restart {
			if g != nil {
				g.stop()
			}
			if g, err = startGateway(env, store, args); err != nil {
				r.Err = err
				results = append(results, r)
				continue
			}
		}
		if len(c.Steps) == 0 {
			r.Err = fmt.Errorf("draft without steps: %s", c.Review)
			results = append(results, r)
			continue
		}
		if f.FlushRedis != nil && env.Redis != "" {
			if r.Err = flushRedis(env.Redis, f.FlushRedis.Password); r.Err != nil {
				results = append(results, r)
				continue
			}
		}
		r.Err = runCase(env, g, c)
		if r.Err != nil && !strings.Contains(r.Err.Error(), "connection refused") {
			select {
			case err := <-g.done:
				r.Err = fmt.Errorf("%w; gateway exited: %v\n%s", r.Err, err, g.stderr)
				g.done <- err
			default:
			}
		}
		results = append(results, r)
	}
	return results
}

func runCase(env Env, g *gatewayProc, c Case) error {
	m := newMapper(env, g)
	vars := map[string]string{}
	var steps []Step
	for _, s := range c.Steps {
		if len(s.Range) != 2 {
			steps = append(steps, s)
			continue
		}
		for i := s.Range[0]; i <= s.Range[1]; i++ {
			one := s
			one.Range = nil
			steps = append(steps, expandStep(one, map[string]string{"i": strconv.Itoa(i)}))
		}
	}
	for i, s := range steps {
		s = expandStep(s, vars)
		if s.Sleep > 0 {
			time.Sleep(time.Duration(s.Sleep * float64(time.Second)))
			continue
		}
		if op := s.Etcd; op != nil {
			var err error
			if op.Delete != "" {
				err = env.Etcd.Delete(op.Delete)
			} else {
				err = env.Etcd.Put(op.Put, m.body(op.Value))
			}
			if err != nil {
				return fmt.Errorf("step %d: etcd: %w", i+1, err)
			}
			continue
		}
		if s.Redis != nil {
			if env.Redis == "" {
				return fmt.Errorf("step %d: a redis step in a file without redis", i+1)
			}
			if err := redisDo(env.Redis, s.Redis...); err != nil {
				return fmt.Errorf("step %d: %w", i+1, err)
			}
			continue
		}
		if s.Stream != nil {
			if err := streamStep(g, s); err != nil {
				return fmt.Errorf("step %d (stream %q): %w", i+1, *s.Stream, err)
			}
			continue
		}
		method, target, _ := strings.Cut(s.Req, " ")
		if !strings.HasPrefix(target, "/apisix/admin") {
			if err := waitSync(g); err != nil {
				return fmt.Errorf("step %d: %w", i+1, err)
			}
		}
		if s.Count > 0 {
			if err := countBodies(g, m, method, target, s); err != nil {
				return fmt.Errorf("step %d (%s %s): %w", i+1, method, target, err)
			}
			continue
		}
		if len(s.Bodies) > 0 {
			if err := sendBodies(g, m, method, target, s); err != nil {
				return fmt.Errorf("step %d (%s %s) ×%d: %w", i+1, method, target, len(s.Bodies), err)
			}
			continue
		}
		if s.Concurrent > 0 {
			if err := sendConcurrent(g, m, method, target, s); err != nil {
				return fmt.Errorf("step %d (%s %s) ×%d at once: %w", i+1, method, target, s.Concurrent, err)
			}
			continue
		}
		for n := range max(s.Repeat, 1) {
			resp, err := send(g, m, method, target, s)
			var ne net.Error
			switch {
			case s.Want.NoAnswer && err == nil:
				err = fmt.Errorf("answered %d within the client's %gs timeout, want no answer", resp.Status, s.Timeout)
			case s.Want.NoAnswer && errors.As(err, &ne) && ne.Timeout():
				continue
			case err == nil:
				err = s.Want.check(resp)
			}
			if err == nil {
				for name, spec := range s.Capture {
					if vars[name], err = capture(resp, spec); err != nil {
						break
					}
				}
			}
			if err != nil {
				if s.Repeat > 1 {
					return fmt.Errorf("step %d (%s %s), request %d of %d: %w", i+1, method, target, n+1, s.Repeat, err)
				}
				return fmt.Errorf("step %d (%s %s): %w", i+1, method, target, err)
			}
		}
	}
	return nil
}

// sendBodies sends the request len(s.Bodies) times and compares the bodies.
func sendBodies(g *gatewayProc, m *mapper, method, target string, s Step) error {
	var got []string
	for range s.Bodies {
		resp, err := send(g, m, method, target, s)
		if err != nil {
			return err
		}
		if err := s.Want.check(resp); err != nil {
			return err
		}
		got = append(got, strings.TrimSpace(string(resp.Body)))
	}
	want := slices.Clone(s.Bodies)
	if s.Sorted {
		slices.Sort(got)
		slices.Sort(want)
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("bodies %q, want %q", got, want)
	}
	return nil
}

// sendConcurrent sends s.Concurrent copies of the request at once and
// compares their statuses, sorted, with s.Statuses sorted.
func sendConcurrent(g *gatewayProc, m *mapper, method, target string, s Step) error {
	got := make([]int, s.Concurrent)
	values := make([]string, s.Concurrent)
	errs := make([]error, s.Concurrent)
	var wg sync.WaitGroup
	for i := range s.Concurrent {
		wg.Go(func() {
			resp, err := send(g, m, method, target, s)
			if err != nil {
				errs[i] = err
				return
			}
			got[i] = resp.Status
			if s.Unique != "" {
				if v := resp.Headers[canonical(s.Unique)]; len(v) > 0 {
					values[i] = v[0]
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if s.Unique != "" {
		seen := map[string]bool{}
		for _, v := range values {
			if v == "" || seen[v] {
				return fmt.Errorf("%s %q missing or repeated among %d answers", s.Unique, v, s.Concurrent)
			}
			seen[v] = true
		}
	}
	want := slices.Clone(s.Statuses)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("statuses %v, want %v", got, want)
	}
	return nil
}

var (
	varRE    = regexp.MustCompile(`\$\{(\w+)\}`)
	repeatRE = regexp.MustCompile(`\$\{repeat:(.):(\d+)\}`)
)

// expandStep replaces ${name} with captured values in what a step sends.
func expandStep(s Step, vars map[string]string) Step {
	if s.Body != nil && strings.Contains(*s.Body, "${repeat:") {
		b := repeatRE.ReplaceAllStringFunc(*s.Body, func(m string) string {
			sm := repeatRE.FindStringSubmatch(m)
			n, _ := strconv.Atoi(sm[2])
			return strings.Repeat(sm[1], n)
		})
		s.Body = &b
	}
	if len(vars) == 0 {
		return s
	}
	expand := func(v string) string {
		return varRE.ReplaceAllStringFunc(v, func(m string) string {
			if x, ok := vars[m[2:len(m)-1]]; ok {
				return x
			}
			return m
		})
	}
	s.Req = expand(s.Req)
	if s.Body != nil {
		b := expand(*s.Body)
		s.Body = &b
	}
	if j, ok := s.Want.JSON.(string); ok {
		s.Want.JSON = expand(j)
	}
	if j, ok := s.Want.JSONEq.(string); ok {
		s.Want.JSONEq = expand(j)
	}
	if len(s.Want.NE) > 0 {
		ne := make(map[string]string, len(s.Want.NE))
		for k, v := range s.Want.NE {
			ne[k] = expand(v)
		}
		s.Want.NE = ne
	}
	if s.Want.Body != nil {
		b := expand(*s.Want.Body)
		s.Want.Body = &b
	}
	if len(s.Headers) > 0 {
		h := make(map[string]string, len(s.Headers))
		for k, v := range s.Headers {
			h[k] = expand(v)
		}
		s.Headers = h
	}
	return s
}

// countBodies sends the request s.Count times; every answer must match
// want (but its counts), and the bodies must come as want.counts says.
func countBodies(g *gatewayProc, m *mapper, method, target string, s Step) error {
	bodies, statuses := map[string]int{}, map[string]int{}
	w := s.Want
	w.Counts, w.StatusCounts, w.Spread = nil, nil, nil
	for n := 1; n <= s.Count; n++ {
		one := expandStep(s, map[string]string{"n": strconv.Itoa(n)})
		resp, err := send(g, m, method, expandStep(Step{Req: target}, map[string]string{"n": strconv.Itoa(n)}).Req, one)
		if err == nil {
			err = w.check(resp)
		}
		if err != nil {
			return err
		}
		bodies[string(resp.Body)]++
		statuses[strconv.Itoa(resp.Status)]++
	}
	if s.Want.Counts != nil && fmt.Sprint(bodies) != fmt.Sprint(s.Want.Counts) {
		return fmt.Errorf("bodies %v, want %v", bodies, s.Want.Counts)
	}
	if s.Want.StatusCounts != nil && fmt.Sprint(statuses) != fmt.Sprint(s.Want.StatusCounts) {
		return fmt.Errorf("statuses %v, want %v", statuses, s.Want.StatusCounts)
	}
	if sp := s.Want.Spread; sp != nil {
		counts := make([]int, 0, len(bodies))
		for _, c := range bodies {
			counts = append(counts, c)
		}
		sort.Ints(counts)
		if len(counts) != sp.Bodies {
			return fmt.Errorf("bodies %v, want %d distinct", bodies, sp.Bodies)
		}
		if d := float64(counts[len(counts)-1]-counts[0]) / float64(counts[len(counts)/2]); d > sp.Max {
			return fmt.Errorf("bodies %v: spread %.2f, want at most %.2f", bodies, d, sp.Max)
		}
	}
	return nil
}

// waitSync waits until the gateway has loaded every change in its store.
func waitSync(g *gatewayProc) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get("http://" + g.control + "/v1/config")
		if err == nil {
			var v struct {
				InSync bool `json:"in_sync"`
			}
			err = json.NewDecoder(resp.Body).Decode(&v)
			resp.Body.Close()
			if err == nil && v.InSync {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gateway not in sync with its store after 5s (%v)", err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// mapper rewrites APISIX's fixed addresses to the real listeners and back.
type mapper struct {
	out       *strings.Replacer
	ports     map[int]int // logical → real
	backRE    *regexp.Regexp
	backPorts map[string]string
	// closedRedis is where a redis_port the suite does not run goes
	closedRedis int
}

func newMapper(env Env, g *gatewayProc) *mapper {
	m := &mapper{ports: map[int]int{}, backPorts: map[string]string{}}
	var pairs []string
	add := func(logical int, real string) {
		_, p, _ := net.SplitHostPort(real)
		port, _ := strconv.Atoi(p)
		m.ports[logical] = port
		if port == logical {
			return // already where the cases say
		}
		m.backPorts[p] = strconv.Itoa(logical)
		for _, host := range []string{"127.0.0.1", "localhost"} {
			pairs = append(pairs, host+":"+strconv.Itoa(logical), host+":"+p)
		}
	}
	for logical, real := range env.Upstream.Addrs {
		add(logical, real)
	}
	if a := env.Upstream.Addr6; a != "" && a != "[::1]:1980" {
		_, p, _ := net.SplitHostPort(a)
		pairs = append(pairs, "[::1]:1980", a)
		m.backPorts[p] = "1980"
	}
	add(1984, g.addr)
	if env.Redis != "" {
		add(6379, env.Redis)
		m.closedRedis = closedPort()
	}
	m.out = strings.NewReplacer(pairs...)
	var alts []string
	for p := range m.backPorts {
		alts = append(alts, p)
	}
	if len(alts) == 0 {
		alts = append(alts, "$^") // nothing to map back
	}
	m.backRE = regexp.MustCompile(`\b(` + strings.Join(alts, "|") + `)\b`)
	return m
}

// request maps a value sent to the gateway.
func (m *mapper) request(s string) string { return m.out.Replace(s) }

// body maps a request body, including {"host":…,"port":1980} objects and
// the redis plugins' {"redis_host": "127.0.0.1", "redis_port": 6379}.
func (m *mapper) body(s string) string {
	s = m.out.Replace(s)
	if !strings.Contains(s, `"port"`) && !strings.Contains(s, `"redis_host"`) {
		return s
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return s
	}
	if !m.mapNodePorts(v) {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// mapNodePorts rewrites the port of {"host": "127.0.0.1", "port": N} objects,
// and redis_port (6379 when absent) next to a loopback redis_host.
func (m *mapper) mapNodePorts(v any) bool {
	changed := false
	switch x := v.(type) {
	case map[string]any:
		if h, _ := x["redis_host"].(string); h == "127.0.0.1" || h == "localhost" {
			n := 6379
			if p, ok := x["redis_port"].(json.Number); ok {
				n, _ = strconv.Atoi(string(p))
			}
			if real, ok := m.ports[n]; ok && real != n {
				x["redis_port"] = json.Number(strconv.Itoa(real))
				changed = true
			} else if !ok && m.closedRedis != 0 {
				// A case's wrong port (16379) may be a redis this
				// machine runs: it goes where nothing listens.
				x["redis_port"] = json.Number(strconv.Itoa(m.closedRedis))
				changed = true
			}
		}
		if h, _ := x["host"].(string); h == "127.0.0.1" || h == "localhost" {
			if p, ok := x["port"].(json.Number); ok {
				if n, err := strconv.Atoi(string(p)); err == nil {
					if real, ok := m.ports[n]; ok {
						x["port"] = json.Number(strconv.Itoa(real))
						changed = true
					}
				}
			}
		}
		for _, e := range x {
			changed = m.mapNodePorts(e) || changed
		}
	case []any:
		for _, e := range x {
			changed = m.mapNodePorts(e) || changed
		}
	}
	return changed
}

// response maps real port numbers back to the logical ones.
func (m *mapper) response(b []byte) []byte {
	return m.backRE.ReplaceAllFunc(b, func(p []byte) []byte { return []byte(m.backPorts[string(p)]) })
}

// send writes one raw request, as Test::Nginx does, and reads the answer.
func send(g *gatewayProc, m *mapper, method, target string, s Step) (*Response, error) {
	addr := g.addr
	switch {
	case strings.HasPrefix(target, "/apisix/admin"):
		addr = g.admin // the data listener's, or its own under v3
	case strings.HasPrefix(target, "/apisix/prometheus/metrics"):
		addr = g.prom
	case strings.HasPrefix(target, "/v1/"):
		addr = g.control
	}
	target = m.request(target)
	hdr := map[string]string{}
	order := []string{}
	set := func(k, v string) {
		ck := canonical(k)
		if _, ok := hdr[ck]; !ok {
			order = append(order, ck)
		}
		hdr[ck] = v
	}
	set("Host", "localhost")
	set("Connection", "close")
	if strings.HasPrefix(target, "/apisix/admin") {
		set("X-API-KEY", AdminKey)
		set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, k := range sortedKeys(s.Headers) {
		set(k, m.request(s.Headers[k]))
	}
	var body string
	if s.Body != nil {
		body = m.body(*s.Body)
		if _, ok := hdr["Content-Length"]; !ok && hdr["Transfer-Encoding"] == "" {
			set("Content-Length", strconv.Itoa(len(body)))
		}
	}
	// "GET /path HTTP/1.0" sends that protocol version (Test::Nginx's
	// request line); HTTP/1.1 otherwise.
	proto := "HTTP/1.1"
	if t, p, ok := strings.Cut(target, " "); ok {
		target, proto = t, p
	}
	var req strings.Builder
	fmt.Fprintf(&req, "%s %s %s\r\n", method, target, proto)
	for _, k := range order {
		if hdr[k] == "" && k != "Host" {
			continue // an empty value removes a default header
		}
		fmt.Fprintf(&req, "%s: %s\r\n", k, hdr[k])
	}
	req.WriteString("\r\n")
	req.WriteString(body)

	timeout := 10 * time.Second
	if s.Timeout > 0 {
		timeout = time.Duration(s.Timeout * float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	if _, err := io.WriteString(conn, req.String()); err != nil {
		return nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var rest io.Reader = resp.Body
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// An upgraded connection: what follows, until it closes, is the
		// body, as Test::Nginx's raw_request reads it (WebSocket frames).
		rest = br
	}
	b, err := io.ReadAll(rest)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, err
	}
	out := &Response{Status: resp.StatusCode, Headers: map[string][]string{}, Body: m.response(b)}
	if addr == g.prom {
		out.Body = apisixLabelOrder(out.Body)
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			out.Headers[k] = append(out.Headers[k], string(m.response([]byte(v))))
		}
	}
	return out, nil
}

// flushRedis empties redis, authenticating with password when it must.
func flushRedis(addr, password string) error {
	err := redisDo(addr, []string{"FLUSHALL"})
	if err != nil && password != "" && strings.Contains(err.Error(), "NOAUTH") {
		err = redisDo(addr, []string{"AUTH", password}, []string{"FLUSHALL"})
	}
	return err
}

// closedPort is a loopback port nothing listens on (just closed), or 0.
func closedPort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// redisDo sends commands to redis on one connection; an error reply fails.
func redisDo(addr string, cmds ...[]string) error {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	r := bufio.NewReader(conn)
	for _, cmd := range cmds {
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(cmd))
		for _, a := range cmd {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := io.WriteString(conn, b.String()); err != nil {
			return err
		}
		line, err := r.ReadString('\n')
		if err != nil || strings.HasPrefix(line, "-") {
			return fmt.Errorf("redis %s: %q %v", strings.Join(cmd, " "), strings.TrimSpace(line), err)
		}
	}
	return nil
}

// apisixLabels is the label order APISIX's prometheus plugin declares
// (nginx-lua-prometheus writes labels in that order; a histogram's le last;
// 3.x's request_type … response_source after 2.14's).
var apisixLabels = map[string][]string{
	"apisix_http_status":         {"code", "route", "matched_uri", "matched_host", "service", "consumer", "node", "request_type", "request_llm_model", "llm_model", "response_source"},
	"apisix_http_latency":        {"type", "route", "service", "consumer", "node", "request_type", "request_llm_model", "llm_model", "le"},
	"apisix_bandwidth":           {"type", "route", "service", "consumer", "node", "request_type", "request_llm_model", "llm_model"},
	"apisix_node_info":           {"hostname"},
	"apisix_etcd_modify_indexes": {"key"},
}

var seriesRE = regexp.MustCompile(`(?m)^(apisix_[a-z_]+?)(_bucket|_sum|_count)?\{(.*)\}`)

// apisixLabelOrder rewrites the series lines of a Prometheus text answer
// with their labels in APISIX's order: client_golang sorts them by name,
// and label order carries no meaning in the format, but APISIX's tests
// match the lines as nginx-lua-prometheus writes them.
func apisixLabelOrder(body []byte) []byte {
	return seriesRE.ReplaceAllFunc(body, func(line []byte) []byte {
		m := seriesRE.FindSubmatch(line)
		order, ok := apisixLabels[string(m[1])]
		if !ok {
			return line
		}
		pairs := map[string]string{}
		for _, p := range splitLabels(string(m[3])) {
			name, _, _ := strings.Cut(p, "=")
			pairs[name] = p
		}
		out := make([]string, 0, len(pairs))
		for _, name := range order {
			if p, ok := pairs[name]; ok {
				out = append(out, p)
				delete(pairs, name)
			}
		}
		if len(pairs) > 0 {
			return line // a label APISIX does not declare: leave the line alone
		}
		return []byte(string(m[1]) + string(m[2]) + "{" + strings.Join(out, ",") + "}")
	})
}

// splitLabels splits `a="x",b="y"` at the commas between quoted values.
func splitLabels(s string) []string {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++
		case s[i] == '"':
			quoted = !quoted
		case s[i] == ',' && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
