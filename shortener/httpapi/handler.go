// Package httpapi is the shortener's HTTP API: the seed-compatible routes,
// the redirect, the REST API v1 and the operational endpoints (routes.go
// lists them all).
//
// It runs on fasthttp, chosen on evidence (docs/serve-benchmarks.md): a
// trivial redirect on one core reaches about 0.98× nginx with fasthttp and
// about 0.5× with net/http. The engine stays inside this package: the
// Handler also implements http.Handler, through an adapter that copies the
// request into a fasthttp.RequestCtx and the response back, so net/http
// servers, httptest and the Lambda event adapter call the very same code.
package httpapi

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/linkgate/linkgate/internal/accesslog"
	"github.com/linkgate/linkgate/internal/overload"
	"github.com/linkgate/linkgate/shortener"
)

// MaxBodyBytes is the largest request body accepted; larger bodies get 413.
const MaxBodyBytes = 8 << 10

// DefaultMaxInflightCreates is linkgate serve's create budget
// (--max-inflight-creates). By Little's law a stall of W at a create rate
// of λ leaves λ·W creates in flight: at issue 12's target, 30,000
// durable creates/s within a p99.9 of 70 ms, that is 2,100, all of which
// would be answered within the objective. A budget below it sheds them
// (256 did, as soon as a stall passed 32 ms at 8,000/s:
// docs/serve-benchmarks.md, "Both cores"). An in-flight create mostly
// waits for the log's fdatasync; what it holds beyond its connection's
// goroutine and buffers, which exist whether or not it is admitted, is
// its pebble batch. Creates that crowd out redirects are refused by the
// adaptive budget and rate (Config.Overload), which start from this.
const DefaultMaxInflightCreates = 4096

