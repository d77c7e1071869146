package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/bolt"
	"github.com/linkgate/linkgate/shortener/httpapi"
	"github.com/linkgate/linkgate/shortener/storemetrics"
)

// serveConfig is everything `linkgate serve` is configured with.
type serveConfig struct {
	addr            string
	store           string
	api             httpapi.Config
	server          httpapi.ServerConfig
	maxURLLength    int
	allowSchemes    cli.ListFlag
	blocklist       string
	shutdownTimeout time.Duration
	logFormat       string
	logLevel        string
}

const serveDescription = `Serve the URL shortener: seed-compatible POST /shortenURL and
GET /getFullURL/{id}, redirects at GET /{id}, the REST API under
/api/v1/links, and /healthz, /readyz, /metrics. Links are stored durably
(a 201 means the link is on disk). SIGINT/SIGTERM drain requests in flight,
then close the store.

Stores: bolt:PATH (embedded bbolt file, created with its directory).`

func runServe(ctx context.Context, args []string, env cli.Env) error {
	c := serveConfig{allowSchemes: cli.ListFlag(shortener.DefaultSchemes)}
	fs := cli.NewFlagSet("serve", "linkgate serve [flags]", serveDescription, env.Stderr)
	fs.StringVar(&c.addr, "addr", ":8080", "`address` to listen on, host:port")
	fs.StringVar(&c.store, "store", "bolt:data/links.db", "where links live: bolt:PATH")
	fs.StringVar(&c.api.PublicURL, "public-url", "", "base `URL` of returned short links, e.g. https://sho.rt (default: http://<request Host>)")
	fs.IntVar(&c.api.RedirectStatus, "redirect-status", 302, "redirect status: 301, 302, 307 or 308")
	fs.StringVar(&c.api.AdminKey, "admin-key", "", "`key` for the admin routes (list, delete); empty: they answer 403")
	fs.IntVar(&c.maxURLLength, "max-url-length", shortener.DefaultMaxURLLength, "longest target URL accepted, in `bytes`")
	fs.Var(&c.allowSchemes, "allow-schemes", "comma-separated `schemes` a target URL may use")
	fs.StringVar(&c.blocklist, "blocklist", "", "`file` of blocked domains, one per line (subdomains blocked too)")
	fs.IntVar(&c.api.MaxInflight, "max-inflight", 4096, "requests in flight beyond which new ones get 503 overloaded at once (0: no limit)")
	fs.DurationVar(&c.api.RequestTimeout, "request-timeout", 5*time.Second, "deadline for the store calls of one request")
	fs.DurationVar(&c.server.ReadTimeout, "read-timeout", 10*time.Second, "time to read one request, headers and body")
	fs.DurationVar(&c.server.WriteTimeout, "write-timeout", 10*time.Second, "time to write one response")
	fs.DurationVar(&c.server.IdleTimeout, "idle-timeout", 60*time.Second, "how long an idle keep-alive connection is kept")
	fs.IntVar(&c.server.MaxHeaderBytes, "max-header-bytes", 8<<10, "largest request line plus headers, in `bytes` (more: 431)")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long to drain requests in flight on SIGINT/SIGTERM")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("serve takes no arguments, got %q", fs.Args())
	}
	if err := c.validate(); err != nil {
		return err
	}
	logger, err := cli.NewLogger(env.Stderr, c.logFormat, c.logLevel)
	if err != nil {
		return err
	}
	return serve(ctx, logger, c)
}

func (c serveConfig) validate() error {
	if err := c.api.Validate(); err != nil {
		return cli.Usagef("%v", err)
	}
	switch {
	case c.maxURLLength < 1:
		return cli.Usagef("--max-url-length must be positive")
	case c.shutdownTimeout < 0 || c.server.ReadTimeout < 0 || c.server.WriteTimeout < 0 || c.server.IdleTimeout < 0:
		return cli.Usagef("timeouts must not be negative")
	case c.server.MaxHeaderBytes < 1024:
		return cli.Usagef("--max-header-bytes must be at least 1024")
	}
	for _, s := range c.allowSchemes {
		if u, err := url.Parse(s + "://h"); err != nil || u.Scheme != strings.ToLower(s) {
			return cli.Usagef("--allow-schemes: %q is not a URL scheme", s)
		}
	}
	if _, _, err := splitStore(c.store); err != nil {
		return err
	}
	return nil
}

// splitStore parses a --store value into its kind and argument.
func splitStore(spec string) (kind, arg string, err error) {
	kind, arg, ok := strings.Cut(spec, ":")
	switch {
	case !ok || arg == "":
		return "", "", cli.Usagef("--store %q: want bolt:PATH", spec)
	case kind == "bolt":
		return kind, arg, nil
	}
	return "", "", cli.Usagef("--store %q: unknown store %q (supported: bolt)", spec, kind)
}

// openStore opens the store a --store value names.
func openStore(spec string) (shortener.Store, string, error) {
	kind, arg, err := splitStore(spec)
	if err != nil {
		return nil, "", err
	}
	switch kind {
	case "bolt":
		s, err := bolt.Open(arg)
		return s, kind, err
	}
	return nil, "", fmt.Errorf("unreachable: store kind %q", kind)
}

// newShortenerHandler builds the shortener's HTTP handler over store, with
// its metrics on reg: everything `serve` runs except the listener. The
// Lambda mode serves the same handler.
func newShortenerHandler(logger *slog.Logger, c serveConfig, store shortener.Store, reg *prometheus.Registry) (*httpapi.Handler, error) {
	policy := shortener.URLPolicy{MaxLength: c.maxURLLength, Schemes: c.allowSchemes}
	if c.blocklist != "" {
		f, err := os.Open(c.blocklist)
		if err != nil {
			return nil, fmt.Errorf("--blocklist: %w", err)
		}
		defer f.Close()
		if policy.Blocklist, err = shortener.ParseBlocklist(f); err != nil {
			return nil, fmt.Errorf("--blocklist %s: %w", c.blocklist, err)
		}
		logger.Info("blocklist loaded", "file", c.blocklist, "domains", policy.Blocklist.Len())
	}
	if c.api.PublicURL != "" {
		u, _ := url.Parse(c.api.PublicURL) // validated
		policy.SelfHosts = []string{u.Hostname()}
	}
	svc := shortener.NewService(store, shortener.Options{Policy: policy})
	return httpapi.NewHandler(logger, svc, httpapi.NewMetrics(reg), reg, c.api)
}

func serve(ctx context.Context, logger *slog.Logger, c serveConfig) error {
	raw, kind, err := openStore(c.store)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	store := storemetrics.Wrap(raw, reg, kind)
	defer func() {
		if err := store.Close(); err != nil {
			logger.Error("close store", "error", err)
		}
	}()
	h, err := newShortenerHandler(logger, c, store, reg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := httpapi.NewServer(logger, h, c.server)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Info("linkgate serve listening", "addr", ln.Addr().String(), "store", c.store, "version", version)

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down: draining requests in flight", "timeout", c.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		logger.Warn("shutdown", "error", err)
	} else if err != nil {
		logger.Warn("shutdown timeout reached; closing remaining connections")
	}
	if err := <-served; err != nil {
		logger.Warn("serve", "error", err)
	}
	logger.Info("stopped")
	return nil
}
