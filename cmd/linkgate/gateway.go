//go:build !functiononly

package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/admin"
	"github.com/linkgate/linkgate/gateway/bolt"
	"github.com/linkgate/linkgate/gateway/certs"
	"github.com/linkgate/linkgate/gateway/control"
	"github.com/linkgate/linkgate/gateway/etcd"
	"github.com/linkgate/linkgate/gateway/plugin/apibreaker"
	"github.com/linkgate/linkgate/gateway/plugin/basicauth"
	"github.com/linkgate/linkgate/gateway/plugin/consumerrestriction"
	"github.com/linkgate/linkgate/gateway/plugin/cors"
	"github.com/linkgate/linkgate/gateway/plugin/faultinjection"
	"github.com/linkgate/linkgate/gateway/plugin/gzip"
	"github.com/linkgate/linkgate/gateway/plugin/httplogger"
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
	"github.com/linkgate/linkgate/gateway/plugin/uriblocker"
	"github.com/linkgate/linkgate/gateway/proxy"
	"github.com/linkgate/linkgate/gateway/router"
	"github.com/linkgate/linkgate/gateway/stream"
	"github.com/linkgate/linkgate/gateway/yamlfile"
	lgcert "github.com/linkgate/linkgate/internal/certmagic"
	"github.com/linkgate/linkgate/internal/cli"
)

// gatewayConfig is everything `linkgate gateway` is configured with: its
// flags, and what validate derives from them.
type gatewayConfig struct {
	listen, prometheusListen, controlListen, store, adminVersion, router string
	adminListen                                                          string
	serverHeader, listenTLS, sslKeySalt, trustedCA                       string
	adminKeys, viewerKeys, allowAdmin                                    string
	logFormat, logLevel                                                  string
	otelCollector, otelResource, otelTraceIDSource                       string
	maxBodySize, httpsPort, requestIDMachine                             int
	showUpstreamStatus                                                   bool
	wsMaxDuration, shutdownTimeout                                       time.Duration
	acme                                                                 bool
	acmeCA, acmeEmail, acmeCARoot, acmeSNIs                              string
	listenStream                                                         listFlag
	streamMaxConns                                                       int
	streamIdleTimeout                                                    time.Duration

	// Set by validate.
	allow      []netip.Prefix
	routerMode router.Mode
	keys       *gateway.KeyCipher // nil: ssl private keys stored as given
	roots      *x509.CertPool     // nil: the system roots
	otelAttrs  map[string]string  // --otel-resource
	// Set from the environment by runGateway: what $env:// references in
	// plugin configurations resolve to (nil: left as written).
	secrets gateway.Secrets
}

func init() {
	commands["gateway"] = command{"run the APISIX-compatible API gateway", runGateway}
}

const gatewayDescription = `Run the APISIX 2.14-compatible API gateway: admin API under /apisix/admin/ on the
data listener, routes and plugins from the config store, prometheus metrics on
--prometheus-listen at /apisix/prometheus/metrics. SIGINT/SIGTERM stop
accepting and drain requests in flight for up to --shutdown-timeout.`

func runGateway(ctx context.Context, args []string, env cli.Env) error {
	fs := cli.NewFlagSet("gateway", "linkgate gateway [flags]", gatewayDescription, env.Stderr)
	var c gatewayConfig
	c.register(fs)
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("gateway takes no arguments")
	}
	if err := c.validate(); err != nil {
		return err
	}
	c.secrets = gateway.EnvSecrets(env.Getenv) // $env:// in plugin configurations
	logger, err := cli.NewLogger(env.Stderr, c.logFormat, c.logLevel)
	if err != nil {
		return err
	}
	return serveGateway(ctx, logger, c, env.Getenv)
}