// Config configures a Handler. Zero values take the defaults noted.
type Config struct {
	// PublicURL is the base of returned short links, e.g.
	// "https://sho.rt". Empty: http://<request Host> when the Host is a
	// loopback name or address (or TrustHost), else the address the
	// connection arrived on: a Host header a client chose never reaches
	// a returned link.
	PublicURL string
	// Domains are the short-link domains this server answers for, e.g.
	// "sho.rt" (https) or "http://go.example.com:8080". Set, a request
	// whose Host is none of them is answered 421 misdirected_request (the
	// probes /healthz, /readyz and /metrics excepted: load balancers send
	// their own Host), and returned links start with the domain the
	// request named. Exclusive with PublicURL, which is one domain whose
	// Host is not checked.
	Domains []string
	// Registry, if set, keeps the domains added at run time through the
	// API (domainsapi.go), served beside Domains once RefreshDomains has
	// read them. They need Domains: the first is the default domain.
	// nil: only Domains.
	Registry shortener.DomainStore
	// TrustHost says the Host header is set by a trusted front end, not
	// by the client: Lambda's adapter sets it from the event's
	// requestContext.domainName. Without a PublicURL, links use it.
	TrustHost bool
	// RedirectStatus is 301, 302, 307 or 308. Default 302.
	RedirectStatus int
	// AdminKey is a key with every scope for the admin routes (list,
	// edit, delete, keys, export, import, backup). Empty: only API keys
	// (Keys) are accepted there, a request without a valid one answers
	// 401; without Keys either, the routes are off and answer 403.
	AdminKey string
	// MaxInflight sheds load: with more redirects and lookups than this
	// in flight, new ones are answered 503 overloaded at once. 0: no
	// limit. Creates, QR codes and statistics, and admin calls have
	// budgets of their own (below), so a flood of one cannot shed another.
	MaxInflight int
	// MaxInflightCreates, MaxInflightQR (QR codes and statistics) and
	// MaxInflightAdmin are the other classes' budgets. 0: no limit.
	MaxInflightCreates, MaxInflightQR, MaxInflightAdmin int
	// Overload, if set, adapts the creates' and the QR and statistics
	// budgets to the CPU the server gets (internal/overload): halved while
	// the scheduler runs late and redirects are being served, so that they
	// cannot crowd out redirects, which it never limits. nil: the budgets
	// are fixed.
	Overload *overload.Monitor
	// OverloadRate, with Overload, also bounds the rate at which creates
	// and QR and statistics requests start (overload.Rate): lowered after
	// the scheduler ran late while redirects were served, so that these
	// classes cannot keep the core busy however few are in flight.
	OverloadRate bool
	// ShedFloor is the requests of a class in flight below which none of
	// it is shed by Overload's limits and rates: a lone client sending
	// one request at a time never is, whatever a burst before it made of
	// them. A fixed budget (MaxInflight…) smaller than it still applies.
	// 0: overload.DefaultFloor() (2 × GOMAXPROCS); negative: none.
	ShedFloor int
	// ShedDelay, with Overload, holds each shed create, QR or statistics
	// request about this long before its 503 (between half and 1.5 times
	// it; see Handler.shed). 0: none.
	ShedDelay time.Duration
	// RequestTimeout bounds store calls of a create, lookup or admin call.
	// Default 5s.
	RequestTimeout time.Duration
	// ReadyTimeout bounds the store ping of /readyz. Default 1s.
	ReadyTimeout time.Duration
	// Visits, if set, records every followed redirect (GET only: never
	// HEAD, nor the seed's getFullURL).
	Visits VisitRecorder
	// StatsPublic serves GET /api/v1/links/{id}/stats to anyone; else it
	// needs the admin key.
	StatsPublic bool
	// UI serves the web page at / and its assets under /static/.
	UI bool
	// QRCacheBytes bounds the cache of drawn QR images. Default
	// DefaultQRCacheBytes.
	QRCacheBytes int
	// QRRenders bounds the QR images drawn at once. Default
	// DefaultQRRenders.
	QRRenders int
	// CreateAccess says who may create links: AccessPublic (default) or
	// AccessKey (a key with scope links:create).
	CreateAccess Access
	// Keys, if set, keeps the API keys (the link store's, when it keeps
	// them); nil: only the AdminKey.
	Keys shortener.KeyStore
	// CreateRate limits the creates of each client address (ratelimit.go);
	// CreateRateKey those of each API key, instead, for requests with
	// one. The zero Rate is no limit.
	CreateRate, CreateRateKey Rate
	// Now is the clock of the rate limits. Default time.Now.
	Now func() time.Time
	// ForwardQuery is the default of links whose forward_query is unset:
	// the visitor's query string is added to the target
	// (shortener.AppendForwardQuery).
	ForwardQuery bool
	// NotFoundURL and ExpiredURL, if set, are where a browser following
	// an unknown or expired link is sent (302) instead of the built-in
	// pages: absolute http(s) URLs. Clients asking for JSON still get the
	// JSON error.
	NotFoundURL, ExpiredURL string
	// Records, if set, serves the export and the import of every link
	// with its statistics (transfer.go): the store's own, under any read
	// cache (an import then reaches the cache's misses within its
	// negative TTL). nil: those routes answer 404.
	Records shortener.RecordStore
	// Backup, if set, serves GET /api/v1/backup: it writes a consistent
	// copy of the store to w, as an archive. nil: 404.
	Backup func(ctx context.Context, w io.Writer) error
	// StreamTimeout bounds each read and write of a streamed import,
	// export or backup, instead of the server's whole-request timeouts.
	// Default DefaultStreamTimeout.
	StreamTimeout time.Duration
	// TrustedProxies are the peers whose X-Forwarded-For, Forwarded and
	// CloudFront-Viewer-* headers say who the client is (visits, rate
	// limits, logs). nil: none, the peer is the client.
	TrustedProxies *TrustedProxies
	// SessionTTL is the lifetime of a web page's session (session.go).
	// Default DefaultSessionTTL.
	SessionTTL time.Duration
	// SignInRate limits the sign-ins of each client address. The zero
	// Rate is DefaultSignInRate.
	SignInRate Rate
	// AccessLog, if set, gets one line per request (accesslog.go): the
	// client's address as TrustedProxies say it, the request line,
	// status, body size, time taken, Referer and User-Agent.
	AccessLog *accesslog.Log
}

// VisitRecorder counts visits (visits.Aggregator). Record must not block
// nor retain its arguments, which alias the request's buffers; ip is the
// client's (see TrustedProxies), country what a trusted CloudFront said
// ("" if nothing); link is the link as the redirect resolved it (its ID
// and URL are empty).
type VisitRecorder interface {
	Record(id, referrer, userAgent, query []byte, ip netip.Addr, country string, now time.Time, link shortener.Link)
}

