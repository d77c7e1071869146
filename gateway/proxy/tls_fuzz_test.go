package proxy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/linkgate/linkgate/gateway/certs"
	"github.com/linkgate/linkgate/gateway/proxy"
	"github.com/linkgate/linkgate/internal/certmagic"
	"github.com/linkgate/linkgate/internal/tlsfuzz"
)

// FuzzGatewayTLSClientHello: malformed ClientHellos and real handshakes
// with fuzzed SNI, ALPN and bytes after them, against the gateway's TLS
// listener as `linkgate gateway --acme` wires it: an ssl resource for
// test.com and *.test.com (those handshakes complete, so the ALPN
// hand-over to HTTP/1.1 through internal/connqueue and to HTTP/2 run),
// every other SNI going to ACME on demand, whose allow-check refuses it
// (no order). No panic; the gateway closes every connection within its
// timeouts; no goroutine is left in the connection's code.
func FuzzGatewayTLSClientHello(f *testing.F) {
	refused := errors.New("no route asks for a certificate for this name")
	acme, err := certmagic.New(certmagic.Config{CA: "https://127.0.0.1:1/directory", Dir: f.TempDir(),
		Allow: func(context.Context, string) error { return refused }})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(acme.Close)
	const timeout = 200 * time.Millisecond
	w := startTLSGateway(f, proxy.Options{Certs: certs.NewManagerWithFallback(nil, acme.TLSConfig()),
		HandshakeTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, IdleTimeout: timeout})
	w.load(f, map[string]string{"routes/1": `{"uri":"/x","upstream":{"type":"roundrobin","nodes":{"` + upstream(f, "u1", nil) + `":1}}}`})
	tg := tlsfuzz.Target{Addr: w.tlsAddr, Bound: timeout, Busy: []string{
		"proxy.(*Gateway).handshake", "internal/h2.(*Server).ServeConn", "fasthttp.(*Server).serveConn"}}
	tlsfuzz.Seed(f, "www.test.com")
	f.Fuzz(func(t *testing.T, hello []byte, sni, alpn string, payload []byte, stall bool) {
		tg.Run(t, hello, sni, alpn, payload, stall)
	})
}
