//go:build !functiononly

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/syncbuf"
)

// run()-level tests of `linkgate gateway`, as serve_test.go has for serve:
// usage errors, the environment, the log format, draining on shutdown and
// --shutdown-timeout.

var gatewayListenJSON = regexp.MustCompile(`"msg":"gateway listening","addr":"([^"]+)"`)

// gatewayRun is a `linkgate gateway` running in-process, logging JSON.
type gatewayRun struct {
	url    string
	logs   *syncbuf.Buffer
	cancel context.CancelFunc
	done   chan error
}

// startGatewayJSON runs run("gateway", …) with a bolt store in a temporary
// directory and JSON logs, waits until it listens, and stops it at cleanup.
func startGatewayJSON(t *testing.T, env map[string]string, args ...string) *gatewayRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g := &gatewayRun{logs: &syncbuf.Buffer{}, cancel: cancel, done: make(chan error, 1)}
	full := append([]string{"gateway", "--listen", "127.0.0.1:0", "--prometheus-listen", "", "--listen-tls", "",
		"--config-store", "bolt:" + filepath.Join(t.TempDir(), "gw.db"), "--log-format", "json"}, args...)
	go func() {
		g.done <- run(ctx, full, func(k string) string { return env[k] }, strings.NewReader(""), io.Discard, g.logs)
	}()
	t.Cleanup(func() { g.stop(t) })
	eventually.True(t, 30*time.Second, "the gateway listening", func() bool {
		select {
		case err := <-g.done:
			t.Fatalf("gateway exited early: %v\n%s", err, g.logs)
		default:
		}
		m := gatewayListenJSON.FindStringSubmatch(g.logs.String())
		if m != nil {
			g.url = "http://" + m[1]
		}
		return m != nil
	})
	return g
}

// stop cancels run (as SIGTERM would) and returns its error; idempotent.
func (g *gatewayRun) stop(t *testing.T) error {
	t.Helper()
	if g.cancel == nil {
		return nil
	}
	g.cancel()
	g.cancel = nil
	select {
	case err := <-g.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("gateway did not stop:\n%s", g.logs)
		return nil
	}
}

// route puts a route from uri to upstream (host:port) and waits until the
// gateway serves it.
func (g *gatewayRun) route(t *testing.T, uri, upstream string) {
	t.Helper()
	body := `{"uri":"` + uri + `","upstream":{"type":"roundrobin","nodes":{"` + upstream + `":1}}}`
	if code, resp := do(t, "PUT", g.url+"/apisix/admin/routes/1", body, "X-API-KEY", seedKey); code != 201 {
		t.Fatalf("PUT route: %d %s", code, resp)
	}
	eventually.True(t, 10*time.Second, "the route served", func() bool {
		code, _ := do(t, "GET", g.url+uri+"?probe=1", "")
		return code == 200
	})
}

// heldUpstream answers a probe (?probe=1) at once and holds every other
// request until release is closed: a request in flight for as long as a
// test needs one. arrived receives one value per held request.
func heldUpstream(t *testing.T) (addr string, arrived <-chan struct{}, release func()) {
	t.Helper()
	in := make(chan struct{}, 16)
	held := make(chan struct{})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("probe") == "" {
			in <- struct{}{}
			<-held // deliberate: the request stays in flight until the test releases it
		}
		fmt.Fprint(w, "done")
	}))
	var closed bool
	release = func() {
		if !closed {
			closed = true
			close(held)
		}
	}
	t.Cleanup(func() { release(); s.Close() })
	return strings.TrimPrefix(s.URL, "http://"), in, release
}

