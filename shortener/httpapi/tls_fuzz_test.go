package httpapi_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/certmagic"
	"github.com/linkgate/linkgate/internal/testcert"
	"github.com/linkgate/linkgate/internal/tlsfuzz"
	"github.com/linkgate/linkgate/shortener/httpapi"
)

// FuzzServeTLSClientHello: malformed ClientHellos and real handshakes
// with fuzzed SNI, ALPN and bytes after them, against serve's HTTPS
// listener as cmd/linkgate wires it, with both certificate sources: files
// (every handshake completes, so the ALPN hand-over to HTTP/1.1 through
// internal/connqueue, to HTTP/2, and the end of an acme-tls/1 handshake
// run) and ACME on demand (every SNI goes through the allow-check, which
// refuses it: no order). No panic; the server closes every connection
// within its timeouts; no goroutine is left in the connection's code.
func FuzzServeTLSClientHello(f *testing.F) {
	h, _ := newHandler(f, setup{})
	const timeout = 200 * time.Millisecond
	srv := httpapi.NewServer(slog.New(slog.DiscardHandler), h, httpapi.ServerConfig{
		HandshakeTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, IdleTimeout: timeout})
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	dir := f.TempDir()
	ca := testcert.NewCA(f, "fuzz CA")
	_, certFile, keyFile := testcert.WriteFiles(f, dir, ca, ca.Issue(f, testcert.Options{DNS: []string{"sho.test"}}))
	files, err := certmagic.NewFiles(certFile, keyFile, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		f.Fatal(err)
	}
	refused := errors.New("not a configured domain")
	acme, err := certmagic.New(certmagic.Config{CA: "https://127.0.0.1:1/directory", Dir: dir + "/acme",
		Allow: func(context.Context, string) error { return refused }})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(acme.Close)
	var targets []tlsfuzz.Target
	for _, src := range []interface{ TLSConfig() *tls.Config }{files, acme} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			f.Fatal(err)
		}
		go srv.ServeTLS(ln, src.TLSConfig())
		targets = append(targets, tlsfuzz.Target{Addr: ln.Addr().String(), Bound: timeout, Busy: []string{
			"httpapi.(*Server).handshake", "internal/h2.(*Server).ServeConn", "fasthttp.(*Server).serveConn"}})
	}
	tlsfuzz.Seed(f, "sho.test")
	f.Fuzz(func(t *testing.T, hello []byte, sni, alpn string, payload []byte, stall bool) {
		for _, tg := range targets {
			tg.Run(t, hello, sni, alpn, payload, stall)
		}
	})
}
