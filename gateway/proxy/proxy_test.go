package proxy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/cors"
	"github.com/linkgate/linkgate/gateway/plugin/keyauth"
	"github.com/linkgate/linkgate/gateway/plugin/limitcount"
	"github.com/linkgate/linkgate/gateway/plugin/limitreq"
	"github.com/linkgate/linkgate/gateway/plugin/opentelemetry"
	"github.com/linkgate/linkgate/gateway/plugin/prometheus"
	"github.com/linkgate/linkgate/gateway/plugin/proxyrewrite"
	"github.com/linkgate/linkgate/gateway/plugin/redis"
	"github.com/linkgate/linkgate/gateway/plugin/requestid"
	"github.com/linkgate/linkgate/gateway/proxy"
	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/testdep"
)

// gw is a running gateway on 127.0.0.1:0.
type gw struct {
	g    *proxy.Gateway
	url  string
	reg  *gateway.Registry
	cfg  *gateway.Config
	prom *prometheus.Factory
}

func startGateway(t testing.TB) *gw {
	t.Helper()
	return startGatewayWith(t, proxy.Options{ServerHeader: "linkgate"})
}

func startGatewayWith(t testing.TB, opts proxy.Options) *gw {
	t.Helper()
	prom := prometheus.New()
	reg := gateway.NewRegistry(limitcount.New(slog.New(slog.DiscardHandler), redis.NewPool()), prom, keyauth.New(), proxyrewrite.New(),
		limitreq.New(slog.New(slog.DiscardHandler), redis.NewPool()), cors.New(), requestid.New(0),
		opentelemetry.New(opentelemetry.Options{Collector: "127.0.0.1:1"})) // unsampled spans only: nothing is exported
	g := proxy.New(opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = g.Shutdown(ctx)
	})
	return &gw{g: g, url: "http://" + ln.Addr().String(), reg: reg, cfg: gateway.NewConfig(), prom: prom}
}

// load applies resources ("routes/1" → JSON) through the real pipeline.
func (w *gw) load(t testing.TB, res map[string]string) {
	t.Helper()
	var u gateway.Update
	for key, v := range res {
		kind, id, _ := strings.Cut(key, "/")
		u.Entries = append(u.Entries, gateway.Entry{Kind: gateway.Kind(kind), ID: id, Value: []byte(v)})
	}
	if errs := w.cfg.Apply(u, w.reg); len(errs) > 0 {
		t.Fatalf("apply: %v", errs)
	}
	c, errs := gateway.Compile(w.cfg, w.reg)
	if len(errs) > 0 {
		t.Fatalf("compile: %v", errs)
	}
	w.g.Load(c)
}

var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