// register adds the gateway's flags to fs, with c's fields as their values.
func (c *gatewayConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.listen, "listen", ":9080", "address of the data listener (and the admin API)")
	fs.StringVar(&c.adminKeys, "admin-key", "", "admin API key(s), comma-separated; with none the admin API refuses every call")
	fs.StringVar(&c.viewerKeys, "viewer-key", "", "read-only admin API key(s), comma-separated")
	fs.StringVar(&c.allowAdmin, "allow-admin", "127.0.0.0/24", "client networks (CIDR or IP) allowed to reach the admin API, comma-separated")
	fs.StringVar(&c.prometheusListen, "prometheus-listen", "127.0.0.1:9091", `address of the prometheus exporter ("" disables it)`)
	fs.StringVar(&c.controlListen, "control-listen", "", `address of the control API (/v1/routes, /v1/config; APISIX uses 127.0.0.1:9090; "" disables it)`)
	fs.StringVar(&c.store, "config-store", "bolt:data/gateway.db", "config store: bolt:PATH, etcd://[USER@]HOST:PORT[,HOST:PORT][?prefix=/apisix] (etcds:// over TLS, with &ca=FILE&cert=FILE&key=FILE; the password from password_file=FILE or $LINKGATE_ETCD_PASSWORD), or file:PATH (APISIX's standalone apisix.yaml, reloaded when it changes; the admin API replaces it only whole: PUT /apisix/admin/configs)")
	fs.BoolVar(&c.showUpstreamStatus, "show-upstream-status", false, "send X-APISIX-Upstream-Status on every proxied response, not only after a 5xx (APISIX's show_upstream_status_in_response_header)")
	fs.StringVar(&c.router, "router", "radixtree_uri", "route matching, as APISIX's apisix.router.http: radixtree_uri, radixtree_host_uri or radixtree_uri_with_parameter")
	fs.StringVar(&c.adminVersion, "admin-api-version", "v2", "admin API envelopes: v2 (APISIX 2.14) or v3 (APISIX 3.x)")
	fs.StringVar(&c.adminListen, "admin-listen", "", `address of the admin API's own listener, or "data" for --listen's (default: data with --admin-api-version v2, as APISIX 2.x; :9180 with v3, as APISIX 3.x)`)
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json (durations as Go writes them, \"10s\", in both)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long to drain requests in flight on SIGINT/SIGTERM")
	fs.StringVar(&c.serverHeader, "server-header", "linkgate", `Server header on proxied responses ("" keeps the upstream's)`)
	fs.IntVar(&c.maxBodySize, "max-body-size", 0, "largest request body proxied, in bytes (0: no limit, as APISIX's client_max_body_size; bodies stream)")
	fs.StringVar(&c.listenTLS, "listen-tls", ":9443", `address of the TLS listener (HTTP/1.1 and HTTP/2, certificates from the ssl resources; "" disables it)`)
	fs.StringVar(&c.sslKeySalt, "ssl-key-encrypt-salt", gateway.DefaultKeySalt, `16 bytes encrypting ssl private keys at rest, as APISIX's key_encrypt_salt (its default); "" stores them as given`)
	fs.StringVar(&c.trustedCA, "ssl-trusted-certificate", "", `PEM file of the CAs that verify TLS servers the gateway is a client of: redis with redis_ssl_verify (APISIX's apisix.ssl.ssl_trusted_certificate; "" uses the system roots)`)
	fs.IntVar(&c.httpsPort, "https-port", 0, "port the redirect plugin's http_to_https sends clients to (0: the --listen-tls port, else 443)")
	fs.DurationVar(&c.wsMaxDuration, "websocket-max-duration", 0, "longest a WebSocket tunnel stays open (0: no limit; an idle one closes after its route's read timeout, 60s by default)")
	fs.IntVar(&c.requestIDMachine, "request-id-machine", 0, "this node's snowflake data machine id (0-4095) for request-id; distinct per node")
	fs.BoolVar(&c.acme, "acme", false, `automatic HTTPS: certificates by ACME for the hosts of routes labelled acme: "true" and for --acme-sni, kept in the config store (etcd: shared by the cluster); an ssl resource wins for its SNIs`)
	fs.StringVar(&c.acmeCA, "acme-ca", lgcert.LetsEncrypt, "ACME directory URL (with --acme)")
	fs.StringVar(&c.acmeEmail, "acme-email", "", "ACME account contact e-mail (with --acme)")
	fs.StringVar(&c.acmeCARoot, "acme-ca-root", "", `PEM file of the roots to trust for the ACME CA's HTTPS, for a private or test CA (with --acme; "" uses the system's)`)
	fs.StringVar(&c.acmeSNIs, "acme-sni", "", "names to get certificates for from the start, comma-separated (with --acme)")
	fs.Var(&c.listenStream, "listen-stream", `address of a stream (L4) proxy listener serving the stream routes; tls://ADDR terminates TLS with the ssl resources (stream routes' sni); repeatable (APISIX's stream_proxy.tcp)`)
	fs.IntVar(&c.streamMaxConns, "stream-max-conns", 10000, "most stream proxy connections at once; one more is closed when accepted")
	fs.DurationVar(&c.streamIdleTimeout, "stream-idle-timeout", 10*time.Minute, "a stream connection idle both ways this long is closed, unless its upstream's timeout.read says otherwise (nginx's proxy_timeout)")
	fs.StringVar(&c.otelCollector, "otel-collector", "127.0.0.1:4318", "where the opentelemetry plugin exports spans: host:port or http(s)://URL (OTLP/HTTP), grpc://host:port (OTLP/gRPC)")
	fs.StringVar(&c.otelResource, "otel-resource", "", "resource attributes of the exported spans, key=value comma-separated (service.name defaults to APISIX)")
	fs.StringVar(&c.otelTraceIDSource, "otel-trace-id-source", "random", "trace id of a new trace: random, or x-request-id (the request's X-Request-Id when it is 32 hex digits)")
}

