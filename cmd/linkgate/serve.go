package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/linkgate/linkgate/internal/accesslog"
	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/internal/overload"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/cache"
	"github.com/linkgate/linkgate/shortener/dynamodb"
	"github.com/linkgate/linkgate/shortener/httpapi"
	"github.com/linkgate/linkgate/shortener/storemetrics"
	"github.com/linkgate/linkgate/shortener/visits"
)

// serveConfig is everything `linkgate serve` is configured with.
type serveConfig struct {
	addr            string
	store           string
	storeTimeout    time.Duration
	consistentReads bool
	visitInterval   time.Duration // DynamoDB: how long visits gather before they are written
	cacheSize       cacheSizeFlag
	cacheTTL        time.Duration
	cacheNegTTL     time.Duration
	api             httpapi.Config
	server          httpapi.ServerConfig
	maxURLLength    int
	allowSchemes    cli.ListFlag
	allowLoopback   bool
	blocklist       string
	shutdownTimeout time.Duration
	domainRefresh   time.Duration // how often the domain registry is read again
	logFormat       string
	logLevel        string
	visits          visitsConfig
	trustedProxies  cli.ListFlag
	awsIPRanges     string
	storeMinFree    int64 // pebble: MiB kept free on the store's file system
	debugAddr       string
	overloadDelay   time.Duration // 0: fixed in-flight budgets
	accessLog       string        // --access-log: "", stdout, stderr or a file
	accessLogFormat string
	stdout, stderr  io.Writer // the process's, for --access-log stdout|stderr
	https           httpsConfig
}

// httpsConfig is serve's HTTPS (--tls and the flags that go with it).
type httpsConfig struct {
	mode              string // off, auto, or CERT,KEY
	addr, httpAddr    string
	acmeCA, acmeEmail string
	acmeCARoot        string
	acmeDir           string
	hsts              time.Duration
	orderRate         time.Duration
	orderBurst        int
}

// hstsHeader is the Strict-Transport-Security value of --hsts, "" for none.
func (h *httpsConfig) hstsHeader() string {
	if h.mode == "off" || h.hsts == 0 {
		return ""
	}
	return fmt.Sprintf("max-age=%d", int64(h.hsts/time.Second))
}

// letsEncrypt is --acme-ca's default: Let's Encrypt production.
const letsEncrypt = "https://acme-v02.api.letsencrypt.org/directory"

const serveDescription = `Serve the URL shortener: seed-compatible POST /shortenURL and
GET /getFullURL/{id}, redirects at GET /{id}, the REST API under
/api/v1/links, visit statistics at /api/v1/links/{id}/stats, QR codes at
/api/v1/links/{id}/qr, the web page at /, and /healthz, /readyz, /metrics.
Links are stored durably (a 201 means the link is on disk). Visits are
counted in memory and written in batches (--visits-flush-interval).
SIGINT/SIGTERM stop accepting, answer every request read (with
Connection: close), close idle keep-alive connections once quiet for
0.5s, flush the visits, then close the store.

Stores: pebble:DIR (the embedded store, a pebble database in DIR, created
with its directory), or dynamodb:TABLE (default table goUrlShortener; create it with 'linkgate
dynamodb create-table'). A store of an earlier release (DIR.db, a bbolt
file, or bolt:PATH) is migrated into DIR on the first start, its files
kept ('linkgate store migrate' does it by hand). DynamoDB settings come from the AWS SDK's standard
chain: AWS_REGION, AWS_PROFILE, credentials, AWS_ENDPOINT_URL_DYNAMODB.

With DynamoDB, reads go through an in-memory cache (--cache-size,
--cache-ttl): a link deleted through another instance keeps resolving here
for at most --cache-ttl, and one created elsewhere may be unknown here for
at most --cache-negative-ttl. This instance's own writes are seen at once.`

func runServe(ctx context.Context, args []string, env cli.Env) error {
	c := defaultServeConfig()
	fs := cli.NewFlagSet("serve", "linkgate serve [flags]", serveDescription, env.Stderr)
	c.register(fs)
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("serve takes no arguments, got %q", fs.Args())
	}
	if err := c.validate(); err != nil {
		return err
	}
	c.stdout, c.stderr = env.Stdout, env.Stderr
	logger, err := cli.NewLogger(env.Stderr, c.logFormat, c.logLevel)
	if err != nil {
		return err
	}
	return serve(ctx, logger, c)
}