func get(t *testing.T, url string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// upstream answers with its name and echoes what it received.
func upstream(t testing.TB, name string, h http.HandlerFunc) string {
	t.Helper()
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Upstream", name)
			w.Header().Set("Server", "upstream")
			fmt.Fprintf(w, "%s %s host=%s xri=%s xff=%s xfp=%s xfh=%s xfport=%s auth=%s",
				name, r.URL.RequestURI(), r.Host, r.Header.Get("X-Real-IP"), r.Header.Get("X-Forwarded-For"),
				r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-Host"), r.Header.Get("X-Forwarded-Port"), r.Header.Get("X-Auth"))
		}
	}
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// deadAddr is a 127.0.0.1 port nothing listens on.
func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestProxyBasics(t *testing.T) {
	w := startGateway(t)
	up := upstream(t, "a", nil)
	w.load(t, map[string]string{
		"routes/1": `{"uri":"/anything/*","upstream":{"type":"roundrobin","nodes":{"` + up + `":1}}}`,
		"routes/2": `{"uri":"/node","upstream":{"type":"roundrobin","pass_host":"node","nodes":{"` + up + `":1}}}`,
		"routes/3": `{"uri":"/rewrite","upstream":{"type":"roundrobin","pass_host":"rewrite","upstream_host":"up.example","nodes":{"` + up + `":1}}}`,
	})
	code, hdr, body := get(t, w.url+"/anything/das?x=1", "X-Forwarded-For", "1.2.3.4", "Host", "gw.example:9080", "X-Real-IP", "9.9.9.9")
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	want := "a /anything/das?x=1 host=gw.example:9080 xri=127.0.0.1 xff=1.2.3.4, 127.0.0.1 xfp=http xfh=gw.example xfport="
	if !strings.HasPrefix(body, want) {
		t.Errorf("upstream saw %q, want prefix %q", body, want)
	}
	if hdr.Get("Server") != "linkgate" {
		t.Errorf("Server %q, want linkgate", hdr.Get("Server"))
	}
	if _, _, body := get(t, w.url+"/anything/x%2Fy/../z?q=a%20b"); !strings.HasPrefix(body, "a /anything/x%2Fy/../z?q=a%20b ") {
		t.Errorf("request URI not forwarded verbatim: %q", body)
	}
	if _, _, body := get(t, w.url+"/node"); !strings.Contains(body, "host="+up+" ") {
		t.Errorf("pass_host node: %q", body)
	}
	if _, _, body := get(t, w.url+"/rewrite"); !strings.Contains(body, "host=up.example ") {
		t.Errorf("pass_host rewrite: %q", body)
	}
	// The upstream pool speaks TLS to https nodes and forwards bodies.
	tlsUp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "tls %s %s %s", r.Method, r.URL.RequestURI(), b)
	}))
	t.Cleanup(tlsUp.Close)
	w.load(t, map[string]string{"routes/4": `{"uri":"/tls","upstream":{"type":"roundrobin","scheme":"https","nodes":{"` +
		strings.TrimPrefix(tlsUp.URL, "https://") + `":1}}}`})
	for range 3 {
		resp, err := client.Post(w.url+"/tls?a=1", "text/plain", strings.NewReader("payload"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "tls POST /tls?a=1 payload" {
			t.Errorf("https upstream: %d %q", resp.StatusCode, b)
		}
	}
	code, hdr, body = get(t, w.url+"/anything")
	if code != 404 || body != `{"error_msg":"404 Route Not Found"}`+"\n" || hdr.Get("Content-Type") != "application/json" {
		t.Errorf("no route: %d %q %q", code, hdr.Get("Content-Type"), body)
	}
}

func TestRoundRobinWeights(t *testing.T) {
	w := startGateway(t)
	a, b := upstream(t, "a", nil), upstream(t, "b", nil)
	w.load(t, map[string]string{"routes/1": `{"uri":"/rr","upstream":{"type":"roundrobin","nodes":{"` + a + `":2,"` + b + `":1}}}`})
	counts := map[string]int{}
	for range 30 {
		_, hdr, _ := get(t, w.url+"/rr")
		counts[hdr.Get("X-Upstream")]++
	}
	if counts["a"] != 20 || counts["b"] != 10 {
		t.Errorf("weights 2:1 gave %v", counts)
	}
}

func TestChashAndLeastConn(t *testing.T) {
	w := startGateway(t)
	a, b, c := upstream(t, "a", nil), upstream(t, "b", nil), upstream(t, "c", nil)
	nodes := `{"` + a + `":1,"` + b + `":1,"` + c + `":1}`
	w.load(t, map[string]string{
		"routes/1": `{"uri":"/hash","upstream":{"type":"chash","hash_on":"header","key":"X-User","nodes":` + nodes + `}}`,
		"routes/2": `{"uri":"/lc","upstream":{"type":"least_conn","nodes":` + nodes + `}}`,
		"routes/3": `{"uri":"/arg","upstream":{"type":"chash","key":"arg_id","nodes":` + nodes + `}}`,
	})
	seen := map[string]bool{}
	for u := range 20 {
		first := ""
		for range 3 {
			_, hdr, _ := get(t, w.url+"/hash", "X-User", fmt.Sprint("user", u))
			if first == "" {
				first = hdr.Get("X-Upstream")
			} else if hdr.Get("X-Upstream") != first {
				t.Fatalf("user%d moved from %s to %s", u, first, hdr.Get("X-Upstream"))
			}
		}
		seen[first] = true
	}
	if len(seen) < 2 {
		t.Errorf("20 keys all hashed to %v", seen)
	}
	_, h1, _ := get(t, w.url+"/arg?id=42")
	_, h2, _ := get(t, w.url+"/arg?id=42")
	if h1.Get("X-Upstream") != h2.Get("X-Upstream") {
		t.Error("arg_id hash not stable")
	}
	lc := map[string]int{}
	for range 9 {
		_, hdr, _ := get(t, w.url+"/lc")
		lc[hdr.Get("X-Upstream")]++
	}
	if len(lc) != 3 {
		t.Errorf("least_conn with idle nodes should spread: %v", lc)
	}
}

func TestRetriesAndErrors(t *testing.T) {
	w := startGateway(t)
	good := upstream(t, "good", nil)
	dead := deadAddr(t)
	slow := upstream(t, "slow", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(500 * time.Millisecond) // deliberate: an upstream slower than the route's timeout
		fmt.Fprint(w, "late")
	})
	failing := upstream(t, "fail", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(503)
		fmt.Fprint(w, "down")
	})
	w.load(t, map[string]string{
		// Default retries = nodes - 1: the dead node is always retried onto the good one.
		"routes/1": `{"uri":"/retry","upstream":{"type":"roundrobin","nodes":{"` + dead + `":1,"` + good + `":1}}}`,
		"routes/2": `{"uri":"/noretry","upstream":{"type":"roundrobin","retries":0,"nodes":{"` + dead + `":1,"` + good + `":1}}}`,
		"routes/3": `{"uri":"/dead","upstream":{"type":"roundrobin","nodes":{"` + dead + `":1}}}`,
		"routes/4": `{"uri":"/slow","timeout":{"connect":1,"send":1,"read":0.1},"upstream":{"type":"roundrobin","nodes":{"` + slow + `":1}}}`,
		"routes/5": `{"uri":"/5xx","upstream":{"type":"roundrobin","nodes":{"` + failing + `":1}}}`,
		"routes/6": `{"uri":"/empty","upstream":{"type":"roundrobin","nodes":{}}}`,
	})
	for i := range 6 {
		if code, _, body := get(t, w.url+"/retry"); code != 200 || !strings.HasPrefix(body, "good") {
			t.Fatalf("request %d with retries: %d %q", i, code, body)
		}
	}
	failed := 0
	for range 6 {
		if code, _, _ := get(t, w.url+"/noretry"); code == 502 {
			failed++
		}
	}
	if failed != 3 {
		t.Errorf("retries 0: %d of 6 failed, want 3 (every other pick is the dead node)", failed)
	}
	if code, hdr, body := get(t, w.url+"/dead"); code != 502 || !strings.Contains(body, "502 Bad Gateway") || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") ||
		hdr.Get("X-APISIX-Upstream-Status") != "502" {
		t.Errorf("dead node: %d %q %v", code, body, hdr)
	}
	if code, hdr, body := get(t, w.url+"/slow"); code != 504 || !strings.Contains(body, "504 Gateway Time-out") || hdr.Get("X-APISIX-Upstream-Status") != "504" {
		t.Errorf("read timeout: %d %q %v", code, body, hdr)
	}
	if code, hdr, _ := get(t, w.url+"/5xx"); code != 503 || hdr.Get("X-APISIX-Upstream-Status") != "503" {
		t.Errorf("upstream 503: %d, X-APISIX-Upstream-Status %q", code, hdr.Get("X-APISIX-Upstream-Status"))
	}
	if code, _, body := get(t, w.url+"/empty"); code != 503 || !strings.Contains(body, "503 Service Temporarily Unavailable") {
		t.Errorf("no nodes: %d %q, want 503 (APISIX: no valid upstream node)", code, body)
	}
}