// validate checks the flags and derives what the gateway is built with
// from them; every error is a usage error.
func (c *gatewayConfig) validate() error {
	for _, s := range splitList(c.allowAdmin) {
		p, err := gateway.ParseAddrOrPrefix(s)
		if err != nil {
			return cli.Usagef("--allow-admin %q: %v", s, err)
		}
		c.allow = append(c.allow, p)
	}
	var ok bool
	if c.routerMode, ok = router.ParseMode(c.router); !ok {
		return cli.Usagef("--router must be radixtree_uri, radixtree_host_uri or radixtree_uri_with_parameter")
	}
	switch {
	case c.adminVersion != "v2" && c.adminVersion != "v3":
		return cli.Usagef("--admin-api-version must be v2 or v3")
	case c.adminListen == "" && c.adminVersion == "v3":
		c.adminListen = ":9180"
	case c.adminListen == "":
		c.adminListen = "data"
	}
	switch {
	case c.requestIDMachine < 0 || c.requestIDMachine > 4095:
		return cli.Usagef("--request-id-machine must be 0-4095")
	case c.shutdownTimeout < 0:
		return cli.Usagef("--shutdown-timeout must not be negative")
	case c.wsMaxDuration < 0:
		return cli.Usagef("--websocket-max-duration must not be negative")
	case c.streamMaxConns < 1:
		return cli.Usagef("--stream-max-conns must be at least 1")
	case c.streamIdleTimeout <= 0:
		return cli.Usagef("--stream-idle-timeout must be positive")
	}
	switch {
	case c.acme && c.listenTLS == "":
		return cli.Usagef("--acme needs the TLS listener (--listen-tls)")
	case !c.acme && c.acmeSNIs != "":
		return cli.Usagef("--acme-sni needs --acme")
	}
	if c.otelTraceIDSource != "random" && c.otelTraceIDSource != "x-request-id" {
		return cli.Usagef("--otel-trace-id-source must be random or x-request-id")
	}
	for _, kv := range splitList(c.otelResource) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return cli.Usagef("--otel-resource %q: want key=value", kv)
		}
		if c.otelAttrs == nil {
			c.otelAttrs = map[string]string{}
		}
		c.otelAttrs[k] = v
	}
	var err error
	if c.roots, err = loadRoots(c.trustedCA); err != nil {
		return cli.Usagef("--ssl-trusted-certificate: %v", err)
	}
	if c.keys, err = gateway.NewKeyCipher(c.sslKeySalt); err != nil {
		return cli.Usagef("--ssl-key-encrypt-salt: %v", err)
	}
	return nil
}

// loadRoots reads a PEM file of CA certificates; "" is nil, the system roots.
func loadRoots(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", file)
	}
	return roots, nil
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// splitList splits a comma-separated flag value.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// gatewayListeners are the gateway's listeners; nil ones (all but data)
// are disabled.
type gatewayListeners struct {
	data, tls, prometheus, control net.Listener
	admin                          net.Listener // nil: the admin API is on data
	stream, streamTLS              []net.Listener
}

