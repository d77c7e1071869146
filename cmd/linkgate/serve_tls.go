//go:build !functiononly

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/internal/certmagic"
	"github.com/linkgate/linkgate/shortener/dynamodb"
	"github.com/linkgate/linkgate/shortener/httpapi"
)

// filesWatchInterval is how often --tls CERT,KEY files are looked at.
const filesWatchInterval = 10 * time.Second

// startHTTPS starts serve's HTTPS (--tls auto or CERT,KEY): srv serves
// --https-addr, whose Serve error goes to served, and a redirect server
// --http-addr (ACME HTTP-01, /healthz, 308 to https). It returns the
// cleartext listener (probed for readiness) and what stops the rest.
func startHTTPS(ctx context.Context, logger *slog.Logger, c serveConfig, srv *httpapi.Server, h *httpapi.Handler, served chan<- error) (net.Listener, func(), error) {
	tlsLn, err := net.Listen("tcp", c.https.addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen --https-addr: %w", err)
	}
	httpLn, err := net.Listen("tcp", c.https.httpAddr)
	if err != nil {
		tlsLn.Close()
		return nil, nil, fmt.Errorf("listen --http-addr: %w", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	stops := []func(){cancel}
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	fail := func(err error) (net.Listener, func(), error) {
		tlsLn.Close()
		httpLn.Close()
		stop()
		return nil, nil, err
	}
	challenge := func(*fasthttp.RequestCtx) bool { return false }
	var src interface{ TLSConfig() *tls.Config }
	if c.https.mode == "auto" {
		m, err := newACME(ctx, logger, c, h, httpLn.Addr().(*net.TCPAddr), tlsLn.Addr().(*net.TCPAddr))
		if err != nil {
			return fail(err)
		}
		stops = append(stops, m.Close)
		if err := m.Manage(ctx); err != nil {
			return fail(err)
		}
		src, challenge = m, m.FastHTTPChallenge
	} else {
		certFile, keyFile, err := certmagic.ParseFilesFlag(c.https.mode)
		if err != nil {
			return fail(fmt.Errorf("--tls: %w", err))
		}
		f, err := certmagic.NewFiles(certFile, keyFile, logger, nil)
		if err != nil {
			return fail(fmt.Errorf("--tls: %w", err))
		}
		go f.Watch(wctx, filesWatchInterval)
		src = f
		logger.Info("TLS certificate loaded", "cert", certFile, "names", f.Certificate().Leaf.DNSNames, "not_after", f.Certificate().Leaf.NotAfter)
	}
	go func() { served <- srv.ServeTLS(tlsLn, src.TLSConfig()) }()

	port := ""
	if p := tlsLn.Addr().(*net.TCPAddr).Port; p != 443 {
		port = fmt.Sprintf(":%d", p)
	}
	redirect := httpapi.NewRedirectServer(logger, h, c.server, port, challenge)
	go func() {
		if err := redirect.Serve(httpLn); err != nil {
			logger.Error("cleartext listener", "addr", httpLn.Addr().String(), "error", err)
		}
	}()
	stops = append(stops, func() {
		sctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
		defer cancel()
		if err := redirect.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			logger.Warn("shutdown of the cleartext listener", "error", err)
		}
	})
	logger.Info("HTTPS listening", "https_addr", tlsLn.Addr().String(), "http_addr", httpLn.Addr().String(), "tls", c.https.mode, "hsts", c.https.hsts)
	return httpLn, stop, nil
}

// newACME builds --tls auto's certificate manager: certificates for the
// configured domains (--domain, --public-url), ordered at start, and on
// demand at the first handshake of a domain h serves (the registry's:
// h.ServesName) only.
func newACME(ctx context.Context, logger *slog.Logger, c serveConfig, h *httpapi.Handler, httpAddr, tlsAddr *net.TCPAddr) (*certmagic.Manager, error) {
	names := configuredHosts(c)
	allowed := make(map[string]bool, len(names))
	for _, n := range names {
		allowed[n] = true
	}
	dir := c.https.acmeDir
	if dir == "" {
		dir = "certmagic"
		if path, ok := strings.CutPrefix(c.store, "pebble:"); ok {
			dir = filepath.Join(filepath.Dir(filepath.Clean(path)), "certmagic")
		}
	}
	// Instances on one DynamoDB table share certificates, accounts and
	// locks in its certificate table, so that they order one certificate
	// per domain (--acme-dir still chooses files).
	var storage certmagic.Storage
	if kind, table, _ := splitStore(c.store); kind == "dynamodb" && c.https.acmeDir == "" {
		s, err := dynamodb.Open(ctx, dynamodb.Options{Table: table, ManualVisits: true}) // for its client only

		if err != nil {
			return nil, fmt.Errorf("--tls auto: %w", err)
		}
		storage = dynamodb.NewCertStorage(s.Client(), dynamodb.CertOptions{Table: dynamodb.CertTable(table), Timeout: c.storeTimeout, Logger: logger})
		dir = "DynamoDB table " + dynamodb.CertTable(table)
	}
	host := ""
	if !httpAddr.IP.IsUnspecified() {
		host = httpAddr.IP.String()
	}
	m, err := certmagic.New(certmagic.Config{
		CA:         c.https.acmeCA,
		Email:      c.https.acmeEmail,
		CARoot:     c.https.acmeCARoot,
		Dir:        dir,
		Storage:    storage,
		Domains:    names,
		OrderRate:  c.https.orderRate,
		OrderBurst: c.https.orderBurst,
		Allow: func(ctx context.Context, name string) error {
			if !allowed[strings.ToLower(name)] && !h.ServesName(ctx, name) {
				return fmt.Errorf("%q is not a domain this server serves (--domain, or the registry)", name)
			}
			return nil
		},
		ListenHost: host,
		HTTPPort:   httpAddr.Port,
		TLSPort:    tlsAddr.Port,
		Logger:     logger,
	})
	if err != nil {
		return nil, fmt.Errorf("--tls auto: %w", err)
	}
	logger.Info("ACME", "ca", c.https.acmeCA, "domains", names, "dir", dir)
	return m, nil
}