// AddrUser is a VisitRecorder that says whether it uses the client's
// address (visits.Aggregator: only with GeoIP). When it does not and no
// TrustedProxies are configured (which may name a country), the redirect
// skips finding the address: Record gets the zero Addr and "". A
// recorder that does not implement it always gets them.
type AddrUser interface {
	UsesAddr() bool
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch c.RedirectStatus {
	case 0, 301, 302, 307, 308:
	default:
		return fmt.Errorf("redirect status %d: must be 301, 302, 307 or 308", c.RedirectStatus)
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("public URL %q: must be an absolute http(s) URL without query, like https://sho.rt", c.PublicURL)
		}
	}
	for _, u := range []struct{ name, v string }{{"not-found URL", c.NotFoundURL}, {"expired URL", c.ExpiredURL}} {
		if u.v != "" && !absoluteHTTPURL(u.v) {
			return fmt.Errorf("%s %q: must be an absolute http(s) URL, like https://example.com/missing", u.name, u.v)
		}
		if u.v != "" && c.shortLinkPath(u.v) {
			return fmt.Errorf("%s %q: is a short link of this server, which would redirect in a loop once it is missing", u.name, u.v)
		}
	}
	if c.PublicURL != "" && len(c.Domains) > 0 {
		return fmt.Errorf("public URL and domains: give one or the other (one domain: either)")
	}
	if _, err := parseDomains(c.Domains); err != nil {
		return err
	}
	switch c.CreateAccess {
	case "", AccessPublic, AccessKey:
	default:
		return fmt.Errorf("create access %q: must be public or key", c.CreateAccess)
	}
	for _, r := range []Rate{c.CreateRate, c.CreateRateKey, c.SignInRate} {
		if r.N < 0 || r.N > 0 && r.Per <= 0 {
			return fmt.Errorf("rate %v: must be N per a positive period", r)
		}
	}
	if c.MaxInflight < 0 || c.MaxInflightCreates < 0 || c.MaxInflightQR < 0 || c.MaxInflightAdmin < 0 || c.ShedDelay < 0 || c.RequestTimeout < 0 || c.ReadyTimeout < 0 || c.SessionTTL < 0 || c.QRCacheBytes < 0 || c.QRRenders < 0 || c.StreamTimeout < 0 {
		return fmt.Errorf("max in-flight and timeouts must not be negative")
	}
	return nil
}

// absoluteHTTPURL reports whether s is an absolute http(s) URL with a
// host that can be sent as a Location as it is.
func absoluteHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		!strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f })
}

// shortLinkPath reports whether raw is a short-link address on this
// server's public URL or one of its domains: /{one segment}.
func (c Config) shortLinkPath(raw string) bool {
	u, _ := url.Parse(raw) // checked by absoluteHTTPURL
	p := strings.TrimPrefix(u.EscapedPath(), "/")
	if p == "" || strings.Contains(p, "/") {
		return false
	}
	for _, base := range append([]string{c.PublicURL}, c.Domains...) {
		if base == "" {
			continue
		}
		if !strings.Contains(base, "://") {
			base = "https://" + base
		}
		if b, err := url.Parse(base); err == nil && strings.EqualFold(b.Host, u.Host) {
			return true
		}
	}
	return false
}

// Handler serves the API. Create it with NewHandler.
type Handler struct {
	logger  *slog.Logger
	svc     *shortener.Service
	metrics *Metrics
	cfg     Config

	publicURL      string                      // without trailing slash, or ""
	static         []domain                    // Config.Domains; none: any Host
	domains        atomic.Pointer[domainSet]   // static, then the registry's (RefreshDomains)
	refreshMu      sync.Mutex                  // held by RefreshDomains
	refreshed      time.Time                   // when RefreshDomains last read the registry
	redirectStatus int                         // 30x
	cacheControl   []byte                      // for redirects
	adminKey       *[32]byte                   // SHA-256 of the admin key, nil when admin is off
	maxInflight    [numClasses]int64           // 0: no limit
	floor          int64                       // Config.ShedFloor: in flight, none shed by adaptive or rates
	adaptive       [numClasses]*overload.Limit // Config.Overload's limits; nil: maxInflight
	rates          [numClasses]*overload.Rate  // Config.OverloadRate's rates; nil: none
	metricsHandler fasthttp.RequestHandler
	visits         VisitRecorder // nil: visits are not counted
	visitAddr      bool          // visits need the client's address or country
	wall           wallClock     // the time of a visit
	ui             *ui           // nil: no web page
	qr             *qrCodes
	createIP       *buckets // nil: no limit
	createKey      *buckets // nil: no limit
	now            func() time.Time
	keys           *keyring
	sessions       *sessions // the web page's (session.go)
	signIns        *buckets
	streamTimeout  time.Duration // Config.StreamTimeout
	importing      sync.Mutex    // held by the import running
}