// defaultServeConfig returns the configuration before flags.
func defaultServeConfig() serveConfig {
	return serveConfig{allowSchemes: cli.ListFlag(shortener.DefaultSchemes), cacheSize: -1}
}

// register adds serve's flags to fs, with c's fields as their values: the
// listener's and, through registerShortener, those the Lambda mode shares.
func (c *serveConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", ":8080", "`address` to listen on, host:port")
	c.registerShortener(fs, "pebble:data/links", "text")
	fs.Int64Var(&c.storeMinFree, "store-min-free", 64, "pebble: free space, in `MiB`, kept on the store's file system: below it creates, deletes and visit flushes answer 503 unavailable and reads go on, until space is freed; half of it is held by a ballast file (DIR/BALLAST) released should the disk fill up anyway")
	fs.IntVar(&c.api.MaxInflight, "max-inflight", 4096, "redirects and lookups in flight beyond which new ones get 503 overloaded at once (0: no limit)")
	fs.IntVar(&c.api.MaxInflightCreates, "max-inflight-creates", httpapi.DefaultMaxInflightCreates, "creates in flight beyond which new ones get 503 overloaded (0: no limit); a budget of their own, so a create flood never sheds redirects")
	fs.IntVar(&c.api.MaxInflightQR, "max-inflight-qr", 32, "QR code and statistics requests in flight beyond which new ones get 503 overloaded (0: no limit)")
	fs.IntVar(&c.api.MaxInflightAdmin, "max-inflight-admin", 64, "admin requests (list, edit, delete, keys) in flight beyond which new ones get 503 overloaded (0: no limit)")
	fs.DurationVar(&c.api.ShedDelay, "shed-delay", 100*time.Millisecond, "with --overload-delay, how long a shed create, QR or stats request waits for its 503, on average (drawn from half to 1.5 times it, so shed requests do not wake together): a client flooding its connections gets few requests through each (0: answered at once)")
	fs.IntVar(&c.api.ShedFloor, "shed-floor", 0, "with --overload-delay, the `requests` of a class (creates, QR/stats) in flight below which none is shed by the adaptive budgets and rates, so a lone client is never refused (a --max-inflight-* budget below it still applies); 0: 2 × GOMAXPROCS")
	fs.BoolVar(&c.api.OverloadRate, "overload-rate", true, "with --overload-delay, also bound the rate at which creates and QR/stats requests start: halved after such a 10ms window, raised by 1/32 after one that is not, so a few creates in flight cannot keep the core busy (false: in-flight budgets only)")
	fs.DurationVar(&c.overloadDelay, "overload-delay", 250*time.Microsecond, "while more than 1% of goroutines wait longer than this to run, the Go scheduler's Ps are busy with this server's own work (not idle while other processes, a CPU quota or steal take the CPU) and redirects are being served, the create and QR/stats budgets are halved every 10ms, down to 1 (above --shed-floor), and regrow by one per 10ms after: redirects are never limited by it (0: fixed budgets)")
	fs.DurationVar(&c.server.ReadTimeout, "read-timeout", 10*time.Second, "time to read one request, headers and body")
	fs.DurationVar(&c.server.WriteTimeout, "write-timeout", 10*time.Second, "time to write one response")
	fs.DurationVar(&c.server.IdleTimeout, "idle-timeout", 60*time.Second, "how long an idle keep-alive connection is kept")
	fs.IntVar(&c.server.MaxHeaderBytes, "max-header-bytes", 8<<10, "largest request line plus headers, in `bytes` (more: 431)")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long to drain connections and requests on SIGINT/SIGTERM")
	fs.StringVar(&c.accessLog, "access-log", "", "one line per request to stdout, stderr or a `file` (appended; opened again on SIGHUP, for logrotate), written from a buffer by a goroutine of its own: a line that finds the buffer full is dropped and counted in linkgate_access_log_dropped_total, never waited for; empty: none")
	fs.StringVar(&c.accessLogFormat, "access-log-format", "combined", "access log format: combined (nginx's and Apache's Combined Log Format) or json (docs/serve.md, \"Access log\")")
	c.https.register(fs)
	fs.StringVar(&c.debugAddr, "debug-addr", "", "`address` serving Go's profiles and traces at /debug/pprof/ (e.g. 127.0.0.1:6060; keep it private); empty: none")
}

