//go:build !functiononly

package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/admin"
	"github.com/linkgate/linkgate/gateway/bolt"
	"github.com/linkgate/linkgate/gateway/certs"
	"github.com/linkgate/linkgate/gateway/control"
	"github.com/linkgate/linkgate/gateway/etcd"
	"github.com/linkgate/linkgate/gateway/plugin/basicauth"
	"github.com/linkgate/linkgate/gateway/plugin/cors"
	"github.com/linkgate/linkgate/gateway/plugin/faultinjection"
	"github.com/linkgate/linkgate/gateway/plugin/gzip"
	"github.com/linkgate/linkgate/gateway/plugin/iprestriction"
	"github.com/linkgate/linkgate/gateway/plugin/jwtauth"
	"github.com/linkgate/linkgate/gateway/plugin/keyauth"
	"github.com/linkgate/linkgate/gateway/plugin/limitconn"
	"github.com/linkgate/linkgate/gateway/plugin/limitcount"
	"github.com/linkgate/linkgate/gateway/plugin/limitreq"
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
	"github.com/linkgate/linkgate/gateway/router"
	"github.com/linkgate/linkgate/gateway/yamlfile"
	"github.com/linkgate/linkgate/internal/cli"
)

type gatewayConfig struct {
	listen, prometheusListen, controlListen, store, adminVersion, logLevel, router string
	serverHeader, listenTLS, sslKeySalt, trustedCA                                 string
	adminKeys, viewerKeys, allowAdmin                                              string
	maxBodySize, httpsPort, requestIDMachine                                       int
	showUpstreamStatus                                                             bool
	wsMaxDuration                                                                  time.Duration
}

// loadRoots reads a PEM file of CA certificates; "" is nil, the system roots.
func init() {
	commands["gateway"] = command{"run the APISIX-compatible API gateway", runGateway}
}

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