// NewHandler returns the API over svc. Metrics are recorded in metrics and
// /metrics serves everything gatherer has (the metrics, Go runtime and
// process collectors the caller registered).
func NewHandler(logger *slog.Logger, svc *shortener.Service, metrics *Metrics, gatherer prometheus.Gatherer, cfg Config) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.RedirectStatus == 0 {
		cfg.RedirectStatus = fasthttp.StatusFound
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = time.Second
	}
	if cfg.QRCacheBytes == 0 {
		cfg.QRCacheBytes = DefaultQRCacheBytes
	}
	if cfg.QRRenders == 0 {
		cfg.QRRenders = DefaultQRRenders
	}
	qr, err := newQRCodes(cfg.QRCacheBytes, cfg.QRRenders, metrics.qrDraws)
	if err != nil {
		return nil, err
	}
	h := &Handler{
		logger:         logger,
		svc:            svc,
		metrics:        metrics,
		cfg:            cfg,
		publicURL:      strings.TrimSuffix(cfg.PublicURL, "/"),
		redirectStatus: cfg.RedirectStatus,
		cacheControl:   []byte("no-store"),
		maxInflight: [numClasses]int64{classRedirect: int64(cfg.MaxInflight), classCreate: int64(cfg.MaxInflightCreates),
			classQRStats: int64(cfg.MaxInflightQR), classAdmin: int64(cfg.MaxInflightAdmin)},
		qr: qr,
		metricsHandler: fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{
			ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelError),
		})),
	}
	if cfg.RedirectStatus == 301 || cfg.RedirectStatus == 308 {
		// Permanent redirects are cached by browsers; keep it short and
		// private so edits, deletes and visit counts still work.
		h.cacheControl = []byte("private, max-age=90")
	}
	if cfg.AdminKey != "" {
		sum := sha256.Sum256([]byte(cfg.AdminKey))
		h.adminKey = &sum
	}
	if h.createIP, err = newBuckets(cfg.CreateRate); err != nil {
		return nil, err
	}
	if h.createKey, err = newBuckets(cfg.CreateRateKey); err != nil {
		return nil, err
	}
	if h.keys, err = newKeyring(cfg.Keys); err != nil {
		return nil, err
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if h.sessions, err = newSessions(cfg.SessionTTL); err != nil {
		return nil, err
	}
	if cfg.SignInRate.N == 0 {
		cfg.SignInRate = DefaultSignInRate
	}
	if h.signIns, err = newBuckets(cfg.SignInRate); err != nil {
		return nil, err
	}
	h.static, _ = parseDomains(cfg.Domains) // validated
	h.domains.Store(newDomainSet(h.static, nil))
	switch {
	case cfg.ShedFloor == 0:
		h.floor = int64(overload.DefaultFloor())
	case cfg.ShedFloor > 0:
		h.floor = int64(cfg.ShedFloor)
	}
	if cfg.Overload != nil {
		cfg.Overload.Watch(metrics.inflight[classRedirect].started)
		for _, c := range []class{classCreate, classQRStats} {
			if h.maxInflight[c] > 0 {
				h.adaptive[c] = cfg.Overload.Limit(h.maxInflight[c])
				metrics.adaptiveLimit(c, h.adaptive[c])
			}
			if cfg.OverloadRate {
				h.rates[c] = cfg.Overload.Rate()
				metrics.adaptiveRate(c, h.rates[c])
			}
		}
	}
	h.streamTimeout = cfg.StreamTimeout
	if h.streamTimeout == 0 {
		h.streamTimeout = DefaultStreamTimeout
	}
	h.now = cfg.Now
	if h.now == nil {
		h.now = time.Now
	}
	h.visits = cfg.Visits
	h.visitAddr = cfg.TrustedProxies.Len() > 0
	if u, ok := cfg.Visits.(AddrUser); !ok || u.UsesAddr() {
		h.visitAddr = true
	}
	if cfg.UI {
		h.ui = newUI()
	}
	return h, nil
}

// ServeFastHTTP is the fasthttp entry point. Every request is counted and
// timed; beyond MaxInflight it is shed; a panic is answered 500 and never
// escapes.
func (h *Handler) ServeFastHTTP(ctx *fasthttp.RequestCtx) { h.serve(ctx, monotonic()) }

