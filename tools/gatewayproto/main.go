// Command gatewayproto is the bare reverse proxy that linkgate gateway's
// data plane is measured against (scripts/bench-gateway.sh): a fasthttp
// server whose handler adds the headers the gateway and the nginx anchor
// send upstream and passes the request to one fasthttp.HostClient. No
// routing, plugins, retries, health checks or timeouts: the difference
// between this and `linkgate gateway` is what our own layers cost.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"strconv"

	"github.com/valyala/fasthttp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	upstream := flag.String("upstream", "127.0.0.1:1980", "upstream host:port")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintln(os.Stdout, ln.Addr())
	c := &fasthttp.HostClient{Addr: *upstream, MaxConns: 4096,
		NoDefaultUserAgentHeader: true, DisableHeaderNamesNormalizing: true, DisablePathNormalizing: true}
	port := []byte(strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	s := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ip := ctx.RemoteIP().String()
		h := &ctx.Request.Header
		h.Set("X-Real-IP", ip)
		h.Set("X-Forwarded-For", ip)
		h.Set("X-Forwarded-Proto", "http")
		h.SetBytesV("X-Forwarded-Host", ctx.Host())
		h.SetBytesV("X-Forwarded-Port", port)
		if err := c.Do(&ctx.Request, &ctx.Response); err != nil {
			ctx.Error(err.Error(), fasthttp.StatusBadGateway)
		}
	}, NoDefaultContentType: true, Name: "linkgate"}
	log.Fatal(s.Serve(ln))
}