func TestHealthChecks(t *testing.T) {
	w := startGateway(t)
	var sick atomic.Bool
	sick.Store(true)
	var badHits atomic.Int64
	healthy := upstream(t, "ok", nil)
	flaky := upstream(t, "flaky", func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/status" {
			if sick.Load() {
				rw.WriteHeader(500)
			}
			return
		}
		badHits.Add(1)
		rw.Header().Set("X-Upstream", "flaky")
		fmt.Fprint(rw, "flaky")
	})
	checks := `"checks":{"active":{"http_path":"/status","healthy":{"interval":1,"successes":1},"unhealthy":{"interval":1,"http_failures":1}}}`
	w.load(t, map[string]string{
		"upstreams/1": `{"type":"roundrobin","nodes":{"` + healthy + `":1,"` + flaky + `":1},` + checks + `}`,
		"routes/1":    `{"uri":"/hc","upstream_id":"1"}`,
	})
	eventually.True(t, 5*time.Second, "flaky node marked down", func() bool {
		badHits.Store(0)
		for range 4 {
			get(t, w.url+"/hc")
		}
		return badHits.Load() == 0
	})
	// A reload that keeps the upstream keeps its health.
	w.load(t, map[string]string{"routes/2": `{"uri":"/hc2","upstream_id":"1"}`})
	badHits.Store(0)
	for range 4 {
		if code, _, _ := get(t, w.url+"/hc2"); code != 200 {
			t.Fatalf("status %d", code)
		}
	}
	if badHits.Load() != 0 {
		t.Error("health state lost across reload")
	}
	sick.Store(false)
	eventually.True(t, 5*time.Second, "flaky node back", func() bool {
		badHits.Store(0)
		for range 4 {
			get(t, w.url+"/hc")
		}
		return badHits.Load() > 0
	})
}