// registerShortener adds the flags `serve` and the Lambda mode share: the
// store and its cache, the API, the URL policy, logging. store and
// logFormat are the defaults of --store and --log-format.
func (c *serveConfig) registerShortener(fs *flag.FlagSet, store, logFormat string) {
	fs.StringVar(&c.store, "store", store, "where links live: pebble:DIR or dynamodb:TABLE (bolt:PATH, a store of an earlier release, is migrated to pebble first)")
	fs.DurationVar(&c.storeTimeout, "store-timeout", dynamodb.DefaultTimeout, "deadline of each DynamoDB call, retries included")
	fs.BoolVar(&c.consistentReads, "consistent-reads", false, "strongly consistent DynamoDB reads (twice the read cost)")
	fs.DurationVar(&c.visitInterval, "dynamodb-visit-interval", dynamodb.DefaultVisitInterval, "DynamoDB: how long visits of links without a visit limit are gathered before they are written, as one record (how late other instances see them; a crash loses at most this much)")
	fs.Var(&c.cacheSize, "cache-size", "read cache `entries`; 0: no cache; auto: "+fmt.Sprint(defaultCacheSize)+" with dynamodb, none with the embedded store")
	fs.DurationVar(&c.cacheTTL, "cache-ttl", time.Minute, "how long a link is served from the read cache (the staleness bound across instances)")
	fs.DurationVar(&c.cacheNegTTL, "cache-negative-ttl", time.Second, "how long the read cache remembers an unknown id (0: not at all; at most --cache-ttl)")
	fs.StringVar(&c.api.PublicURL, "public-url", "", "base `URL` of returned short links, e.g. https://sho.rt (default: http://<request Host>)")
	fs.Var(domainsFlag{&c.api.Domains}, "domain", "a short-link `domain` this server answers for: sho.rt (https) or http(s)://host[:port]; repeat it or give a comma-separated list. Set, any other Host gets 421 (probes excepted); each link belongs to one domain, the Host's (or the API's domain field), and the same slug may exist on two; the first is the default domain, which keeps links stored before and the seed's table layout (docs/domains.md); instead of --public-url")
	fs.DurationVar(&c.domainRefresh, "domain-refresh", 10*time.Second, "how often the domain registry (domains added through POST /api/v1/domains, kept in the store) is read again: a domain added through another instance is served here within this `duration` (docs/domains.md)")
	fs.IntVar(&c.api.RedirectStatus, "redirect-status", 302, "redirect status: 301, 302, 307 or 308")
	fs.BoolVar(&c.api.ForwardQuery, "forward-query", false, "add a visitor's query string to the target (sho.rt/x?utm_source=mail → target?utm_source=mail; the target's own parameters win) for links whose forward_query is not set")
	fs.StringVar(&c.api.NotFoundURL, "not-found-url", "", "absolute `URL` a browser following an unknown link is redirected to (302), instead of the built-in page")
	fs.StringVar(&c.api.ExpiredURL, "expired-url", "", "absolute `URL` a browser following an expired link is redirected to (302), instead of the built-in page")
	fs.StringVar(&c.api.AdminKey, "admin-key", "", "`key` for the admin routes (list, edit, delete, keys, export, import, backup); empty: only API keys (linkgate keys) are accepted there, and a request without a valid one answers 401 (403 on a store that keeps no API keys)")
	fs.IntVar(&c.maxURLLength, "max-url-length", shortener.DefaultMaxURLLength, "longest target URL accepted, in `bytes`")
	fs.Var(&c.allowSchemes, "allow-schemes", "comma-separated `schemes` a target URL may use")
	fs.BoolVar(&c.allowLoopback, "allow-loopback-targets", false, "accept target URLs on this machine (localhost, 127.0.0.0/8, ::1: development); refused by default")
	fs.StringVar(&c.blocklist, "blocklist", "", "`file` of blocked domains, one per line (subdomains blocked too)")
	fs.DurationVar(&c.api.RequestTimeout, "request-timeout", 5*time.Second, "deadline for the store calls of one request")
	fs.StringVar(&c.logFormat, "log-format", logFormat, "log format: text or json (durations as Go writes them, \"10s\", in both)")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&c.visits.enabled, "visits", true, "count visits (per day, referrer, browser/bot, country) off the redirect path")
	fs.DurationVar(&c.visits.cfg.FlushInterval, "visits-flush-interval", visits.DefaultFlushInterval, "how often counted visits are written to the store (a crash loses at most this much)")
	fs.IntVar(&c.visits.cfg.FlushLinks, "visits-flush-links", visits.DefaultFlushLinks, "write counted visits early once this many `links` have some; 4× this many are kept at most, further visits are dropped (counted in linkgate_visits_dropped_total)")
	fs.StringVar(&c.visits.geoip, "geoip", "", "MaxMind-format country or city database `file` (e.g. GeoLite2-Country.mmdb) to count visits by country")
	fs.BoolVar(&c.api.StatsPublic, "stats-public", false, "serve GET /api/v1/links/{id}/stats without the admin key")
	fs.BoolVar(&c.api.UI, "ui", true, "serve the web page at /")
	fs.Var(accessFlag{&c.api.CreateAccess}, "create-access", "who may create links: public (anyone; the default, for a local install) or key (an API key with scope links:create: see linkgate keys)")
	fs.Var(createRateFlag{&c.api.CreateRate}, "create-rate", "creates per client address (an IPv6 client per /64), as a token bucket: `N/s`, N/m or N/h; beyond it 429 rate_limited with Retry-After; 0: no limit")
	fs.Var(createRateFlag{&c.api.CreateRateKey}, "create-rate-key", "creates per API key (instead of per address, for requests with a key): N/s, N/m or N/h; 0: no limit")
	fs.Var(&c.trustedProxies, "trusted-proxies", "comma-separated `CIDRs` (or addresses) of the load balancers and CDNs in front, whose X-Forwarded-For, Forwarded and CloudFront-Viewer-* headers say who the client is; presets: "+presetALB+" (the VPC's private ranges), "+presetCloudFront+" (from --aws-ip-ranges)")
	fs.StringVar(&c.awsIPRanges, "aws-ip-ranges", "", "AWS's ip-ranges.json `file`, for --trusted-proxies "+presetCloudFront+" (download it yourself: nothing is fetched)")
}