func TestGatewayUsageErrors(t *testing.T) {
	tmp := t.TempDir()
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"store kind", []string{"--config-store", "mysql://x"}, 2, "want bolt:PATH"},
		{"admin api version", []string{"--admin-api-version", "v4"}, 2, "v2 or v3"},
		{"allow admin", []string{"--allow-admin", "not-a-cidr"}, 2, "--allow-admin"},
		{"router", []string{"--router", "radix"}, 2, "--router"},
		{"argument", []string{"extra"}, 2, "no arguments"},
		{"unknown flag", []string{"--nope"}, 2, "nope"},
		{"trusted CA missing", []string{"--ssl-trusted-certificate", "/nonexistent/ca.pem"}, 2, "--ssl-trusted-certificate"},
		{"trusted CA not PEM", []string{"--ssl-trusted-certificate", "gateway_test.go"}, 2, "no PEM certificate"},
		{"key salt", []string{"--ssl-key-encrypt-salt", "short"}, 2, "--ssl-key-encrypt-salt"},
		{"request id machine", []string{"--request-id-machine", "4096"}, 2, "0-4095"},
		{"log format", []string{"--log-format", "xml"}, 2, "log format"},
		{"log level", []string{"--log-level", "loud"}, 2, "log level"},
		{"shutdown timeout", []string{"--shutdown-timeout", "-1s"}, 2, "--shutdown-timeout"},
		{"websocket max duration", []string{"--websocket-max-duration", "-1s"}, 2, "--websocket-max-duration"},
		{"port taken", []string{"--listen", "127.0.0.1:-1"}, 1, "gateway:"},
		{"acme without TLS", []string{"--acme"}, 2, "--acme needs the TLS listener"},
		{"acme-sni without acme", []string{"--acme-sni", "a.test"}, 2, "--acme-sni needs --acme"},
		{"acme CA not https", []string{"--acme", "--listen-tls", "127.0.0.1:0", "--acme-ca", "http://ca.test/dir"}, 2, "not an https:// URL"},
		{"acme CA root missing", []string{"--acme", "--listen-tls", "127.0.0.1:0", "--acme-ca-root", "/nonexistent/root.pem"}, 2, "ACME CA root"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"gateway", "--config-store", "bolt:" + filepath.Join(tmp, tt.name+".db"),
				"--prometheus-listen", "", "--listen-tls", ""}, tt.args...)
			var errOut syncbuf.Buffer
			err := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), io.Discard, &errOut)
			if code := cli.ExitCode(err); code != tt.code || !strings.Contains(fmt.Sprint(err)+errOut.String(), tt.msg) {
				t.Errorf("exit %d (%v), want %d mentioning %q; stderr %q", code, err, tt.code, tt.msg, errOut.String())
			}
		})
	}
}

// Every flag has its LINKGATE_ variable; a flag wins over it.
func TestGatewayEnvironment(t *testing.T) {
	g := startGatewayJSON(t, map[string]string{"LINKGATE_ADMIN_KEY": seedKey, "LINKGATE_SERVER_HEADER": "from-env"})
	up := helloUpstream(t)
	g.route(t, "/hello", up)
	resp, err := http.Get(g.url + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Server"); got != "from-env" {
		t.Errorf("LINKGATE_SERVER_HEADER=from-env: Server %q", got)
	}
	f := startGatewayJSON(t, map[string]string{"LINKGATE_ADMIN_KEY": "not-the-flag"}, "--admin-key", seedKey)
	if code, body := do(t, "GET", f.url+"/apisix/admin/routes", "", "X-API-KEY", seedKey); code != 200 {
		t.Errorf("--admin-key over LINKGATE_ADMIN_KEY: %d %s", code, body)
	}
}

// --log-format json logs JSON lines (the text format is what the other
// gateway tests read); stopping logs "stopped" and returns nil.
func TestGatewayLogFormat(t *testing.T) {
	g := startGatewayJSON(t, nil, "--admin-key", seedKey)
	if err := g.stop(t); err != nil {
		t.Fatalf("gateway returned %v after shutdown\n%s", err, g.logs)
	}
	for _, line := range strings.Split(strings.TrimSpace(g.logs.String()), "\n") {
		if !strings.HasPrefix(line, "{") {
			t.Errorf("not a JSON line: %q", line)
		}
	}
	for _, want := range []string{`"msg":"shutting down: draining requests in flight","timeout":"10s"`, `"msg":"stopped"`} {
		if !strings.Contains(g.logs.String(), want) {
			t.Errorf("logs lack %s:\n%s", want, g.logs)
		}
	}
}

