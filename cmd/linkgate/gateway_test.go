package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/etcdtest"
	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/syncbuf"
)

const seedKey = "edd1c9f034335f136f87ad84b625c8f1"

type runningGateway struct {
	url, promURL string
	tlsAddr      string
	stderr       *syncbuf.Buffer
	done         chan error
}

var listening = regexp.MustCompile(`msg="gateway listening" addr=(\S+) prometheus=(\S+) .* tls=(\S+)`)

// startGatewayCmd runs the real `linkgate gateway` in-process on random ports.
func startGatewayCmd(t *testing.T, args ...string) *runningGateway {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	g := startGatewayCtx(t, ctx, args...)
	t.Cleanup(func() {
		cancel()
		g.wait(t)
	})
	return g
}

// startGatewayCtx runs the gateway until ctx ends; wait waits for it.
func startGatewayCtx(t *testing.T, ctx context.Context, args ...string) *runningGateway {
	t.Helper()
	stderr := &syncbuf.Buffer{}
	done := make(chan error, 1)
	args = append([]string{"gateway", "--listen", "127.0.0.1:0", "--prometheus-listen", "127.0.0.1:0", "--listen-tls", "127.0.0.1:0", "--admin-key", seedKey}, args...)
	go func() {
		done <- run(ctx, args, func(string) string { return "" }, strings.NewReader(""), io.Discard, stderr)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			return &runningGateway{url: "http://" + m[1], promURL: "http://" + m[2], tlsAddr: m[3], stderr: stderr, done: done}
		}
		select {
		case err := <-done:
			t.Fatalf("gateway exited early: %v\n%s", err, stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("gateway did not start:\n%s", stderr)
	return nil
}

// wait waits for a stopping gateway to exit, without error.
func (g *runningGateway) wait(t *testing.T) {
	select {
	case err := <-g.done:
		if err != nil {
			t.Errorf("gateway exited: %v\n%s", err, g.stderr)
		}
	case <-time.After(15 * time.Second):
		t.Error("gateway did not shut down")
	}
}

func do(t *testing.T, method, url, body string, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func seed(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "gateway", "admin", "testdata", "seed", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func helloUpstream(t *testing.T) (addr string) {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "1234567890")
	}))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// The seed's commands, verbatim, against a bolt-backed gateway.
func TestGatewaySeedCommands(t *testing.T) {
	g := startGatewayCmd(t, "--config-store", "bolt:"+filepath.Join(t.TempDir(), "gw.db"))
	// The seed's curl bodies, byte for byte (gateway/admin/testdata/seed).
	code, body := do(t, "PUT", g.url+"/apisix/admin/routes/1", seed(t, "route_anything.json"), "X-API-KEY", seedKey)
	if code != 201 || !strings.Contains(body, `"key":"/apisix/routes/1"`) {
		t.Fatalf("seed PUT: %d %s", code, body)
	}
	up := helloUpstream(t)
	for _, name := range []string{"route_hello.json", "route_hello_plugins.json"} {
		// The upstream runs on a random port here, not 1980.
		body := strings.Replace(seed(t, name), "127.0.0.1:1980", up, 1)
		if code, resp := do(t, "PUT", g.url+"/apisix/admin/routes/1", body, "X-API-KEY", seedKey); code != 200 {
			t.Fatalf("seed PUT %s: %d %s", name, code, resp)
		}
		eventually.True(t, time.Second, "route served", func() bool {
			code, body := do(t, "GET", g.url+"/hello", "")
			return code == 200 && body == "1234567890"
		})
	}
	// The plugins apply once the reload lands: poll until a request is counted.
	var metrics string
	eventually.True(t, time.Second, "request counted by prometheus", func() bool {
		do(t, "GET", g.url+"/hello", "")
		_, metrics = do(t, "GET", g.promURL+"/apisix/prometheus/metrics", "")
		return strings.Contains(metrics, `apisix_http_status{code="200"`)
	})
	for _, want := range []string{`apisix_http_status{code="200",consumer="",matched_host="",matched_uri="/hello",node="127.0.0.1",route="1",service=""}`,
		`apisix_http_latency_bucket{consumer="",node="127.0.0.1",route="1",service="",type="request",le="1"}`,
		`apisix_etcd_reachable 1`, `apisix_nginx_http_current_connections{state="active"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if code, _ := do(t, "GET", g.url+"/apisix/admin/routes", "", "X-API-KEY", "wrong"); code != 401 {
		t.Errorf("wrong admin key: %d", code)
	}
}

// Two gateways on one etcd: a change through either reaches both within
// 1 s; with etcd stopped they keep serving the last good configuration
// without a failed request and report apisix_etcd_reachable 0.
func TestGatewayEtcdCluster(t *testing.T) {
	srv := etcdtest.Start(t)
	store := "etcd://" + srv.Endpoint() + "?prefix=/apisix"
	a := startGatewayCmd(t, "--config-store", store)
	b := startGatewayCmd(t, "--config-store", store)
	up := helloUpstream(t)
	route := `{"uri":"/hello","plugins":{"prometheus":{}},"upstream":{"type":"roundrobin","nodes":{"` + up + `":1}}}`
	for i, g := range []*runningGateway{a, b} {
		path := fmt.Sprintf("/apisix/admin/routes/%d", i+1)
		start := time.Now()
		if code, body := do(t, "PUT", g.url+path, strings.Replace(route, "/hello", fmt.Sprintf("/r%d", i+1), 1), "X-API-KEY", seedKey); code != 201 {
			t.Fatalf("PUT: %d %s", code, body)
		}
		for _, other := range []*runningGateway{a, b} {
			eventually.True(t, time.Second-time.Since(start), "change propagated to both gateways", func() bool {
				code, _ := do(t, "GET", other.url+fmt.Sprintf("/r%d", i+1), "")
				return code == 200
			})
		}
	}
	// POST ids come from etcd, unique across gateways.
	_, b1 := do(t, "POST", a.url+"/apisix/admin/routes", route, "X-API-KEY", seedKey)
	_, b2 := do(t, "POST", b.url+"/apisix/admin/routes", route, "X-API-KEY", seedKey)
	if b1 == b2 || !strings.Contains(b1, `"action":"create"`) {
		t.Errorf("POST ids: %s / %s", b1, b2)
	}

	var failed, served atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, g := range []*runningGateway{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := http.Get(g.url + "/r1")
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failed.Add(1)
				}
				served.Add(1)
				time.Sleep(5 * time.Millisecond) // deliberate: a client's steady pace, not a flood
			}
		}()
	}
	srv.Stop()
	eventually.True(t, 5*time.Second, "apisix_etcd_reachable 0", func() bool {
		_, m := do(t, "GET", a.promURL+"/apisix/prometheus/metrics", "")
		return strings.Contains(m, "apisix_etcd_reachable 0")
	})
	if code, body := do(t, "PUT", a.url+"/apisix/admin/routes/9", route, "X-API-KEY", seedKey); code != 503 {
		t.Errorf("admin write with etcd down: %d %s, want 503", code, body)
	}
	// Both gateways keep serving with etcd down: 20 more requests each way.
	before := served.Load()
	eventually.True(t, 10*time.Second, "20 more requests served with etcd down", func() bool { return served.Load() >= before+20 })
	close(stop)
	wg.Wait()
	if failed.Load() != 0 || served.Load() < 20 {
		t.Errorf("with etcd down: %d failed of %d", failed.Load(), served.Load())
	}
}

// Under v3 with its own listener the admin API answers there and not on
// the data listener.
func TestGatewayAdminOwnListener(t *testing.T) {
	g := startGatewayCmd(t, "--config-store", "bolt:"+filepath.Join(t.TempDir(), "gw.db"),
		"--admin-api-version", "v3", "--admin-listen", "127.0.0.1:0", "--server-header", "APISIX")
	m := regexp.MustCompile(`msg="gateway listening" .* admin=(\S+)`).FindStringSubmatch(g.stderr.String())
	if m == nil || "http://"+m[1] == g.url {
		t.Fatalf("no admin listener of its own in %s", g.stderr)
	}
	req, _ := http.NewRequest("GET", "http://"+m[1]+"/apisix/admin/routes", nil)
	req.Header.Set("X-API-KEY", seedKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-API-VERSION") != "v3" || resp.Header.Get("Server") != "APISIX" {
		t.Errorf("admin listener: %d %v", resp.StatusCode, resp.Header)
	}
	if code, body := do(t, "GET", g.url+"/apisix/admin/routes", "", "X-API-KEY", seedKey); code != 404 {
		t.Errorf("data listener answered the admin API: %d %s", code, body)
	}
}