// listenGateway opens every listener c names, or none.
func listenGateway(c gatewayConfig) (l gatewayListeners, err error) {
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	// The data listener is never disabled: "" is a free port.
	open := func(addr, what string) (net.Listener, error) {
		if addr == "" && what != "" {
			return nil, nil
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("gateway: %s%w", what, err)
		}
		return ln, nil
	}
	if l.tls, err = open(c.listenTLS, "TLS listener: "); err != nil {
		return l, err
	}
	if l.data, err = open(c.listen, ""); err != nil {
		return l, err
	}
	if l.prometheus, err = open(c.prometheusListen, "prometheus: "); err != nil {
		return l, err
	}
	if l.control, err = open(c.controlListen, "control: "); err != nil {
		return l, err
	}
	for _, a := range c.listenStream {
		a, withTLS := strings.CutPrefix(a, "tls://")
		ln, err := open(a, "stream listener: ")
		if err != nil {
			return l, err
		}
		if withTLS {
			l.streamTLS = append(l.streamTLS, ln)
		} else {
			l.stream = append(l.stream, ln)
		}
	}
	if c.adminListen != "data" {
		l.admin, err = open(c.adminListen, "admin API: ")
	}
	return l, err
}

func (l gatewayListeners) close() {
	for _, ln := range slices.Concat([]net.Listener{l.data, l.tls, l.prometheus, l.control, l.admin}, l.stream, l.streamTLS) {
		if ln != nil {
			ln.Close()
		}
	}
}

// streamAddrs lists the stream listeners' addresses, tls:// for TLS ones.
func streamAddrs(l gatewayListeners) string {
	var out []string
	for _, ln := range l.stream {
		out = append(out, addr(ln))
	}
	for _, ln := range l.streamTLS {
		out = append(out, "tls://"+addr(ln))
	}
	return strings.Join(out, ",")
}

// addr is ln's address, or "" for a disabled listener.
func addr(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}

// gatewayApp is what `linkgate gateway` runs over a config store: every
// part built by newGateway with its dependencies, none assigned later.
type gatewayApp struct {
	admin    http.Handler // the admin API, served on the data listener unless it has its own
	store    gateway.Store
	prefix   string // of the store's keys, as admin envelopes show them
	proxy    *proxy.Gateway
	stream   *stream.Proxy // the stream routes' L4 proxy
	reloader *gateway.Reloader
	metrics  *prometheus.Factory
	redis    *redis.Pool
	otel     *opentelemetry.Factory
}

// newGateway builds the gateway over store: the plugins, the admin API,
// the proxy and the reloader that feeds it the store's configuration.
func newGateway(logger *slog.Logger, c gatewayConfig, store gateway.Store, prefix string, acme *gatewayACME) *gatewayApp {
	metrics := prometheus.NewWithOptions(prometheus.Options{V3: c.adminVersion == "v3"})
	redisPool := redis.NewPoolWithRoots(c.roots)
	reg := newRegistry(logger, c, metrics, redisPool)
	readOnly := ""
	var standalone admin.Standalone
	if s, ok := store.(*yamlfile.Store); ok {
		readOnly, standalone = yamlfile.ErrReadOnly.Error(), s
	}
	adminAPI := admin.NewHandler(logger, store, reg, admin.Options{
		AdminKeys: splitList(c.adminKeys), ViewerKeys: splitList(c.viewerKeys), AllowAdmin: c.allow, V3: c.adminVersion == "v3", Prefix: prefix,
		ReadOnly: readOnly, Standalone: standalone, Stream: len(c.listenStream) > 0,
	})
	onData := adminAPI
	if c.adminListen != "data" {
		onData = nil // served on its own listener
	}
	opts := proxy.Options{Logger: logger, Admin: onData, ServerHeader: c.serverHeader, MaxBodySize: c.maxBodySize, Router: c.routerMode,
		ShowUpstreamStatus: c.showUpstreamStatus, ConsumerHeaders: c.adminVersion == "v3", Certs: certs.NewManager(nil), WebSocketMaxDuration: c.wsMaxDuration}
	if acme != nil {
		opts.Certs = certs.NewManagerWithFallback(nil, acme.m.TLSConfig())
		opts.ACMEChallenge = acme.m.FastHTTPChallenge
	}
	gw := proxy.New(opts)
	streamTLS := opts.Certs.Config()
	streamTLS.NextProtos = nil // no ALPN: the bytes are the upstream's business
	l4 := stream.New(stream.Options{Logger: logger.With("component", "stream"), MaxConns: c.streamMaxConns,
		IdleTimeout: c.streamIdleTimeout, TLS: streamTLS})
	// Config pipeline: store updates → validate → compile → atomic swap.
	reloader := gateway.NewReloader(reg, logger, func(c *gateway.Compiled) {
		gw.Load(c)
		l4.Load(c)
		if acme != nil {
			hosts := c.ACMEHosts()
			acme.hosts.Store(&hosts)
		}
		idx := make(map[string]int64, len(c.ModifiedIndexes))
		for k, v := range c.ModifiedIndexes {
			if k == gateway.KindSSL {
				k = "ssls" // APISIX's metric key
			}
			idx[string(k)] = v
		}
		// One watch serves every kind: the revision it has reached is both
		// APISIX's global-rules prev_index and its X-Etcd-Index.
		idx["prev_index"], idx["x_etcd_index"] = c.Revision, c.Revision
		metrics.SetModifyIndexes(idx)
		logger.Debug("config loaded", "revision", c.Revision, "routes", len(c.Routes))
	})
	metrics.Register(reloadCollector{reloader})
	otel, _ := reg.Get(opentelemetry.Name)
	return &gatewayApp{admin: adminAPI, store: store, prefix: prefix, proxy: gw, stream: l4, reloader: reloader, metrics: metrics, redis: redisPool,
		otel: otel.(*opentelemetry.Factory)}
}

