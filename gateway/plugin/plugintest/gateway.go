package plugintest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/proxy"
)

// Gateway is the real engine on 127.0.0.1 with plugins from reg, and an
// upstream that echoes what it received.
type Gateway struct {
	URL      string
	Upstream string // host:port of the echo upstream
	g        *proxy.Gateway
	reg      *gateway.Registry
	cfg      *gateway.Config
}

// Echo is the upstream's answer: "<method> <request-uri>" then the request
// headers, one "name: value" per line, sorted.
func Echo(w http.ResponseWriter, r *http.Request) {
	var lines []string
	for k, vs := range r.Header {
		for _, v := range vs {
			lines = append(lines, k+": "+v)
		}
	}
	sort.Strings(lines)
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprintf(w, "%s %s\nhost: %s\n%s\n", r.Method, r.URL.RequestURI(), r.Host, strings.Join(lines, "\n"))
}

// Start runs a gateway and an upstream serving h (Echo if nil) until the
// test ends.
func Start(tb testing.TB, reg *gateway.Registry, h http.HandlerFunc) *Gateway {
	tb.Helper()
	if h == nil {
		h = Echo
	}
	up := httptest.NewServer(h)
	tb.Cleanup(up.Close)
	g := proxy.New(proxy.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go func() { _ = g.Serve(ln) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = g.Shutdown(ctx)
	})
	return &Gateway{URL: "http://" + ln.Addr().String(), Upstream: strings.TrimPrefix(up.URL, "http://"), g: g, reg: reg, cfg: gateway.NewConfig()}
}

// Load applies resources ("routes/1" → JSON; "$UPSTREAM" is replaced by the
// upstream's address) through the real pipeline: validate, compile, swap.
func (w *Gateway) Load(tb testing.TB, res map[string]string) {
	tb.Helper()
	var u gateway.Update
	for key, v := range res {
		kind, id, _ := strings.Cut(key, "/")
		v = strings.ReplaceAll(v, "$UPSTREAM", w.Upstream)
		u.Entries = append(u.Entries, gateway.Entry{Kind: gateway.Kind(kind), ID: id, Value: []byte(v)})
	}
	if errs := w.cfg.Apply(u, w.reg); len(errs) > 0 {
		tb.Fatalf("apply: %v", errs)
	}
	c, errs := gateway.Compile(w.cfg, w.reg)
	if len(errs) > 0 {
		tb.Fatalf("compile: %v", errs)
	}
	w.g.Load(c)
}

// Response is what a client received.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// Do sends a request; hdr is name, value pairs ("Host" sets the host).
func (w *Gateway) Do(tb testing.TB, method, path, body string, hdr ...string) Response {
	tb.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, w.URL+path, rd)
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return Response{resp.StatusCode, resp.Header, string(b)}
}
