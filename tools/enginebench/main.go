// Command enginebench serves a trivial redirect (302 with a Location) with
// either net/http or fasthttp, to compare the two engines against nginx's
// `return 302` under the same wrk load (scripts/bench-engines.sh). It is the
// evidence behind the choice of HTTP engine recorded in docs/.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/valyala/fasthttp"
)

func main() {
	engine := flag.String("engine", "fasthttp", "nethttp or fasthttp")
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintln(os.Stdout, ln.Addr())
	const target = "https://aws.amazon.com/ec2/graviton/"
	switch *engine {
	case "nethttp":
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Location"] = []string{target}
			w.WriteHeader(http.StatusFound)
		})
		log.Fatal(http.Serve(ln, h))
	case "fasthttp":
		loc := []byte(target)
		s := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.Response.Header.SetBytesV("Location", loc)
			ctx.SetStatusCode(fasthttp.StatusFound)
		}, NoDefaultContentType: true}
		log.Fatal(s.Serve(ln))
	default:
		log.Fatalf("unknown engine %q", *engine)
	}
}