// prometheusHandler serves the exporter: the plugin's metrics, the
// proxy's connection gauges and whether the store is reachable.
func (a *gatewayApp) prometheusHandler() http.Handler {
	reach := func() bool { return true }
	if r, ok := a.store.(gateway.Reachability); ok {
		reach = r.Reachable
	}
	return a.metrics.Handler(func() prometheus.ServerStats {
		s := a.proxy.Stats()
		return prometheus.ServerStats{Active: s.Active, Accepted: s.Accepted, Handled: s.Handled,
			Reading: s.Reading, Writing: s.Writing, Waiting: s.Waiting, Requests: s.Requests, WebSockets: s.WebSockets}
	}, reach)
}

// serveGateway runs the gateway until ctx ends, then drains it for up to
// c.shutdownTimeout.
func serveGateway(ctx context.Context, logger *slog.Logger, c gatewayConfig, getenv func(string) string) error {
	store, prefix, err := openGatewayStore(ctx, c.store, getenv, logger)
	if err != nil {
		return err
	}
	defer store.Close()
	lns, err := listenGateway(c)
	if err != nil {
		return err
	}
	defer lns.close()
	if c.httpsPort == 0 && lns.tls != nil {
		c.httpsPort = lns.tls.Addr().(*net.TCPAddr).Port
	}
	if len(splitList(c.adminKeys)) == 0 {
		logger.Warn("no --admin-key: the admin API refuses every call")
	}
	var acme *gatewayACME
	if c.acme {
		if acme, err = newGatewayACME(logger, c, store, lns); err != nil {
			return err
		}
		defer acme.close()
	}
	app := newGateway(logger, c, store, prefix, acme)
	defer app.redis.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	loaded := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	wg.Go(func() {
		err := app.reloader.Run(ctx, store, func() { once.Do(func() { close(loaded) }) })
		if err != nil && ctx.Err() == nil {
			logger.Error("config store watch ended", "err", err)
		}
	})
	select {
	case <-loaded:
	case <-time.After(5 * time.Second):
		logger.Warn("config store not loaded after 5s; serving an empty configuration until it is")
	case <-ctx.Done():
	}

	if acme != nil {
		// Orders (or loads) --acme-sni's certificates in the background;
		// a CA that does not answer is retried while the gateway serves.
		if err := acme.m.Manage(ctx); err != nil {
			return err
		}
	}
	errc := make(chan error, 4+len(lns.stream)+len(lns.streamTLS))
	go func() { errc <- app.proxy.Serve(lns.data) }()
	for _, ln := range lns.stream {
		go func() { errc <- app.stream.Serve(ln) }()
	}
	for _, ln := range lns.streamTLS {
		go func() { errc <- app.stream.ServeTLS(ln) }()
	}
	if lns.tls != nil {
		go func() { errc <- app.proxy.ServeTLS(lns.tls) }()
	}
	var servers []*http.Server
	if lns.prometheus != nil {
		servers = append(servers, serveHTTP(lns.prometheus, app.prometheusHandler(), errc))
	}
	if lns.control != nil {
		servers = append(servers, serveHTTP(lns.control, control.NewHandler(app.reloader, store, prefix), errc))
	}
	adminLn := lns.data
	if lns.admin != nil {
		h := app.admin
		if c.serverHeader != "" {
			h = withServerHeader(c.serverHeader, h) // as on the data listener
		}
		servers = append(servers, serveHTTP(lns.admin, h, errc))
		adminLn = lns.admin
	}
	logger.Info("gateway listening", "addr", addr(lns.data), "prometheus", addr(lns.prometheus), "control", addr(lns.control), "tls", addr(lns.tls), "admin", addr(adminLn), "stream", streamAddrs(lns), "store", c.store, "admin_api", c.adminVersion)
	// Any answer of the admin API (its 401 included) shows the gateway serves.
	sd := notifyReady(logger, "gateway on "+addr(lns.data)+", config store "+c.store, probeHTTP(adminLn.Addr(), "/apisix/admin/", 0))
	defer sd.Stopping()

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sd.Stopping()
	logger.Info("shutting down: draining requests in flight", "timeout", c.shutdownTimeout)
	shutCtx, done := context.WithTimeout(context.Background(), c.shutdownTimeout)
	defer done()
	for _, srv := range servers {
		_ = srv.Shutdown(shutCtx)
	}
	app.stream.Close() // a stream connection has no request to wait for
	if serr := app.proxy.Shutdown(shutCtx); err == nil && serr != nil {
		err = fmt.Errorf("gateway: shutdown: %w", serr)
	}
	if oerr := app.otel.Shutdown(shutCtx); oerr != nil {
		logger.Warn("opentelemetry: spans not exported at shutdown", "err", oerr)
	}
	cancel()
	wg.Wait()
	if err == nil {
		logger.Info("stopped")
	}
	return err
}