func TestPassiveHealthCheck(t *testing.T) {
	w := startGateway(t)
	var badHits atomic.Int64
	healthy := upstream(t, "ok", nil)
	bad := upstream(t, "bad", func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/status" {
			// 204 is in neither status list: active probes leave the
			// counters alone (a success would reset the failure count).
			rw.WriteHeader(204)
			return
		}
		badHits.Add(1)
		rw.WriteHeader(500)
	})
	checks := `"checks":{"active":{"http_path":"/status","healthy":{"interval":60,"successes":1},"unhealthy":{"interval":60}},` +
		`"passive":{"unhealthy":{"http_statuses":[500],"http_failures":2}}}`
	w.load(t, map[string]string{
		"routes/1": `{"uri":"/p","upstream":{"type":"roundrobin","nodes":{"` + healthy + `":1,"` + bad + `":1},` + checks + `}}`,
	})
	for range 10 {
		get(t, w.url+"/p")
	}
	if n := badHits.Load(); n != 2 {
		t.Errorf("bad node got %d requests, want 2 (then passive checks mark it down)", n)
	}
}

func TestPlugins(t *testing.T) {
	w := startGateway(t)
	up := upstream(t, "a", nil)
	node := `"upstream":{"type":"roundrobin","nodes":{"` + up + `":1}}`
	w.load(t, map[string]string{
		"routes/1":       `{"uri":"/limited","plugins":{"limit-count":{"count":3,"time_window":60,"rejected_code":429,"rejected_msg":"slow down"}},` + node + `}`,
		"routes/2":       `{"uri":"/auth","plugins":{"key-auth":{},"proxy-rewrite":{"uri":"/rewritten","headers":{"X-Auth":"$consumer_name"}}},` + node + `}`,
		"routes/3":       `{"uri":"/re/*","plugins":{"proxy-rewrite":{"regex_uri":["^/re/(.*)/(.*)","/x/$2/$1"],"host":"h.example"}},` + node + `}`,
		"consumers/jack": `{"username":"jack","plugins":{"key-auth":{"key":"k-jack"}}}`,
		"global_rules/1": `{"plugins":{"prometheus":{}}}`,
	})
	for i := 1; i <= 4; i++ {
		code, hdr, body := get(t, w.url+"/limited")
		wantCode := 200
		if i == 4 {
			wantCode = 429
		}
		if code != wantCode {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
		if hdr.Get("X-RateLimit-Limit") != "3" || hdr.Get("X-RateLimit-Remaining") != fmt.Sprint(max(3-i, 0)) || hdr.Get("X-RateLimit-Reset") == "" {
			t.Errorf("request %d headers: %v", i, hdr)
		}
		if i == 4 && body != `{"error_msg":"slow down"}`+"\n" {
			t.Errorf("rejection body %q", body)
		}
	}
	if code, _, body := get(t, w.url+"/auth"); code != 401 || !strings.Contains(body, "Missing API key") {
		t.Errorf("no key: %d %q", code, body)
	}
	if code, _, body := get(t, w.url+"/auth", "apikey", "wrong"); code != 401 || !strings.Contains(body, "Invalid API key") {
		t.Errorf("bad key: %d %q", code, body)
	}
	if code, _, body := get(t, w.url+"/auth?a=1", "apikey", "k-jack"); code != 200 || !strings.HasPrefix(body, "a /rewritten?a=1 ") || !strings.Contains(body, "auth=jack") {
		t.Errorf("good key: %d %q", code, body)
	}
	if _, _, body := get(t, w.url+"/re/one/two"); !strings.HasPrefix(body, "a /x/two/one host=h.example ") {
		t.Errorf("regex_uri: %q", body)
	}
	get(t, w.url+"/missing")
}

// Two gateways sharing one redis admit exactly count requests per window,
// however the requests are spread between them.
func TestLimitCountRedisTwoGateways(t *testing.T) {
	addr := testdep.Env(t, testdep.RedisAddr)
	host, port, _ := net.SplitHostPort(addr)
	up := upstream(t, "a", nil)
	// A fresh group per run: the redis-server outlives test runs.
	route := fmt.Sprintf(`{"uri":"/r","plugins":{"limit-count":{"count":50,"time_window":60,"key_type":"constant","key":"all",`+
		`"policy":"redis","redis_host":%q,"redis_port":%s,"group":"t%d"}},"upstream":{"type":"roundrobin","nodes":{%q:1}}}`,
		host, port, time.Now().UnixNano(), up)
	a, b := startGateway(t), startGateway(t)
	a.load(t, map[string]string{"routes/1": route})
	b.load(t, map[string]string{"routes/1": route})
	var ok, limited atomic.Int64
	done := make(chan struct{})
	for i := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			target := a.url
			if i%2 == 1 {
				target = b.url
			}
			for range 15 {
				code, _, _ := get(t, target+"/r")
				switch code {
				case 200:
					ok.Add(1)
				case 503:
					limited.Add(1)
				default:
					t.Errorf("status %d", code)
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
	if ok.Load() != 50 || limited.Load() != 70 {
		t.Errorf("admitted %d, limited %d; want exactly 50 and 70", ok.Load(), limited.Load())
	}
}

// An unreachable redis fails requests with 500, or lets them through with
// allow_degradation.
func TestLimitCountRedisDown(t *testing.T) {
	w := startGateway(t)
	up := upstream(t, "a", nil)
	dead := deadAddr(t)
	host, port, _ := net.SplitHostPort(dead)
	conf := func(degrade bool) string {
		return fmt.Sprintf(`{"uri":"/r%v","plugins":{"limit-count":{"count":5,"time_window":60,"policy":"redis","redis_host":%q,"redis_port":%s,"redis_timeout":200,"allow_degradation":%v}},"upstream":{"type":"roundrobin","nodes":{%q:1}}}`,
			degrade, host, port, degrade, up)
	}
	w.load(t, map[string]string{"routes/1": conf(false), "routes/2": conf(true)})
	if code, _, body := get(t, w.url+"/rfalse"); code != 500 || body != `{"error_msg":"failed to limit count"}`+"\n" {
		t.Errorf("redis down: %d %q", code, body)
	}
	if code, _, _ := get(t, w.url+"/rtrue"); code != 200 {
		t.Errorf("redis down with allow_degradation: %d", code)
	}
}

// A client that stops reading its response loses the connection after
// WriteTimeout instead of holding it and its buffers forever.
func TestWriteTimeoutClosesStalledClient(t *testing.T) {
	const size = 48 << 20 // far more than loopback socket buffers hold
	body := bytes.Repeat([]byte("x"), size)
	up := upstream(t, "big", func(w http.ResponseWriter, r *http.Request) { w.Write(body) })
	w := startGatewayWith(t, proxy.Options{WriteTimeout: 300 * time.Millisecond})
	w.load(t, map[string]string{"routes/1": `{"uri":"/big","upstream":{"type":"roundrobin","nodes":{"` + up + `":1}}}`})

	c, err := net.Dial("tcp", strings.TrimPrefix(w.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // deliberate: a client that reads nothing while the gateway writes
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, c)
	if err == nil && n >= size {
		t.Fatalf("read %d bytes and a clean end: the whole response arrived, want the connection cut", n)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("after %d bytes the connection is still open: %v", n, err)
	}
}
