package proxy_test

import (
	"net"
	"testing"

	"github.com/valyala/fasthttp"
)

// BenchmarkProxy drives the whole data plane over loopback TCP: client →
// gateway → fasthttp upstream answering "1234567890", for the seed's two
// scenarios. Allocations are the gateway's and the client's.
func BenchmarkProxy(b *testing.B) {
	upLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	up := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("1234567890") }}
	go func() { _ = up.Serve(upLn) }()
	defer up.Shutdown()
	node := upLn.Addr().String()
	scenarios := map[string]string{
		"no-plugins":             `{}`,
		"limit-count+prometheus": `{"limit-count":{"count":2000000000000,"time_window":60,"rejected_code":503,"key":"remote_addr"},"prometheus":{}}`,
	}
	for _, name := range []string{"no-plugins", "limit-count+prometheus"} {
		b.Run(name, func(b *testing.B) {
			w := startGateway(b)
			w.load(b, map[string]string{"routes/1": `{"uri":"/hello","plugins":` + scenarios[name] +
				`,"upstream":{"type":"roundrobin","nodes":{"` + node + `":1}}}`})
			c := &fasthttp.HostClient{Addr: w.url[len("http://"):], MaxConns: 64}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				req.SetRequestURI(w.url + "/hello")
				for pb.Next() {
					if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 {
						b.Errorf("%v %d", err, resp.StatusCode())
						return
					}
				}
			})
		})
	}
}