// gatewayACME is the gateway's automatic HTTPS (--acme): certmagic's
// manager over the config store, and the names it may order certificates
// for — --acme-sni, and the hosts of the routes labelled acme: "true" in
// the configuration in force.
type gatewayACME struct {
	m      *lgcert.Manager
	static map[string]bool
	hosts  atomic.Pointer[map[string]bool]
	close  func()
}

// newGatewayACME builds the manager: its storage is the config store's
// (etcd: shared by every gateway of the cluster, so one of them orders a
// name and all serve it; bolt or file: certmagic's files in an acme
// directory beside the store), its challenges are answered on the data
// listener (HTTP-01) and the TLS listener (TLS-ALPN-01).
func newGatewayACME(logger *slog.Logger, c gatewayConfig, store gateway.Store, lns gatewayListeners) (*gatewayACME, error) {
	a := &gatewayACME{static: map[string]bool{}, close: func() {}}
	a.hosts.Store(&map[string]bool{})
	var storage lgcert.Storage
	switch s := store.(type) {
	case *etcd.Store:
		cs := s.CertStorage(etcd.CertOptions{})
		storage, a.close = cs, func() { cs.Close() }
	default:
		_, path, _ := strings.Cut(c.store, ":")
		storage = lgcert.FileStorage(filepath.Join(filepath.Dir(path), "acme"))
	}
	snis := splitList(c.acmeSNIs)
	for _, n := range snis {
		a.static[strings.ToLower(n)] = true
	}
	m, err := lgcert.New(lgcert.Config{
		CA: c.acmeCA, Email: c.acmeEmail, CARoot: c.acmeCARoot, Storage: storage, Domains: snis,
		Allow:    a.allow,
		HTTPPort: lns.data.Addr().(*net.TCPAddr).Port, TLSPort: lns.tls.Addr().(*net.TCPAddr).Port,
		Logger: logger.With("component", "acme"),
	})
	if err != nil {
		a.close()
		return nil, cli.Usagef("--acme: %v", err)
	}
	a.m = m
	stop := a.close
	a.close = func() { m.Close(); stop() }
	return a, nil
}

// errNotACMEHost refuses a handshake's name that neither --acme-sni nor a
// route asks a certificate for: no order is placed.
var errNotACMEHost = errors.New("no route asks a certificate for this name (label acme: \"true\") and it is not in --acme-sni")

