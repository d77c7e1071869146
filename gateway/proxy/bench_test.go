package proxy_test

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/basicauth"
	"github.com/linkgate/linkgate/gateway/plugin/cors"
	"github.com/linkgate/linkgate/gateway/plugin/faultinjection"
	gz "github.com/linkgate/linkgate/gateway/plugin/gzip"
	"github.com/linkgate/linkgate/gateway/plugin/iprestriction"
	"github.com/linkgate/linkgate/gateway/plugin/jwtauth"
	"github.com/linkgate/linkgate/gateway/plugin/keyauth"
	"github.com/linkgate/linkgate/gateway/plugin/limitconn"
	"github.com/linkgate/linkgate/gateway/plugin/limitcount"
	"github.com/linkgate/linkgate/gateway/plugin/limitreq"
	"github.com/linkgate/linkgate/gateway/plugin/opentelemetry"
	"github.com/linkgate/linkgate/gateway/plugin/prometheus"
	"github.com/linkgate/linkgate/gateway/plugin/proxyrewrite"
	"github.com/linkgate/linkgate/gateway/plugin/publicapi"
	"github.com/linkgate/linkgate/gateway/plugin/realip"
	"github.com/linkgate/linkgate/gateway/plugin/redirect"
	"github.com/linkgate/linkgate/gateway/plugin/redis"
	"github.com/linkgate/linkgate/gateway/plugin/requestid"
	"github.com/linkgate/linkgate/gateway/plugin/responserewrite"
	"github.com/linkgate/linkgate/gateway/plugin/trafficsplit"
	"github.com/linkgate/linkgate/gateway/proxy"
	"github.com/linkgate/linkgate/internal/testdep"
)

// Scenario 3 of make bench-gateway: what an API behind auth, a rate limit,
// CORS and request ids costs.
const scenario3 = `{"key-auth":{},"limit-req":{"rate":1e12,"burst":1e12,"key":"remote_addr","nodelay":true},"cors":{},"request-id":{},"prometheus":{}}`

// BenchmarkProxy drives the whole data plane over loopback TCP: client →
// gateway → fasthttp upstream answering "1234567890", for the seed's two
// scenarios and scenario 3; "chunked" has the upstream answer as
// make bench-gateway's nginx echo does, chunked, in one write.
// Allocations are the gateway's and the client's. cpu-µs/op is the
// process's CPU time (client, gateway and upstream) per request, which
// varies less than ns/op when other work shares the core.
func BenchmarkProxy(b *testing.B) {
	node := benchUpstream(b)
	chunked := chunkedUpstream(b)
	for _, sc := range []struct{ name, plugins, node string }{
		{"no-plugins", `{}`, node},
		{"no-plugins-chunked", `{}`, chunked},
		{"opentelemetry-off", `{"opentelemetry":{}}`, node},
		{"limit-count+prometheus", `{"limit-count":{"count":2000000000000,"time_window":60,"rejected_code":503,"key":"remote_addr"},"prometheus":{}}`, node},
		{"scenario3", scenario3, node},
	} {
		b.Run(sc.name, func(b *testing.B) {
			w := startGateway(b)
			w.load(b, map[string]string{"routes/1": `{"uri":"/hello","plugins":` + sc.plugins +
				`,"upstream":{"type":"roundrobin","nodes":{"` + sc.node + `":1}}}`,
				"consumers/jack": `{"username":"jack","plugins":{"key-auth":{"key":"auth-one"}}}`})
			c := &fasthttp.HostClient{Addr: w.url[len("http://"):], MaxConns: 64}
			b.ReportAllocs()
			cpu0 := testdep.CPUTime()
			b.RunParallel(func(pb *testing.PB) {
				req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				req.SetRequestURI(w.url + "/hello")
				req.Header.Set("apikey", "auth-one")
				for pb.Next() {
					if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 || len(resp.Body()) != 10 {
						b.Errorf("%v %d %q", err, resp.StatusCode(), resp.Body())
						return
					}
				}
			})
			b.ReportMetric(float64(testdep.CPUTime()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
		})
	}
}

// benchUpstream is a fasthttp upstream answering "1234567890".
func benchUpstream(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	up := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("1234567890") }}
	go func() { _ = up.Serve(ln) }()
	b.Cleanup(func() { _ = up.Shutdown() })
	return ln.Addr().String()
}