// serve serves a request that arrived at monotonic() == start.
func (h *Handler) serve(ctx *fasthttp.RequestCtx, start time.Duration) {
	if h.cfg.AccessLog != nil {
		defer h.logAccess(ctx, start) // after the panic's 500, below
	}
	r, id, allow := match(ctx)
	if c := r.class(); c != classOperational {
		if ds := h.domainSet(); len(ds.list) > 0 && ds.of(ctx.Host()) < 0 {
			writeError(ctx, fasthttp.StatusMisdirectedRequest, codeMisdirected, "this server does not answer for this Host; it serves "+ds.names())
			h.metrics.observe(r, fasthttp.StatusMisdirectedRequest, start)
			return
		}
		in := &h.metrics.inflight[c]
		if n := in.begin(); !h.admit(c, n) {
			in.end()
			h.shed(ctx, r, c, start)
			return
		}
		defer in.end()
	}
	defer func() {
		if p := recover(); p != nil {
			h.metrics.panics.Inc()
			h.logger.LogAttrs(context.Background(), slog.LevelError, "handler panic",
				slog.String("route", r.String()), slog.Any("panic", p))
			ctx.Response.Reset()
			writeError(ctx, fasthttp.StatusInternalServerError, string(shortener.Internal), "internal error")
			h.metrics.observe(r, fasthttp.StatusInternalServerError, start)
		}
	}()
	h.dispatch(ctx, r, id, allow, start)
	h.metrics.observe(r, ctx.Response.StatusCode(), start)
}

// admit reports whether the n-th request of class c in flight may run:
// within the class's budget, and, above the floor, within its adaptive
// limit and rate.
func (h *Handler) admit(c class, n int64) bool {
	if max := h.maxInflight[c]; max > 0 && n > max {
		return false
	}
	if n <= h.floor {
		if r := h.rates[c]; r != nil {
			r.Started()
		}
		return true
	}
	if l := h.adaptive[c]; l != nil && n > l.Load() {
		return false
	}
	return h.rates[c] == nil || h.rates[c].Allow()
}

// shed answers a request over its class's budget or rate: 503
// overloaded, with Retry-After. In a class the overload monitor limits,
// the answer is held for about Config.ShedDelay first (jitter), outside
// the budget: a client that floods its keep-alive connections (one
// request in flight on each) then gets few requests per second through
// each, so answering them takes little of the CPU the redirects need.
func (h *Handler) shed(ctx *fasthttp.RequestCtx, r route, c class, start time.Duration) {
	h.metrics.shed[c].Inc()
	writeErrorBody(ctx, fasthttp.StatusServiceUnavailable, overloadedBody)
	h.metrics.observe(r, fasthttp.StatusServiceUnavailable, start)
	if (h.adaptive[c] != nil || h.rates[c] != nil) && h.cfg.ShedDelay > 0 {
		time.Sleep(jitter(h.cfg.ShedDelay))
	}
}

// jitter returns a duration drawn evenly from [d/2, 3d/2). Shed requests
// held for exactly d would wake together — a flood's connections, shed
// at once, answered at once, sending and shed again at once — and each
// burst of hundreds of answers keeps the core from the redirects for
// milliseconds; spread out, the same answers cost the same CPU in
// slices of microseconds.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d)
}

// timeout returns a context for the store calls of one request. It is not
// derived from the fasthttp RequestCtx, whose Done closes as soon as the
// server starts shutting down: requests in flight then are drained, not
// cancelled.
func (h *Handler) timeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), h.cfg.RequestTimeout)
}

// shortURL returns the public short link of l, on its domain.
func (h *Handler) shortURL(ctx *fasthttp.RequestCtx, l shortener.Link) string {
	return h.linkBase(ctx, l.Domain) + "/" + l.ID
}

// baseURL is where this server's short links start when no domains are
// configured: the PublicURL; without one, the request's Host only when
// it names this machine (localhost, 127.0.0.1, [::1], with any port), as
// a local install's users type it; any other Host, which a client
// chooses freely, never reaches a returned link: the address the
// connection arrived on is used instead.
func (h *Handler) baseURL(ctx *fasthttp.RequestCtx) string {
	if h.publicURL != "" {
		return h.publicURL
	}
	scheme := "http://"
	if ctx.IsTLS() {
		scheme = "https://"
	}
	if host := ctx.Host(); len(host) <= maxHostHeader && len(host) > 0 && (h.cfg.TrustHost || loopbackHostHeader(string(host))) {
		return scheme + string(host)
	}
	if a, ok := ctx.LocalAddr().(*net.TCPAddr); ok && a.Port != 0 {
		ap := a.AddrPort()
		return scheme + netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
	}
	return scheme + "localhost"
}

// maxHostHeader bounds a Host header used in a link.
const maxHostHeader = 270

// loopbackHostHeader reports whether a Host header value is a loopback
// name or address with at most a numeric port.
func loopbackHostHeader(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	if _, err := strconv.ParseUint(port, 10, 16); port != "" && err != nil {
		return false
	}
	c, isIP, err := shortener.CanonicalHost(host)
	return err == nil && shortener.IsLoopbackHost(c, isIP) && strings.Trim(host, "[]") == c
}