func (c serveConfig) validate() error {
	if err := c.validateShortener(); err != nil {
		return err
	}
	switch {
	case c.shutdownTimeout < 0 || c.domainRefresh <= 0 || c.server.ReadTimeout < 0 || c.server.WriteTimeout < 0 || c.server.IdleTimeout < 0 || c.overloadDelay < 0:
		return cli.Usagef("timeouts must not be negative")
	case c.api.ShedFloor < 0:
		return cli.Usagef("--shed-floor must not be negative")
	case c.server.MaxHeaderBytes < 1024:
		return cli.Usagef("--max-header-bytes must be at least 1024")
	case c.storeMinFree < 1 || c.storeMinFree > 1<<20:
		return cli.Usagef("--store-min-free must be between 1 and 1048576 MiB")
	}
	if _, err := accesslog.ParseFormat(c.accessLogFormat); err != nil {
		return cli.Usagef("--access-log-format: %v", err)
	}
	return c.https.validate(c.api.Domains, c.api.PublicURL)
}

// validateShortener checks the settings addShortenerFlags registers.
func (c serveConfig) validateShortener() error {
	if err := c.api.Validate(); err != nil {
		return cli.Usagef("%v", err)
	}
	switch {
	case c.maxURLLength < 1:
		return cli.Usagef("--max-url-length must be positive")
	case c.storeTimeout <= 0:
		return cli.Usagef("--store-timeout must be positive")
	case c.visitInterval <= 0:
		return cli.Usagef("--dynamodb-visit-interval must be positive")
	case c.cacheTTL <= 0:
		return cli.Usagef("--cache-ttl must be positive")
	case c.cacheNegTTL < 0 || c.cacheNegTTL > c.cacheTTL:
		return cli.Usagef("--cache-negative-ttl must be between 0 and --cache-ttl")
	}
	for _, s := range c.allowSchemes {
		if u, err := url.Parse(s + "://h"); err != nil || u.Scheme != strings.ToLower(s) {
			return cli.Usagef("--allow-schemes: %q is not a URL scheme", s)
		}
	}
	if _, _, err := splitStore(c.store); err != nil {
		return err
	}
	if err := c.visits.validate(); err != nil {
		return cli.Usagef("%v", err)
	}
	return nil
}