// chunkedUpstream answers every request (no body) with "1234567890",
// chunked, in one write, as nginx's echo_duplicate does.
func chunkedUpstream(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	answer := []byte("HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"a\r\n1234567890\r\n0\r\n\r\n")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					for { // the request's header, up to its empty line
						line, err := br.ReadSlice('\n')
						if err != nil {
							return
						}
						if len(line) <= 2 {
							break
						}
					}
					if _, err := c.Write(answer); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// benchAPI answers GET /bench with a small HTML page, through public-api
// (priority 501, the last access plugin): the upstream of BenchmarkPlugins.
type benchAPI struct{}

var benchPage = gateway.Reply{Status: 200, Body: []byte("<html><body>1234567890</body></html>\n"), ContentType: "text/html"}

func (benchAPI) APIs() []gateway.API {
	return []gateway.API{{Method: "GET", Path: "/bench", Serve: func(gateway.Ctx) gateway.Reply { return benchPage }}}
}

// BenchmarkPlugins is each plugin's cost per request in the engine itself,
// in memory (no network): every phase runs, and public-api answers in
// place of an upstream; subtract "none" (public-api alone) for the
// plugin's own cost. Allocations are the engine's and the plugin's.
func BenchmarkPlugins(b *testing.B) {
	log := slog.New(slog.DiscardHandler)
	jwt := jwtauth.New()
	reg := gateway.NewRegistry(limitcount.New(log, redis.NewPool()), limitreq.New(log, redis.NewPool()), limitconn.New(log, redis.NewPool()),
		prometheus.New(), keyauth.New(), basicauth.New(), jwt, proxyrewrite.New(), cors.New(), iprestriction.New(), realip.New(),
		requestid.New(0), responserewrite.New(), redirect.New(0), trafficsplit.New(), gz.New(), faultinjection.New(),
		publicapi.New(benchAPI{}), opentelemetry.New(opentelemetry.Options{Collector: otlpSink(b), BatchTimeout: time.Second}))
	consumers := map[string]string{
		"consumers/jack": `{"username":"jack","plugins":{"key-auth":{"key":"auth-one"},"basic-auth":{"username":"jack","password":"pw"},
			"jwt-auth":{"key":"user-key","secret":"my-secret-key"}}}`,
		"upstreams/1": `{"type":"roundrobin","nodes":{"127.0.0.1:1":1}}`,
	}
	token := "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJrZXkiOiJ1c2VyLWtleSIsImV4cCI6MTg3OTMxODU0MX0.fNtFJnNmJgzbiYmGB0Yjvm-l6A6M4jRV1l4mnVFSYjs"
	for _, tc := range []struct{ name, plugins string }{
		{"none", `{}`},
		{"key-auth", `{"key-auth":{}}`},
		{"basic-auth", `{"basic-auth":{}}`},
		{"jwt-auth", `{"jwt-auth":{"header":"x-jwt"}}`},
		{"limit-count", `{"limit-count":{"count":2000000000000,"time_window":60,"key":"remote_addr"}}`},
		{"limit-req", `{"limit-req":{"rate":1e12,"burst":1e12,"key":"remote_addr","nodelay":true}}`},
		{"limit-conn", `{"limit-conn":{"conn":1000000,"burst":0,"default_conn_delay":0.1,"key":"remote_addr"}}`},
		{"cors", `{"cors":{}}`},
		{"ip-restriction", `{"ip-restriction":{"whitelist":["10.0.0.0/8","127.0.0.0/8"]}}`},
		{"real-ip", `{"real-ip":{"source":"http_x_forwarded_for","trusted_addresses":["127.0.0.0/8"]}}`},
		{"request-id", `{"request-id":{}}`},
		{"response-rewrite", `{"response-rewrite":{"headers":{"X-Server":"linkgate"}}}`},
		{"response-rewrite-body", `{"response-rewrite":{"body":"new body\n"}}`},
		{"redirect", `{"redirect":{"http_to_https":true}}`},
		{"traffic-split", `{"traffic-split":{"rules":[{"match":[{"vars":[["arg_x","==","1"]]}],"weighted_upstreams":[{"upstream_id":"1"}]}]}}`},
		{"gzip", `{"gzip":{"types":"*","min_length":1}}`},
		{"redirect-uri", `{"redirect":{"uri":"$uri/new","ret_code":301}}`},
		{"fault-injection", `{"fault-injection":{"abort":{"http_status":403,"vars":[[["arg_fail","==","1"]]]}}}`},
		{"proxy-rewrite", `{"proxy-rewrite":{"uri":"/x","headers":{"X-A":"b"}}}`},
		{"prometheus", `{"prometheus":{}}`},
		{"opentelemetry-off", `{"opentelemetry":{}}`},
		{"opentelemetry-on", `{"opentelemetry":{"sampler":{"name":"always_on"}}}`},
		{"scenario3", scenario3},
	} {
		b.Run(tc.name, func(b *testing.B) {
			g := proxy.New(proxy.Options{})
			cfg := gateway.NewConfig()
			plugins := tc.plugins[:len(tc.plugins)-1]
			if plugins != "{" {
				plugins += ","
			}
			plugins += `"public-api":{"uri":"/bench"}}`
			res := map[string]string{"routes/1": `{"uri":"/hello","plugins":` + plugins + `}`}
			for k, v := range consumers {
				res[k] = v
			}
			var u gateway.Update
			for k, v := range res {
				kind, id := splitKey(k)
				u.Entries = append(u.Entries, gateway.Entry{Kind: kind, ID: id, Value: []byte(v)})
			}
			if errs := cfg.Apply(u, reg); len(errs) > 0 {
				b.Fatal(errs)
			}
			compiled, errs := gateway.Compile(cfg, reg)
			if len(errs) > 0 {
				b.Fatal(errs)
			}
			g.Load(compiled)
			var tmpl fasthttp.Request
			tmpl.SetRequestURI("/hello")
			tmpl.Header.SetHost("example.com")
			for _, h := range [][2]string{{"apikey", "auth-one"}, {"Authorization", "Basic amFjazpwdw=="}, {"Origin", "http://a.com"},
				{"X-Forwarded-For", "1.2.3.4"}, {"Accept-Encoding", "gzip"}, {"X-Jwt", token}} {
				tmpl.Header.Set(h[0], h[1])
			}
			var fc fasthttp.RequestCtx
			fc.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
			tmpl.CopyTo(&fc.Request)
			g.Handle(&fc)
			if want := map[string]int{"redirect": 301, "redirect-uri": 301}[tc.name]; fc.Response.StatusCode() != max(want, 200) {
				b.Fatalf("%s: %d %s", tc.name, fc.Response.StatusCode(), fc.Response.Body())
			}
			b.ReportAllocs()
			for b.Loop() {
				tmpl.CopyTo(&fc.Request)
				fc.Response.Reset()
				g.Handle(&fc)
			}
		})
	}
}

// otlpSink is an OTLP/HTTP collector that takes every export and keeps nothing.
func otlpSink(b *testing.B) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

func splitKey(k string) (gateway.Kind, string) {
	for i := range k {
		if k[i] == '/' {
			return gateway.Kind(k[:i]), k[i+1:]
		}
	}
	return gateway.Kind(k), ""
}