func runGateway(ctx context.Context, args []string, env cli.Env) error {
	fs := cli.NewFlagSet("gateway", "linkgate gateway [flags]",
		"Run the APISIX 2.14-compatible API gateway: admin API under /apisix/admin/ on the\n"+
			"data listener, routes and plugins from the config store, prometheus metrics on\n"+
			"--prometheus-listen at /apisix/prometheus/metrics.", env.Stderr)
	var c gatewayConfig
	fs.StringVar(&c.listen, "listen", ":9080", "address of the data listener (and the admin API)")
	fs.StringVar(&c.adminKeys, "admin-key", "", "admin API key(s), comma-separated; with none the admin API refuses every call")
	fs.StringVar(&c.viewerKeys, "viewer-key", "", "read-only admin API key(s), comma-separated")
	fs.StringVar(&c.allowAdmin, "allow-admin", "127.0.0.0/24", "client networks (CIDR or IP) allowed to reach the admin API, comma-separated")
	fs.StringVar(&c.prometheusListen, "prometheus-listen", "127.0.0.1:9091", `address of the prometheus exporter ("" disables it)`)
	fs.StringVar(&c.controlListen, "control-listen", "", `address of the control API (/v1/routes, /v1/config; APISIX uses 127.0.0.1:9090; "" disables it)`)
	fs.StringVar(&c.store, "config-store", "bolt:data/gateway.db", "config store: bolt:PATH, etcd://[USER@]HOST:PORT[,HOST:PORT][?prefix=/apisix] (etcds:// over TLS, with &ca=FILE&cert=FILE&key=FILE; the password from password_file=FILE or $LINKGATE_ETCD_PASSWORD), or file:PATH (APISIX's standalone apisix.yaml, reloaded when it changes; the admin API is read-only)")
	fs.BoolVar(&c.showUpstreamStatus, "show-upstream-status", false, "send X-APISIX-Upstream-Status on every proxied response, not only after a 5xx (APISIX's show_upstream_status_in_response_header)")
	fs.StringVar(&c.router, "router", "radixtree_uri", "route matching, as APISIX's apisix.router.http: radixtree_uri, radixtree_host_uri or radixtree_uri_with_parameter")
	fs.StringVar(&c.adminVersion, "admin-api-version", "v2", "admin API envelopes: v2 (APISIX 2.14) or v3 (APISIX 3.x)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.serverHeader, "server-header", "linkgate", `Server header on proxied responses ("" keeps the upstream's)`)
	fs.IntVar(&c.maxBodySize, "max-body-size", 0, "largest request body proxied, in bytes (0: no limit, as APISIX's client_max_body_size; bodies stream)")
	fs.StringVar(&c.listenTLS, "listen-tls", ":9443", `address of the TLS listener (HTTP/1.1 and HTTP/2, certificates from the ssl resources; "" disables it)`)
	fs.StringVar(&c.sslKeySalt, "ssl-key-encrypt-salt", gateway.DefaultKeySalt, `16 bytes encrypting ssl private keys at rest, as APISIX's key_encrypt_salt (its default); "" stores them as given`)
	fs.StringVar(&c.trustedCA, "ssl-trusted-certificate", "", `PEM file of the CAs that verify TLS servers the gateway is a client of: redis with redis_ssl_verify (APISIX's apisix.ssl.ssl_trusted_certificate; "" uses the system roots)`)
	fs.IntVar(&c.httpsPort, "https-port", 0, "port the redirect plugin's http_to_https sends clients to (0: the --listen-tls port, else 443)")
	fs.DurationVar(&c.wsMaxDuration, "websocket-max-duration", 0, "longest a WebSocket tunnel stays open (0: no limit; an idle one closes after its route's read timeout, 60s by default)")
	fs.IntVar(&c.requestIDMachine, "request-id-machine", 0, "this node's snowflake data machine id (0-4095) for request-id; distinct per node")
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("gateway takes no arguments")
	}
	var allow []netip.Prefix
	for _, s := range splitList(c.allowAdmin) {
		p, err := gateway.ParseAddrOrPrefix(s)
		if err != nil {
			return cli.Usagef("--allow-admin %q: %v", s, err)
		}
		allow = append(allow, p)
	}
	routerMode, ok := router.ParseMode(c.router)
	if !ok {
		return cli.Usagef("--router must be radixtree_uri, radixtree_host_uri or radixtree_uri_with_parameter")
	}
	if c.adminVersion != "v2" && c.adminVersion != "v3" {
		return cli.Usagef("--admin-api-version must be v2 or v3")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return cli.Usagef("--log-level: %v", err)
	}
	roots, err := loadRoots(c.trustedCA)
	if err != nil {
		return cli.Usagef("--ssl-trusted-certificate: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))

	store, prefix, err := openGatewayStore(ctx, c.store, env.Getenv, logger)
	if err != nil {
		return err
	}
	defer store.Close()

	if c.requestIDMachine < 0 || c.requestIDMachine > 4095 {
		return cli.Usagef("--request-id-machine must be 0-4095")
	}
	keys, err := gateway.NewKeyCipher(c.sslKeySalt)
	if err != nil {
		return cli.Usagef("--ssl-key-encrypt-salt: %v", err)
	}
	var tlsLn net.Listener
	if c.listenTLS != "" {
		if tlsLn, err = net.Listen("tcp", c.listenTLS); err != nil {
			return fmt.Errorf("gateway: TLS listener: %w", err)
		}
		defer tlsLn.Close()
		if c.httpsPort == 0 {
			c.httpsPort = tlsLn.Addr().(*net.TCPAddr).Port
		}
	}
	metrics := prometheus.New()
	redisPool := redis.NewPoolWithRoots(roots)
	defer redisPool.Close()
	reg := newRegistry(logger, c, metrics, redisPool)
	reg.SSLKeys = keys
	if len(splitList(c.adminKeys)) == 0 {
		logger.Warn("no --admin-key: the admin API refuses every call")
	}
	readOnly := ""
	if _, ok := store.(*yamlfile.Store); ok {
		readOnly = yamlfile.ErrReadOnly.Error()
	}
	adminAPI := admin.NewHandler(logger, store, reg, admin.Options{
		AdminKeys: splitList(c.adminKeys), ViewerKeys: splitList(c.viewerKeys), AllowAdmin: allow, V3: c.adminVersion == "v3", Prefix: prefix,
		ReadOnly: readOnly,
	})
	gw := proxy.New(proxy.Options{Logger: logger, Admin: adminAPI, ServerHeader: c.serverHeader, MaxBodySize: c.maxBodySize, Router: routerMode,
		ShowUpstreamStatus: c.showUpstreamStatus, Certs: certs.NewManager(nil), WebSocketMaxDuration: c.wsMaxDuration})

	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	var promLn, ctlLn net.Listener
	if c.prometheusListen != "" {
		if promLn, err = net.Listen("tcp", c.prometheusListen); err != nil {
			ln.Close()
			return fmt.Errorf("gateway: prometheus: %w", err)
		}
	}
	if c.controlListen != "" {
		if ctlLn, err = net.Listen("tcp", c.controlListen); err != nil {
			ln.Close()
			if promLn != nil {
				promLn.Close()
			}
			return fmt.Errorf("gateway: control: %w", err)
		}
	}

	// Config pipeline: store updates → validate → compile → atomic swap.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reloader := gateway.NewReloader(reg, logger, func(c *gateway.Compiled) {
		gw.Load(c)
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
	loaded := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := reloader.Run(ctx, store, func() { once.Do(func() { close(loaded) }) })
		if err != nil && ctx.Err() == nil {
			logger.Error("config store watch ended", "err", err)
		}
	}()
	select {
	case <-loaded:
	case <-time.After(5 * time.Second):
		logger.Warn("config store not loaded after 5s; serving an empty configuration until it is")
	case <-ctx.Done():
	}

	errc := make(chan error, 4)
	go func() { errc <- gw.Serve(ln) }()
	tlsAddr := ""
	if tlsLn != nil {
		go func() { errc <- gw.ServeTLS(tlsLn) }()
		tlsAddr = tlsLn.Addr().String()
	}
	var servers []*http.Server
	promAddr, ctlAddr := "", ""
	if promLn != nil {
		reach := func() bool { return true }
		if r, ok := store.(gateway.Reachability); ok {
			reach = r.Reachable
		}
		servers = append(servers, serveHTTP(promLn, metrics.Handler(func() prometheus.ServerStats {
			s := gw.Stats()
			return prometheus.ServerStats{Active: s.Active, Accepted: s.Accepted, Handled: s.Handled,
				Reading: s.Reading, Writing: s.Writing, Waiting: s.Waiting, Requests: s.Requests, WebSockets: s.WebSockets}
		}, reach), errc))
		promAddr = promLn.Addr().String()
	}
	if ctlLn != nil {
		servers = append(servers, serveHTTP(ctlLn, control.NewHandler(reloader, store, prefix), errc))
		ctlAddr = ctlLn.Addr().String()
	}
	logger.Info("gateway listening", "addr", ln.Addr().String(), "prometheus", promAddr, "control", ctlAddr, "tls", tlsAddr, "store", c.store, "admin_api", c.adminVersion)
	// Any answer of the data listener (the admin API's 401 included) shows it serves.
	sd := notifyReady(logger, "gateway on "+ln.Addr().String()+", config store "+c.store, probeHTTP(ln.Addr(), "/apisix/admin/", 0))
	defer sd.Stopping()

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sd.Stopping()
	shutCtx, done := context.WithTimeout(context.Background(), 10*time.Second)
	defer done()
	for _, srv := range servers {
		_ = srv.Shutdown(shutCtx)
	}
	if serr := gw.Shutdown(shutCtx); err == nil && serr != nil {
		err = serr
	}
	cancel()
	wg.Wait()
	return err
}

// newRegistry returns the gateway's plugins, configured by c's flags.
func newRegistry(logger *slog.Logger, c gatewayConfig, metrics *prometheus.Factory, redisPool *redis.Pool) *gateway.Registry {
	jwt := jwtauth.New()
	return gateway.NewRegistry(
		limitcount.New(logger, redisPool),
		limitreq.New(logger, redisPool),
		limitconn.New(logger, redisPool),
		metrics,
		keyauth.New(),
		basicauth.New(),
		jwt,
		publicapi.New(jwt),
		proxyrewrite.New(),
		cors.New(),
		iprestriction.New(),
		realip.New(),
		requestid.New(uint16(c.requestIDMachine)),
		responserewrite.New(),
		redirect.New(c.httpsPort),
		trafficsplit.New(),
		gzip.New(),
		faultinjection.New(),
	)
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