// splitStore parses a --store value into its kind and argument.
func splitStore(spec string) (kind, arg string, err error) {
	kind, arg, _ = strings.Cut(spec, ":")
	switch {
	case kind == "dynamodb" && arg == "":
		return kind, dynamodb.DefaultTable, nil
	case kind == "pebble" && arg == "":
		return "", "", cli.Usagef("--store %q: want pebble:DIR", spec)
	case kind == "bolt" && arg == "":
		return "", "", cli.Usagef("--store %q: want bolt:PATH", spec)
	case kind == "pebble", kind == "bolt", kind == "dynamodb":
		return kind, arg, nil
	}
	return "", "", cli.Usagef("--store %q: unknown store %q (supported: pebble:DIR, bolt:PATH, dynamodb:TABLE)", spec, kind)
}

// pebbleDirOf is the pebble directory a bolt file migrates to by default:
// data/links.db → data/links.
func pebbleDirOf(path string) string {
	if dir, ok := strings.CutSuffix(path, ".db"); ok && dir != "" {
		return dir
	}
	return path + ".pebble"
}

// openStore opens the store a --store value names. A DynamoDB table that
// is missing or keyed otherwise is an error; DynamoDB not answering is
// not: the server starts, /readyz says 503 until it answers.
func openStore(ctx context.Context, logger *slog.Logger, c serveConfig) (shortener.Store, string, error) {
	kind, arg, err := splitStore(c.store)
	if err != nil {
		return nil, "", err
	}
	switch kind {
	case "pebble":
		s, err := openPebble(ctx, logger, arg, arg+".db", c.storeMinFree<<20)
		return s, kind, err
	case "bolt":
		// The format of earlier releases: migrated, then served from
		// the pebble store beside it.
		dir := pebbleDirOf(arg)
		logger.Warn("--store bolt: names a store of an earlier release; it is served from the pebble store migrated from it", "bolt", arg, "store", "pebble:"+dir)
		s, err := openPebble(ctx, logger, dir, arg, c.storeMinFree<<20)
		return s, "pebble", err
	case "dynamodb":
		s, err := dynamodb.Open(ctx, c.dynamoOptions(logger, arg))
		if err != nil {
			return nil, "", err
		}
		switch err := s.CheckTable(ctx); {
		case errors.Is(err, shortener.ErrUnavailable):
			logger.Warn("DynamoDB does not answer; serving anyway, /readyz says 503 until it does", "table", arg, "error", err)
		case err != nil:
			s.Close()
			return nil, "", err
		}
		return s, kind, nil
	}
	return nil, "", fmt.Errorf("unreachable: store kind %q", kind)
}

// createRateFlag is a flag of an httpapi.Rate.
type createRateFlag struct{ r *httpapi.Rate }

func (f createRateFlag) String() string {
	if f.r == nil {
		return "0"
	}
	return f.r.String()
}

func (f createRateFlag) Set(s string) error {
	r, err := httpapi.ParseRate(s)
	if err != nil {
		return err
	}
	*f.r = r
	return nil
}

// loopbackAddr reports whether a listener's address is reachable from
// this machine only.
func loopbackAddr(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}

// accessFlag is --create-access.
type accessFlag struct{ a *httpapi.Access }

func (f accessFlag) String() string {
	if f.a == nil || *f.a == "" {
		return string(httpapi.AccessPublic)
	}
	return string(*f.a)
}

func (f accessFlag) Set(s string) error {
	switch a := httpapi.Access(s); a {
	case httpapi.AccessPublic, httpapi.AccessKey:
		*f.a = a
		return nil
	}
	return fmt.Errorf("want public or key, got %q", s)
}

// dynamoOptions are the DynamoDB store's options for a table.
func (c serveConfig) dynamoOptions(logger *slog.Logger, table string) dynamodb.Options {
	return dynamodb.Options{Table: table, ConsistentReads: c.consistentReads, Timeout: c.storeTimeout,
		VisitInterval: c.visitInterval, Logger: logger}
}

// defaultCacheSize is --cache-size auto with DynamoDB: about 20-40 MB of
// links with typical URLs.
const defaultCacheSize = 100_000

// cacheSizeFlag is --cache-size: a number of entries, or auto (-1).
type cacheSizeFlag int

func (f *cacheSizeFlag) String() string {
	if *f < 0 {
		return "auto"
	}
	return fmt.Sprint(int(*f))
}

func (f *cacheSizeFlag) Set(s string) error {
	if s == "auto" {
		*f = -1
		return nil
	}
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil || n < 0 || fmt.Sprint(n) != s {
		return errors.New("want a number of entries (0: no cache) or auto")
	}
	*f = cacheSizeFlag(n)
	return nil
}