// allow is the on-demand check: it runs before any order.
func (a *gatewayACME) allow(_ context.Context, name string) error {
	name = strings.ToLower(name)
	if a.static[name] || (*a.hosts.Load())[name] {
		return nil
	}
	return fmt.Errorf("%s: %w", name, errNotACMEHost)
}

// newRegistry returns the gateway's plugins, configured by c's flags, and
// c.keys for the ssl resources' private keys.
func newRegistry(logger *slog.Logger, c gatewayConfig, metrics *prometheus.Factory, redisPool *redis.Pool) *gateway.Registry {
	jwt := jwtauth.NewWithOptions(jwtauth.Options{V3: c.adminVersion == "v3"})
	return gateway.NewRegistryWithOptions(gateway.RegistryOptions{Keys: c.keys, Secrets: c.secrets},
		limitcount.NewWithOptions(logger, redisPool, limitcount.Options{V3: c.adminVersion == "v3"}),
		limitreq.New(logger, redisPool),
		limitconn.NewWithOptions(logger, redisPool, limitconn.Options{V3: c.adminVersion == "v3"}),
		metrics,
		keyauth.NewWithOptions(keyauth.Options{V3: c.adminVersion == "v3"}),
		basicauth.NewWithOptions(basicauth.Options{V3: c.adminVersion == "v3"}),
		jwt,
		publicapi.New(jwt),
		proxyrewrite.NewWithOptions(proxyrewrite.Options{V3: c.adminVersion == "v3"}),
		cors.NewWithOptions(cors.Options{V3: c.adminVersion == "v3"}),
		iprestriction.New(),
		realip.New(),
		requestid.New(uint16(c.requestIDMachine)),
		responserewrite.New(),
		redirect.NewWithOptions(redirect.Options{HTTPSPort: c.httpsPort, V3: c.adminVersion == "v3"}),
		trafficsplit.New(),
		gzip.New(),
		faultinjection.NewWithOptions(faultinjection.Options{V3: c.adminVersion == "v3"}),
		uriblocker.New(),
		consumerrestriction.New(),
		apibreaker.New(nil),
		httplogger.New(httplogger.Options{Logger: logger, Hostname: hostname(), Version: version}),
		opentelemetry.New(opentelemetry.Options{Collector: c.otelCollector, Resource: c.otelAttrs, TraceIDSource: c.otelTraceIDSource, Logger: logger}),
	)
}

// hostname is the machine's name for the loggers' entries, "" if unknown.
func hostname() string {
	h, _ := os.Hostname()
	return h
}

// withServerHeader sends Server: name on every answer of h.
func withServerHeader(name string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", name)
		h.ServeHTTP(w, r)
	})
}

// serveHTTP serves h on ln until Shutdown, reporting a failure on errc.
func serveHTTP(ln net.Listener, h http.Handler, errc chan<- error) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	return srv
}

// openGatewayStore opens bolt:PATH, etcd[s]://hosts?prefix=P or file:PATH
// and returns the key prefix shown in admin envelopes. An etcd user
// without a password in the URL (or its password_file) takes
// $LINKGATE_ETCD_PASSWORD, which stays out of the process arguments.
func openGatewayStore(ctx context.Context, spec string, getenv func(string) string, logger *slog.Logger) (gateway.Store, string, error) {
	switch {
	case strings.HasPrefix(spec, "bolt:"):
		s, err := bolt.Open(strings.TrimPrefix(spec, "bolt:"))
		return s, "/apisix", err
	case strings.HasPrefix(spec, "etcd://"), strings.HasPrefix(spec, "etcds://"):
		cfg, err := etcd.ParseURL(spec)
		if err != nil {
			return nil, "", cli.Usagef("--config-store: %v", err)
		}
		if cfg.Username != "" && cfg.Password == "" {
			cfg.Password = getenv("LINKGATE_ETCD_PASSWORD")
		}
		s, err := etcd.Open(ctx, cfg, logger)
		return s, cfg.Prefix, err
	case strings.HasPrefix(spec, "file:"):
		s, err := yamlfile.Open(strings.TrimPrefix(spec, "file:"), logger, 0)
		return s, "/apisix", err
	}
	return nil, "", cli.Usagef("--config-store %q: want bolt:PATH, etcd://HOST:PORT[,HOST:PORT][?prefix=/apisix], etcds://… or file:PATH", spec)
}