// SIGTERM with a request in flight: the gateway stops accepting, the
// request is answered once its upstream answers, and run returns nil.
func TestGatewayDrainsOnShutdown(t *testing.T) {
	g := startGatewayJSON(t, nil, "--admin-key", seedKey, "--shutdown-timeout", "60s")
	up, arrived, release := heldUpstream(t)
	g.route(t, "/slow", up)
	answered := make(chan string, 1)
	go func() {
		resp, err := http.Get(g.url + "/slow")
		if err != nil {
			answered <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answered <- fmt.Sprint(resp.StatusCode, " ", string(b))
	}()
	<-arrived
	stopped := make(chan error, 1)
	go func() { stopped <- g.stop(t) }()
	eventually.True(t, 30*time.Second, "shutdown started", func() bool {
		return strings.Contains(g.logs.String(), "shutting down")
	})
	select {
	case err := <-stopped:
		t.Fatalf("run returned %v with a request in flight", err)
	default:
	}
	release()
	if got := <-answered; got != "200 done" {
		t.Errorf("request in flight at shutdown: %s", got)
	}
	if err := <-stopped; err != nil {
		t.Errorf("run: %v\n%s", err, g.logs)
	}
}

// --shutdown-timeout bounds the drain: with a request that never ends, run
// returns the deadline's error after it, not after the default 10 s.
func TestGatewayShutdownTimeout(t *testing.T) {
	g := startGatewayJSON(t, nil, "--admin-key", seedKey, "--shutdown-timeout", "100ms")
	up, arrived, _ := heldUpstream(t)
	g.route(t, "/slow", up)
	go func() {
		if resp, err := http.Get(g.url + "/slow"); err == nil {
			resp.Body.Close()
		}
	}()
	<-arrived
	g.cancel()
	g.cancel = nil
	select {
	case err := <-g.done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("run: %v, want the shutdown deadline's error", err)
		}
	case <-time.After(8 * time.Second): // far beyond 100ms, short of the default 10s
		t.Fatalf("run did not return within 8s of a 100ms --shutdown-timeout:\n%s", g.logs)
	}
}

// A consumer's key-auth key written as $env://NAME is NAME's value from
// the gateway's environment (APISIX 3.x's env secret manager), and the
// reference itself is no key.
func TestGatewayEnvSecrets(t *testing.T) {
	g := startGatewayJSON(t, map[string]string{"LINKGATE_ADMIN_KEY": seedKey, "LG_TEST_JACK_KEY": "key-from-env"})
	up := helloUpstream(t)
	if code, body := do(t, "PUT", g.url+"/apisix/admin/consumers", `{"username":"jack","plugins":{"key-auth":{"key":"$env://LG_TEST_JACK_KEY"}}}`, "X-API-KEY", seedKey); code/100 != 2 {
		t.Fatalf("PUT consumer: %d %s", code, body)
	}
	route := `{"uri":"/hello","plugins":{"key-auth":{}},"upstream":{"type":"roundrobin","nodes":{"` + up + `":1}}}`
	if code, body := do(t, "PUT", g.url+"/apisix/admin/routes/1", route, "X-API-KEY", seedKey); code/100 != 2 {
		t.Fatalf("PUT route: %d %s", code, body)
	}
	eventually.True(t, 10*time.Second, "the key from the environment accepted", func() bool {
		code, _ := do(t, "GET", g.url+"/hello", "", "apikey", "key-from-env")
		return code == 200
	})
	if code, body := do(t, "GET", g.url+"/hello", "", "apikey", "$env://LG_TEST_JACK_KEY"); code != 401 {
		t.Errorf("the reference itself as the key: %d %s", code, body)
	}
}

// --admin-listen: on the data listener under v2 (APISIX 2.x), on :9180
// under v3 (APISIX 3.x), else where it says.
func TestGatewayAdminListenDefault(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "data"},
		{[]string{"--admin-api-version", "v3"}, ":9180"},
		{[]string{"--admin-api-version", "v3", "--admin-listen", "data"}, "data"},
		{[]string{"--admin-listen", "127.0.0.1:9999"}, "127.0.0.1:9999"},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
		var c gatewayConfig
		c.register(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		if err := c.validate(); err != nil {
			t.Fatal(err)
		}
		if c.adminListen != tt.want {
			t.Errorf("%v: admin listen %q, want %q", tt.args, c.adminListen, tt.want)
		}
	}
}