// entries returns the cache size for a store kind; 0 means no cache. The
// embedded store reads from memory already, so auto caches only DynamoDB.
func (f cacheSizeFlag) entries(kind string) int {
	switch {
	case f >= 0:
		return int(f)
	case kind == "dynamodb":
		return defaultCacheSize
	}
	return 0
}

// lookupSample is how many of the embedded store's redirect lookups share
// one timing in linkgate_store_operation_duration_seconds.
const lookupSample = 16

// wrapStore adds to a raw store what every front end serves it with: the
// store latency metrics (of the backend itself), then the read cache.
func wrapStore(logger *slog.Logger, raw shortener.Store, kind string, c serveConfig, reg prometheus.Registerer) (shortener.Store, error) {
	timed := storemetrics.Wrap(raw, reg, kind)
	if kind != "dynamodb" {
		// The embedded store's lookups are sub-microsecond: time a sample
		// (docs/serve-benchmarks.md, "Redirect CPU: sampled latency and no unused client address").
		timed.SampleLookups(lookupSample)
	}
	var store shortener.Store = timed
	n := c.cacheSize.entries(kind)
	if n == 0 {
		return store, nil
	}
	cached, err := cache.New(store, cache.Options{Size: n, TTL: c.cacheTTL, NegativeTTL: c.cacheNegTTL, Registerer: reg, Logger: logger})
	if err != nil {
		return nil, err
	}
	return cached, nil
}

// newShortenerHandler builds the shortener's HTTP handler over store, with
// its metrics on reg: everything `serve` runs except the listener. The
// Lambda mode serves the same handler.
func newShortenerHandler(logger *slog.Logger, c serveConfig, store shortener.Store, reg *prometheus.Registry) (*httpapi.Handler, error) {
	policy := shortener.URLPolicy{MaxLength: c.maxURLLength, Schemes: c.allowSchemes, AllowLoopback: c.allowLoopback}
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
	policy.SelfHosts = configuredHosts(c)
	proxies, err := trustedProxies(c.trustedProxies, c.awsIPRanges)
	if err != nil {
		return nil, err
	}
	c.api.TrustedProxies = proxies
	if proxies != nil {
		logger.Info("trusted proxies", "prefixes", proxies.Len())
	}
	c.api.Keys = store
	opts := shortener.Options{Policy: policy}
	if v, ok := c.api.Visits.(shortener.VisitCounter); ok {
		opts.Visits = v // visit limits count the visits not yet flushed
	}
	svc := shortener.NewService(store, opts)
	return httpapi.NewHandler(logger, svc, httpapi.NewMetrics(reg), reg, c.api)
}

// configuredHosts are the host names of --public-url and --domain, lower
// case: links to them are refused (they would loop), and with --tls auto
// they get certificates.
func configuredHosts(c serveConfig) []string {
	var hosts []string
	if c.api.PublicURL != "" {
		u, _ := url.Parse(c.api.PublicURL) // validated
		hosts = append(hosts, strings.ToLower(u.Hostname()))
	}
	for _, d := range c.api.Domains {
		if !strings.Contains(d, "://") {
			d = "https://" + d
		}
		u, _ := url.Parse(d) // validated
		if h := strings.ToLower(u.Hostname()); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// shortenerApp is what `serve` and the Lambda mode run over a store: the
// HTTP handler, and what must be closed once it stops serving.
type shortenerApp struct {
	handler *httpapi.Handler
	store   shortener.Store
	visits  *visits.Aggregator // nil with --visits=false
	// flush writes what the store holds of the visits (DynamoDB's visit
	// log), after the aggregator's last batch; nil when it holds none.
	flush   func(context.Context) error
	closers []func() error // closed after the visits are flushed, before the store
}

// newShortener builds the shortenerApp over a raw store: metrics registry,
// store decorators, the visits aggregator, the HTTP handler. On error
// everything opened, the raw store included, is closed.
func newShortener(logger *slog.Logger, c serveConfig, raw shortener.Store, kind string) (*shortenerApp, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerStoreMetrics(raw, reg)
	if c.api.AccessLog != nil {
		registerAccessLogMetrics(reg, c.api.AccessLog.Stats)
	}
	store, err := wrapStore(logger, raw, kind, c, reg)
	if err != nil {
		raw.Close()
		return nil, err
	}
	// Export, import and backup through the API work on the store itself,
	// under its metrics and cache.
	c.api.Records = raw
	if b, ok := raw.(interface{ WriteBackup(io.Writer) error }); ok {
		c.api.Backup = func(_ context.Context, w io.Writer) error { return b.WriteBackup(w) }
	}
	app := &shortenerApp{store: store}
	if d, ok := raw.(*dynamodb.Store); ok && c.visits.enabled {
		app.flush = d.FlushVisits
		registerVisitLogMetrics(reg, d.VisitLogStats)
	}
	if c.visits.enabled {
		agg, geo, err := newVisits(logger, c.visits, store, reg)
		if err != nil {
			store.Close()
			return nil, err
		}
		if geo != nil {
			app.closers = append(app.closers, geo.Close)
		}
		app.visits, c.api.Visits = agg, agg
	}
	if app.handler, err = newShortenerHandler(logger, c, store, reg); err != nil {
		app.Close(context.Background(), logger)
		return nil, err
	}
	return app, nil
}

// Close flushes the counted visits (within ctx), then closes the rest and
// the store. Call it once the handler serves no more requests.
func (a *shortenerApp) Close(ctx context.Context, logger *slog.Logger) error {
	if a.visits != nil {
		if err := a.visits.Close(ctx); err != nil {
			m := a.visits.Metrics()
			logger.Error("flush visits on shutdown", "error", err, "recorded", m.Recorded, "flushed", m.FlushedVisits)
		} else {
			logger.Info("visits flushed", "flushed_total", a.visits.Metrics().FlushedVisits)
		}
	}
	if a.flush != nil {
		if err := a.flush(ctx); err != nil {
			logger.Error("write the visit log on shutdown", "error", err)
		}
	}
	for _, c := range a.closers {
		if err := c(); err != nil {
			logger.Error("close", "error", err)
		}
	}
	return a.store.Close()
}

func serve(ctx context.Context, logger *slog.Logger, c serveConfig) error {
	access, err := openAccessLog(logger, c)
	if err != nil {
		return err
	}
	if access != nil {
		defer closeAccessLog(logger, access) // on errors; after a drain it is closed already
		defer reopenOnHUP(logger, access)()
		c.api.AccessLog = access
	}
	raw, kind, err := openStore(ctx, logger, c)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			// A signal during a long open (a migration, an index
			// built): the work stopped between batches, and the next
			// start resumes it.
			logger.Info("stopped while opening the store; the next start resumes what the open was doing", "store", c.store, "error", err.Error())
			return nil
		}
		return err
	}
	stopControl, setControlURL := startStoreControl(ctx, logger, raw)
	defer stopControl()
	stopDebug, err := startDebug(logger, c.debugAddr)
	if err != nil {
		raw.Close()
		return err
	}
	defer stopDebug()
	if c.overloadDelay > 0 {
		mon := overload.NewMonitor(c.overloadDelay)
		c.api.Overload = mon
		mctx, stop := context.WithCancel(context.Background())
		defer stop()
		go mon.Run(mctx, overload.DefaultWindow)
	}
	c.api.Registry = raw // every instance on the store serves its domains
	app, err := newShortener(logger, c, raw, kind)
	if err != nil {
		return err
	}
	defer watchDomains(ctx, logger, app.handler, c.domainRefresh)()
	// Runs after the server has drained: every counted visit is flushed,
	// then the store closes.
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
		defer cancel()
		if err := app.Close(ctx, logger); err != nil {
			logger.Error("close store", "error", err)
		}
	}()
	c.server.HSTS = c.https.hstsHeader()
	srv := httpapi.NewServer(logger, app.handler, c.server)
	served := make(chan error, 1)
	var ln net.Listener // the address probed and told on the store's control socket
	if c.https.mode == "off" {
		if ln, err = net.Listen("tcp", c.addr); err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		go func() { served <- srv.Serve(ln) }()
	} else {
		var stopHTTPS func()
		if ln, stopHTTPS, err = startHTTPS(ctx, logger, c, srv, app.handler, served); err != nil {
			return err
		}
		defer stopHTTPS()
	}
	setControlURL(localURL(ln.Addr()))
	logger.Info("linkgate serve listening", "addr", ln.Addr().String(), "store", c.store,
		"cache_entries", c.cacheSize.entries(kind), "version", version)
	if c.api.CreateAccess != httpapi.AccessKey && !loopbackAddr(ln.Addr()) {
		logger.Warn("anyone who can reach this address may create links (--create-access public): an open link relay on the internet; use --create-access key with API keys (linkgate keys), or at least --create-rate",
			"addr", ln.Addr().String(), "create_rate", c.api.CreateRate.String())
	}
	sd := notifyReady(logger, "serving on "+ln.Addr().String()+", store "+c.store, probeHTTP(ln.Addr(), "/healthz", http.StatusOK))
	defer sd.Stopping()

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sd.Stopping()
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
	if access != nil {
		closeAccessLog(logger, access) // every request answered is in it
	}
	logger.Info("stopped")
	return nil
}

// watchDomains reads the domain registry now, then every interval, until
// the returned stop is called. A failed read keeps the domains read
// before (logged).
func watchDomains(ctx context.Context, logger *slog.Logger, h *httpapi.Handler, interval time.Duration) (stop func()) {
	read := func(ctx context.Context) {
		if err := h.RefreshDomains(ctx); err != nil {
			logger.Warn("domain registry: keeping the domains read before", "error", err)
		}
	}
	read(ctx)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
				read(wctx)
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (h *httpsConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&h.mode, "tls", "off", "HTTPS: off (cleartext HTTP/1.1 on --addr), auto (certificates by ACME for every --domain, obtained at start and renewed; docs/serve.md#https), or `CERT.pem,KEY.pem` (files, reloaded when they change). With auto or files, --https-addr serves everything over HTTP/1.1 and HTTP/2, --http-addr answers ACME HTTP-01 and /healthz and sends 308 to https for the rest, and --addr is not used")
	fs.StringVar(&h.addr, "https-addr", ":443", "with --tls, the HTTPS `address` (host:port)")
	fs.StringVar(&h.httpAddr, "http-addr", ":80", "with --tls, the cleartext `address`: ACME HTTP-01 challenges, /healthz, /readyz, and 308 to https")
	fs.StringVar(&h.acmeCA, "acme-ca", letsEncrypt, "with --tls auto, the ACME CA's directory `URL` (Let's Encrypt staging: https://acme-staging-v02.api.letsencrypt.org/directory)")
	fs.StringVar(&h.acmeEmail, "acme-email", "", "with --tls auto, the ACME account's contact `address` (optional)")
	fs.StringVar(&h.acmeCARoot, "acme-ca-root", "", "with --tls auto, a PEM `file` of the root certificates to trust for the ACME CA's own HTTPS, instead of the system's (a private or test CA)")
	fs.StringVar(&h.acmeDir, "acme-dir", "", "with --tls auto, the `directory` of certificates, keys and the ACME account (default: certmagic beside the pebble store's directory, data/certmagic)")
	fs.DurationVar(&h.hsts, "hsts", 0, "with --tls, answer over HTTPS with Strict-Transport-Security: max-age of this `duration` (e.g. 8760h); 0: none")
	fs.DurationVar(&h.orderRate, "acme-order-rate", time.Minute, "with --tls auto, certificates ordered on demand (a configured domain without one at its first handshake) beyond --acme-order-burst: one per this `duration`")
	fs.IntVar(&h.orderBurst, "acme-order-burst", 10, "with --tls auto, certificates ordered on demand at once before --acme-order-rate applies")
}

// validate checks the HTTPS flags; domains are --domain's.
func (h *httpsConfig) validate(domains []string, publicURL string) error {
	switch h.mode {
	case "off":
		return nil
	case "auto":
		if len(domains) == 0 && publicURL == "" {
			return cli.Usagef("--tls auto: no domain to get a certificate for (give --domain)")
		}
		if !strings.HasPrefix(h.acmeCA, "https://") {
			return cli.Usagef("--acme-ca %q: want an https:// URL", h.acmeCA)
		}
	default:
		c, k, ok := strings.Cut(h.mode, ",")
		if !ok || strings.TrimSpace(c) == "" || strings.TrimSpace(k) == "" {
			return cli.Usagef("--tls %q: want off, auto or CERT.pem,KEY.pem", h.mode)
		}
	}
	if h.hsts < 0 {
		return cli.Usagef("--hsts %s: negative", h.hsts)
	}
	return nil
}

// domainsFlag is --domain: repeated, or a comma-separated list, appended.
type domainsFlag struct{ d *[]string }

func (f domainsFlag) String() string {
	if f.d == nil {
		return ""
	}
	return strings.Join(*f.d, ",")
}

func (f domainsFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*f.d = append(*f.d, s)
		}
	}
	return nil
}
