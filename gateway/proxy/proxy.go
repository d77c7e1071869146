// Package proxy is linkgate gateway's data plane: the HTTP engine
// (fasthttp, chosen by measurement — docs/gateway.md), route matching
// against an immutable snapshot swapped atomically on every config change,
// the plugin phases, and the reverse proxy with balancing, retries,
// timeouts and health checks. State that must survive a reload —
// connection pools, node health, plugin counters — lives outside snapshots.
package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/certs"
	"github.com/linkgate/linkgate/gateway/router"
	"github.com/linkgate/linkgate/internal/deadline"
	"github.com/linkgate/linkgate/internal/linger"
)

// Options configure a Gateway.
type Options struct {
	Logger *slog.Logger
	// Admin serves /apisix/admin/ on the data listener when non-nil.
	Admin http.Handler
	// ServerHeader replaces the upstream's Server header ("" keeps it).
	ServerHeader string
	// Router is the route matching algorithm (apisix.router.http).
	Router router.Mode
	// ShowUpstreamStatus sends X-APISIX-Upstream-Status on every proxied
	// response, not only after a 5xx (show_upstream_status_in_response_header).
	ShowUpstreamStatus bool
	// ConsumerHeaders sends the identified consumer upstream as APISIX
	// 3.x does (X-Consumer-Username, X-Credential-Identifier,
	// X-Consumer-Custom-ID, replacing what the client sent); 2.14 sends
	// none.
	ConsumerHeaders bool
	// MaxBodySize limits request bodies (bytes; 0: no limit, as APISIX's
	// client_max_body_size 0). Bodies stream, so it bounds what upstreams
	// receive, not memory.
	MaxBodySize int
	// ReadTimeout bounds reading a client request (headers and body).
	ReadTimeout time.Duration
	// IdleTimeout closes idle client keep-alive connections.
	IdleTimeout time.Duration
	// WriteTimeout bounds writing a response to a client, so a client
	// that stops reading cannot hold a connection and its buffers forever
	// (nginx's send_timeout, though this bounds the whole response, not
	// each write).
	WriteTimeout time.Duration

	// Certs chooses the certificate of each TLS handshake (ServeTLS).
	Certs *certs.Manager
	// HandshakeTimeout bounds a TLS handshake (default 10 s): a client that
	// opens a connection and sends nothing is dropped after it.
	HandshakeTimeout time.Duration
	// MaxConcurrentStreams caps the streams in flight on each HTTP/2
	// connection (default 128, nginx's http2_max_concurrent_streams).
	MaxConcurrentStreams uint32
	// MaxHeaderBytes bounds an HTTP/2 request's header block (default 32 KiB).
	MaxHeaderBytes int
	// WebSocketMaxDuration ends a WebSocket tunnel after this long (0: no
	// limit); an idle one ends after its route's read timeout
	// (websocket.go).
	WebSocketMaxDuration time.Duration
	// ACMEChallenge, when set, is offered the requests under
	// /.well-known/acme-challenge/ before routing, and answers those of
	// ACME HTTP-01 validations (returning true).
	ACMEChallenge func(*fasthttp.RequestCtx) bool
}

// acmeChallengePrefix is the path of ACME HTTP-01 validation requests.
var acmeChallengePrefix = []byte("/.well-known/acme-challenge/")

// Gateway serves traffic with the latest loaded configuration.
type Gateway struct {
	opts   Options
	log    *slog.Logger
	admin  fasthttp.RequestHandler
	snap   atomic.Pointer[snapshot]
	pools  *pools
	dogs   deadline.Watchdogs // enforce client and upstream timeouts
	ctxs   sync.Pool
	server *fasthttp.Server // HTTP/1.1, cleartext and over TLS
	limits deadline.Limits  // of HTTP/1.1 client connections
	live   atomic.Int64     // client connections not yet closed for good (internal/linger)
	tlsState

	mu       sync.Mutex // guards checkers
	checkers map[checkerKey]*checker

	tunMu     sync.Mutex // guards tunnels and tunClosed
	tunnels   map[*tunnel]struct{}
	tunClosed bool

	accepted atomic.Int64
	requests atomic.Int64
}

// snapshot is one immutable configuration as served.
type snapshot struct {
	compiled *gateway.Compiled
	router   *router.Router
	routes   map[*gateway.RouteEntry]*routeRT
	global   phases
	// pluginUps are the upstreams plugins may choose (traffic-split).
	pluginUps map[*gateway.UpstreamRef]*upstreamRT
	// consumerHeaders is Options.ConsumerHeaders.
	consumerHeaders bool
}

type routeRT struct {
	e  *gateway.RouteEntry
	up *upstreamRT
	phases
}

// phases is a chain split by phase once per snapshot.
type phases struct {
	rewrite  []step[gateway.Rewriter]
	access   []step[gateway.Accessor]
	headers  []step[gateway.HeaderFilter]
	bodies   []step[gateway.BodyFilter]
	encoders []step[gateway.BodyEncoder]
	log      []step[gateway.Logger]
}

// step is one plugin instance of a phase; name finds a consumer's override.
type step[T any] struct {
	name string
	p    T
}

// New returns a Gateway serving an empty configuration (every request 404).
func New(opts Options) *Gateway {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = 60 * time.Second
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 60 * time.Second // APISIX's keepalive_timeout
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 60 * time.Second
	}
	g := &Gateway{opts: opts, log: opts.Logger, checkers: map[checkerKey]*checker{}}
	g.pools = newPools(&g.dogs)
	g.ctxs.New = func() any { return &reqCtx{respHdrs: make([]respHeader, 0, 4)} }
	if opts.Admin != nil {
		g.admin = adminHandler(opts.Admin)
	}
	g.limits = deadline.Limits{Read: opts.ReadTimeout, Write: opts.WriteTimeout, Idle: opts.IdleTimeout}
	g.server = g.newServer()
	g.initTLS()
	g.snap.Store(g.build(&gateway.Compiled{}))
	return g
}

// Load builds a snapshot of c and swaps it in; requests in flight finish on
// the old one, and open TLS connections keep their certificate. Active
// health checkers are started and stopped to match.
func (g *Gateway) Load(c *gateway.Compiled) {
	if g.opts.Certs != nil {
		g.opts.Certs.Load(c.SSLs) // the next handshakes use them
	}
	s := g.build(c)
	g.snap.Store(s)
	g.reconcileCheckers(s)
}

func (g *Gateway) build(c *gateway.Compiled) *snapshot {
	s := &snapshot{compiled: c, router: router.BuildMode(c.Routes, g.opts.Router), routes: make(map[*gateway.RouteEntry]*routeRT, len(c.Routes)),
		global: splitChain(c.Global), consumerHeaders: g.opts.ConsumerHeaders}
	ups := map[string]*upstreamRT{}
	for _, e := range c.Routes {
		rt := &routeRT{e: e, phases: splitChain(e.Chain)}
		if e.Upstream != nil {
			// Upstreams shared by id share one balancer, unless a route overrides the timeout.
			key := e.UpstreamKey
			if e.Timeout != e.Upstream.Timeout {
				key += "@routes/" + e.ID
			}
			up, ok := ups[key]
			if !ok {
				up = newUpstreamRT(g.pools, e.UpstreamKey, e.Upstream, e.Timeout)
				ups[key] = up
			}
			rt.up = up
		}
		s.routes[e] = rt
		s.addPluginUpstreams(g.pools, ups, e.Chain)
	}
	s.addPluginUpstreams(g.pools, ups, c.Global)
	return s
}

// addPluginUpstreams prepares the upstreams the chain's instances may
// choose; one referred to by id shares its runtime with the routes using it.
func (s *snapshot) addPluginUpstreams(p *pools, ups map[string]*upstreamRT, c gateway.Chain) {
	for _, in := range c {
		ch, ok := in.Impl.(gateway.UpstreamChooser)
		if !ok {
			continue
		}
		for _, ref := range ch.Upstreams() {
			u := ref.Inline
			if ref.ID != "" {
				u = s.compiled.Upstreams[ref.ID]
			}
			if u == nil {
				continue // answered 502 when chosen
			}
			up, ok := ups[ref.Key]
			if !ok {
				up = newUpstreamRT(p, ref.Key, u, u.Timeout)
				ups[ref.Key] = up
			}
			if s.pluginUps == nil {
				s.pluginUps = map[*gateway.UpstreamRef]*upstreamRT{}
			}
			s.pluginUps[ref] = up
		}
	}
}

func splitChain(c gateway.Chain) phases {
	var ph phases
	for _, in := range c {
		addStep(&ph.rewrite, in)
		addStep(&ph.access, in)
		addStep(&ph.headers, in)
		addStep(&ph.bodies, in)
		addStep(&ph.encoders, in)
		addStep(&ph.log, in)
	}
	return ph
}

func addStep[T any](steps *[]step[T], in gateway.Instance) {
	if p, ok := in.Impl.(T); ok {
		*steps = append(*steps, step[T]{in.Name, p})
	}
}

func hasLogger(c gateway.Chain) bool {
	for _, in := range c {
		if _, ok := in.Impl.(gateway.Logger); ok {
			return true
		}
	}
	return false
}

// run calls fn for each instance of a phase until it returns false: the
// route's, with a consumer's own configuration of a plugin replacing the
// route's (APISIX's merge of consumer and route plugins), then the
// consumer's plugins the route lacks. It reports whether fn never stopped.
func run[T any](steps []step[T], con *gateway.ConsumerEntry, fn func(T) bool) bool {
	if con == nil || len(con.Chain) == 0 {
		for i := range steps {
			if !fn(steps[i].p) {
				return false
			}
		}
		return true
	}
	for i := range steps {
		p, ok := override(con, steps[i])
		if ok && !fn(p) {
			return false
		}
	}
	for _, in := range con.Chain {
		if q, ok := in.Impl.(T); ok && !hasStep(steps, in.Name) {
			if !fn(q) {
				return false
			}
		}
	}
	return true
}

// override is the consumer's own instance of step's plugin, if it has one;
// ok is false when that instance is not in this phase.
func override[T any](con *gateway.ConsumerEntry, st step[T]) (p T, ok bool) {
	for _, in := range con.Chain {
		if in.Name == st.name {
			p, ok = in.Impl.(T)
			return p, ok
		}
	}
	return st.p, true
}

func hasStep[T any](steps []step[T], name string) bool {
	for i := range steps {
		if steps[i].name == name {
			return true
		}
	}
	return false
}

func (g *Gateway) reconcileCheckers(s *snapshot) {
	want := map[checkerKey]*upstreamRT{}
	all := make([]*upstreamRT, 0, len(s.routes)+len(s.pluginUps))
	for _, rt := range s.routes {
		all = append(all, rt.up)
	}
	for _, up := range s.pluginUps {
		all = append(all, up)
	}
	for _, up := range all {
		if up == nil {
			continue
		}
		if up.checks == nil || up.checks.Active == nil {
			if up.checks == nil || up.checks.Passive == nil {
				for _, n := range up.nodes {
					if !n.health.healthy() {
						n.health.resetHealthy()
					}
				}
			}
			continue
		}
		conf, _ := json.Marshal(struct {
			C *gateway.Checks
			N gateway.Nodes
		}{up.checks, up.u.Nodes})
		want[checkerKey{up.key, string(conf)}] = up
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, c := range g.checkers {
		if _, ok := want[k]; !ok {
			c.cancel()
			<-c.done
			delete(g.checkers, k)
		}
	}
	for k, up := range want {
		if _, ok := g.checkers[k]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		c := &checker{cancel: cancel, done: make(chan struct{})}
		g.checkers[k] = c
		go func() {
			defer close(c.done)
			runChecker(ctx, up, g.log)
		}()
	}
}

// Serve accepts connections on ln until Shutdown.
//
// fasthttp runs without timeouts: every connection is a deadline.Conn
// applying ReadTimeout, IdleTimeout and WriteTimeout itself, with
// fasthttp's meaning, without a runtime timer per request (Handle tells
// it of each request).
func (g *Gateway) Serve(ln net.Listener) error {
	w := g.dogs.For(g.limits.Read, g.limits.Write, g.limits.Idle)
	return g.server.Serve(countingListener{w.Listener(linger.Listener(rawListener{ln}, &g.live), g.limits), &g.accepted})
}

// newServer is the HTTP/1.1 server of both listeners.
func (g *Gateway) newServer() *fasthttp.Server {
	return &fasthttp.Server{
		Handler:                      g.Handle,
		Name:                         g.opts.ServerHeader,
		NoDefaultServerHeader:        g.opts.ServerHeader == "",
		StreamRequestBody:            true, // bodies are read as they are proxied (stream.go)
		DisablePreParseMultipartForm: true,
		NoDefaultContentType:         true,
		CloseOnShutdown:              true,
		LazyRequestTime:              true, // RequestCtx.Time is not used: no clock read per request
		Logger:                       fasthttpLogger{g.log},
	}
}

// Shutdown stops accepting, waits for requests in flight (until ctx ends)
// and stops the health checkers.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.closeTLS()
	g.closeTunnels()
	err := g.server.ShutdownWithContext(ctx)
	if herr := g.h2.Shutdown(ctx); err == nil {
		err = herr
	}
	if lerr := linger.Wait(ctx, &g.live); err == nil {
		err = lerr
	}
	g.mu.Lock()
	for k, c := range g.checkers {
		c.cancel()
		<-c.done
		delete(g.checkers, k)
	}
	g.mu.Unlock()
	g.pools.close()
	return err
}

// Stats are the connection gauges of APISIX's prometheus exporter.
type Stats struct {
	Active, Accepted, Handled, Reading, Writing, Waiting, Requests int64
	// WebSockets are the open WebSocket tunnels.
	WebSockets int64
}

// Stats reads the current connection and request counts.
func (g *Gateway) Stats() Stats {
	var s Stats
	{
		open := int64(g.server.GetOpenConnectionsCount())
		busy := int64(g.server.GetCurrentConcurrency())
		s.Active, s.Writing, s.Waiting = open, busy, max(open-busy, 0)
	}
	s.Accepted = g.accepted.Load()
	s.Handled = s.Accepted
	s.Requests = g.requests.Load()
	s.WebSockets = g.openTunnels()
	return s
}

type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.n.Add(1)
	return &conn{Conn: c}, nil
}

type fasthttpLogger struct{ l *slog.Logger }

// Printf formats only when debug logging is on: fasthttp calls it on
// every request whose streamed body is read whole (the GraphQL variables).
func (f fasthttpLogger) Printf(format string, args ...any) {
	if f.l.Enabled(context.Background(), slog.LevelDebug) {
		f.l.Debug(fmt.Sprintf(format, args...))
	}
}

var (
	adminPrefix  = []byte("/apisix/admin")
	notFoundBody = []byte(`{"error_msg":"404 Route Not Found"}` + "\n")
	jsonType     = []byte("application/json")
)

// Handle serves one HTTP/1.1 request. It is the engine's hot path.
func (g *Gateway) Handle(fc *fasthttp.RequestCtx) {
	deadline.Handling(fc.Conn())
	g.handle(fc, false, nil)
}

// handle serves one request, received over HTTP/2 when h2; ws is an
// HTTP/2 WebSocket's stream (extended CONNECT).
func (g *Gateway) handle(fc *fasthttp.RequestCtx, h2 bool, ws *h2Stream) {
	g.requests.Add(1)
	p := fc.Path()
	if g.admin != nil && hasPrefix(p, adminPrefix) && (len(p) == len(adminPrefix) || p[len(adminPrefix)] == '/') {
		g.admin(fc)
		return
	}
	if g.opts.ACMEChallenge != nil && hasPrefix(p, acmeChallengePrefix) && g.opts.ACMEChallenge(fc) {
		return
	}
	rc := g.ctxs.Get().(*reqCtx)
	rc.init(fc)
	rc.h2, rc.h2req = h2, ws
	s := g.snap.Load()
	rc.snap = s
	rc.match = s.router.Match(b2s(fc.Method()), rc.host, b2s(fc.Path()), rc.remoteAddr, rc)
	if rc.match.Route != nil {
		rc.route = s.routes[rc.match.Route]
	}
	// Timing costs clock reads; only the log phase needs it.
	rc.timed = len(s.global.log) > 0 || (rc.route != nil && len(rc.route.log) > 0)
	if rc.timed {
		rc.start = time.Now()
		rc.reqLen = int64(len(fc.Request.Header.RawHeaders()))
		if fc.Request.IsBodyStream() {
			rc.reqLen += int64(max(fc.Request.Header.ContentLength(), 0))
		} else {
			rc.reqLen += int64(len(fc.Request.Body()))
		}
	}
	g.serve(rc)
	rc.applyRespHeaders()
	g.filter(rc)
	if rc.async {
		// The body goes to the client after this returns, or a tunnel
		// runs: the request ends when it has (or the client has gone).
		return
	}
	g.finish(rc, 0)
}

// finish runs the log phase of a request whose answer is sent (streamed
// bytes of its body) and releases its context.
func (g *Gateway) finish(rc *reqCtx, streamed int64) {
	if rc.timed {
		rc.fillLog(rc.start, rc.reqLen)
		rc.log.BytesSent += streamed
		// The route's loggers run before the global rules' (APISIX runs
		// them after): a plugin on both logs once, with the route's
		// configuration, as APISIX's run_policy prefer_route (prometheus).
		logAll := func(l gateway.Logger) bool { l.Log(rc, &rc.log); return true }
		if rc.route != nil {
			run(rc.route.log, rc.consumer, logAll)
		}
		run(rc.snap.global.log, nil, logAll)
	}
	rc.reset()
	g.ctxs.Put(rc)
}

// needsBody reports whether a plugin of the request needs the whole
// response body (then it is buffered, never streamed).
func (rc *reqCtx) needsBody() bool {
	if s := rc.snap; len(s.global.bodies)+len(s.global.encoders) > 0 {
		return true
	}
	if rt := rc.route; rt != nil && len(rt.bodies)+len(rt.encoders) > 0 {
		return true
	}
	if c := rc.consumer; c != nil {
		for _, in := range c.Chain {
			switch in.Impl.(type) {
			case gateway.BodyFilter, gateway.BodyEncoder:
				return true
			}
		}
	}
	return false
}

// filter runs the header filter phase, then the body filters and encoders
// on the whole body.
func (g *Gateway) filter(rc *reqCtx) {
	s, rt, con := rc.snap, rc.route, rc.consumer
	filterAll := func(f gateway.HeaderFilter) bool { f.FilterHeaders(rc); return true }
	run(s.global.headers, nil, filterAll)
	var routePh *phases
	if rt != nil {
		routePh = &rt.phases
		run(rt.headers, con, filterAll)
	}
	if len(s.global.bodies)+len(s.global.encoders) == 0 && (routePh == nil || (len(routePh.bodies)+len(routePh.encoders) == 0 && (con == nil || len(con.Chain) == 0))) {
		return
	}
	resp := &rc.fc.Response
	apply := func(out []byte) bool {
		if len(out) != len(resp.Body()) || (len(out) > 0 && &out[0] != &resp.Body()[0]) {
			resp.SetBody(out) // copies: out may be dst, reused below
			return true
		}
		return false
	}
	// dst is big enough for most rewrites and encodings of the body.
	dst := func() []byte {
		if n := len(resp.Body()) + 64; cap(rc.bodyBuf) < n {
			rc.bodyBuf = make([]byte, 0, n)
		}
		return rc.bodyBuf[:0]
	}
	bodyAll := func(f gateway.BodyFilter) bool { apply(f.FilterBody(rc, dst(), resp.Body())); return true }
	encodeAll := func(f gateway.BodyEncoder) bool {
		if apply(f.EncodeBody(rc, dst(), resp.Body())) && rc.respCapped {
			rc.respPlain = true // the captured bytes are as they were before
		}
		return true
	}
	run(s.global.bodies, nil, bodyAll)
	if routePh != nil {
		run(routePh.bodies, con, bodyAll)
	}
	if rc.respMax > 0 && !resp.IsBodyStream() {
		// A log plugin's capture sees the body as the body filters left
		// it, before any encoder (APISIX's run before nginx's gzip).
		b := resp.Body()
		rc.respCap = append(rc.respCap[:0], b[:min(len(b), rc.respMax)]...)
		rc.respCapped = true
	}
	run(s.global.encoders, nil, encodeAll)
	if routePh != nil {
		run(routePh.encoders, con, encodeAll)
	}
}

// responseSize is the response's size on the wire: status line, headers,
// body (the Date and Server headers fasthttp adds count 59 bytes).
func responseSize(r *fasthttp.Response) int64 {
	n := int64(len("HTTP/1.1 200 OK\r\n\r\n") + 59 + len(r.Body()))
	for k, v := range r.Header.All() {
		n += int64(len(k) + len(v) + 4)
	}
	return n
}

func hasPrefix(b, p []byte) bool { return len(b) >= len(p) && string(b[:len(p)]) == string(p) }

func (rc *reqCtx) fillLog(start time.Time, reqLen int64) {
	l := &rc.log
	l.Status = rc.fc.Response.StatusCode()
	l.RequestTime = time.Since(start)
	l.RequestLength = reqLen
	l.BytesSent = responseSize(&rc.fc.Response)
	l.Node = rc.node
	if rc.route != nil {
		e := rc.route.e
		l.RouteID, l.RouteName, l.ServiceID, l.ServiceName = e.ID, e.Name, e.ServiceID, e.ServiceName
		l.MatchedURI = rc.match.Path
		if len(e.Hosts) > 0 {
			l.MatchedHost = rc.host
		}
	}
	if rc.consumer != nil {
		l.Consumer = rc.consumer.Username
	}
}

// serve runs the rewrite and access phases, then proxies; it leaves the
// answer (upstream's, a plugin's Reply, or an error) in the response.
func (g *Gateway) serve(rc *reqCtx) {
	fc := rc.fc
	s := rc.snap
	var rep gateway.Reply
	rewrite := func(r gateway.Rewriter) bool { rep = r.Rewrite(rc); return rep.Status == 0 }
	access := func(a gateway.Accessor) bool { rep = a.Access(rc); return rep.Status == 0 }
	// Global rules run first, even when no route matched.
	if !run(s.global.rewrite, nil, rewrite) || !run(s.global.access, nil, access) {
		rc.reply(rep)
		return
	}
	rt := rc.route
	if rt == nil {
		fc.SetStatusCode(http.StatusNotFound)
		fc.Response.Header.SetContentTypeBytes(jsonType)
		fc.Response.SetBodyRaw(notFoundBody)
		return
	}
	if rt.e.Fail != 0 {
		// The route names a service, plugin config or upstream that is
		// not loaded: it answers as APISIX's (404, 503 or 502).
		rc.reply(gateway.Reply{Status: rt.e.Fail})
		return
	}
	if !run(rt.rewrite, nil, rewrite) {
		rc.reply(rep)
		return
	}
	// An auth plugin may have identified a consumer: its own plugins run
	// from here on (their rewrite first), merged with the route's.
	if c := rc.consumer; c != nil && len(c.Chain) > 0 {
		for _, in := range c.Chain {
			if r, ok := in.Impl.(gateway.Rewriter); ok && !rewrite(r) {
				rc.reply(rep)
				return
			}
		}
	}
	if !run(rt.access, rc.consumer, access) {
		rc.reply(rep)
		return
	}
	up := rt.up
	if rc.upRef != nil {
		if up = s.pluginUps[rc.upRef]; up == nil {
			g.log.Error("failed to find upstream by id", "route", rt.e.ID, "upstream", rc.upRef.ID)
			rc.reply(gateway.Reply{Status: http.StatusBadGateway})
			return
		}
	}
	if up == nil || len(up.nodes) == 0 {
		// APISIX: "missing upstream configuration in Route or Service",
		// "no valid upstream node".
		rc.reply(gateway.Reply{Status: http.StatusServiceUnavailable})
		return
	}
	g.proxy(rc, up)
}

func (rc *reqCtx) reply(rep gateway.Reply) {
	fc := rc.fc
	fc.SetStatusCode(rep.Status)
	switch {
	case len(rep.Body) > 0:
		if rep.ContentType != "" {
			fc.Response.Header.SetContentType(rep.ContentType)
		} else {
			fc.Response.Header.SetContentTypeBytes(jsonType)
		}
		fc.Response.SetBodyRaw(rep.Body)
	case rep.Status < 300 || rep.Status == http.StatusNotModified:
		// nginx sends no page for these.
	default:
		fc.Response.Header.SetContentType("text/html; charset=utf-8")
		fc.Response.SetBodyRaw(errorPage(rep.Status))
	}
}

// Forwarded header names in fasthttp's canonical form (as its parser
// stores client headers), so SetCanonical adds them without normalizing.
var (
	headerXRealIP       = []byte("X-Real-Ip")
	headerXFF           = []byte("X-Forwarded-For")
	headerXFProto       = []byte("X-Forwarded-Proto")
	headerXFHost        = []byte("X-Forwarded-Host")
	headerXFPort        = []byte("X-Forwarded-Port")
	headerUpstreamState = "X-APISIX-Upstream-Status"
)

// proxy sends the request to a node of up, retrying other nodes on
// connection errors and timeouts, and leaves the answer in fc.Response.
func (g *Gateway) proxy(rc *reqCtx, up *upstreamRT) {
	fc := rc.fc
	req := &fc.Request
	closeClient := req.Header.ConnectionClose()
	req.Header.ResetConnectionClose()
	rc.setForwardedHeaders()
	if !rc.uriSet {
		// Forward the request URI as the client sent it: matching used the
		// normalized path, but the upstream gets the original bytes.
		req.SetRequestURIBytes(req.Header.RequestURI())
	}
	req.UseHostHeader = true
	if rc.upgrade {
		if rc.route.e.WebSocket {
			g.proxyWebSocket(rc, up)
			return
		}
		if rc.h2req != nil {
			// An extended CONNECT has no plain-request meaning.
			rc.reply(gateway.Reply{Status: http.StatusBadRequest, Body: wsDisabled})
			return
		}
		dropUpgrade(&req.Header) // as APISIX without enable_websocket
	} else if closeClient && rc.route.e.WebSocket {
		// APISIX passes the client's Connection header on such routes.
		req.Header.SetConnectionClose()
	}
	ex := exchange{stream: !rc.needsBody()}
	if req.IsBodyStream() && !g.prepareBody(rc, &ex) {
		return
	}

	var tried uint64
	var deadline time.Time
	if up.retryTimeout > 0 {
		deadline = time.Now().Add(up.retryTimeout)
	}
	var lastErr error
	// statuses of the attempts so far, as nginx's $upstream_status
	// ("502, 502, 200"); APISIX shows it in X-APISIX-Upstream-Status when
	// the last one is a 5xx.
	rc.upStatus = rc.upStatus[:0]
	for attempt := 0; attempt <= up.retries; attempt++ {
		if attempt > 0 && (ex.rb != nil && ex.sent || !deadline.IsZero() && time.Now().After(deadline)) {
			break // a streamed body is spent once sent
		}
		i := up.pick(rc, tried)
		if i < 0 {
			break
		}
		if i < 64 {
			tried |= 1 << uint(i)
		}
		n := up.nodes[i]
		rc.setUpstreamHost(up, n)
		rc.node, rc.nodeAddr = n.host, n.addr
		n.active.Add(1)
		var t0 time.Time
		if rc.timed {
			t0 = time.Now()
		}
		client := n.client
		if rc.scheme != "" && (rc.scheme == "https") != up.tls {
			if client = n.alt; client == nil {
				n.active.Add(-1)
				rc.reply(gateway.Reply{Status: http.StatusServiceUnavailable}) // APISIX: Can't detect upstream's scheme
				return
			}
		}
		err := client.do(req, &fc.Response, &ex)
		n.active.Add(-1)
		if rc.timed {
			rc.log.UpstreamTime += time.Since(t0)
		}
		if err == nil {
			status := fc.Response.StatusCode()
			rc.log.UpstreamStatus = status
			up.passive(n, outcomeHTTP, status)
			if status >= 500 || g.opts.ShowUpstreamStatus {
				rc.upStatus = strconv.AppendInt(rc.upStatus, int64(status), 10)
				fc.Response.Header.SetBytesV(headerUpstreamState, rc.upStatus)
			}
			fc.Response.Header.ResetConnectionClose()
			if g.opts.ServerHeader != "" {
				fc.Response.Header.SetServer(g.opts.ServerHeader)
			}
			if closeClient {
				fc.SetConnectionClose()
			}
			if b := ex.body; b != nil {
				rc.async, rc.upBody = true, b
				b.done = func(b *upstreamBody) { g.finish(rc, b.n) }
				g.streamTimeouts(rc)
			}
			return
		}
		if errors.Is(err, errBodyTooLarge) {
			rc.reply(gateway.Reply{Status: http.StatusRequestEntityTooLarge})
			fc.SetConnectionClose() // the rest of the body is not read
			return
		}
		lastErr = err
		up.passive(n, classify(err), 0)
		fc.Response.Reset()
		if classify(err) == outcomeTimeout {
			rc.upStatus = append(rc.upStatus, "504, "...)
			rc.log.UpstreamStatus = http.StatusGatewayTimeout
		} else {
			rc.upStatus = append(rc.upStatus, "502, "...)
			rc.log.UpstreamStatus = http.StatusBadGateway
		}
		if g.log.Enabled(context.Background(), slog.LevelDebug) {
			g.log.Debug("upstream attempt failed", "node", n.addr, "route", rc.route.e.ID, "err", err)
		}
	}
	status := http.StatusBadGateway
	var dnsErr *net.DNSError
	switch {
	case lastErr != nil && classify(lastErr) == outcomeTimeout:
		status = http.StatusGatewayTimeout
	case errors.As(lastErr, &dnsErr):
		status = http.StatusServiceUnavailable // APISIX: failed to parse domain
	}
	if lastErr != nil && g.log.Enabled(context.Background(), slog.LevelWarn) {
		g.log.Warn("upstream failed", "route", rc.route.e.ID, "upstream", up.key, "err", lastErr)
	}
	fc.SetStatusCode(status)
	fc.Response.Header.SetContentType("text/html; charset=utf-8")
	fc.Response.SetBodyRaw(errorPage(status))
	if n := len(rc.upStatus); n >= 2 {
		fc.Response.Header.SetBytesV(headerUpstreamState, rc.upStatus[:n-2]) // "502, 502, 502"
	}
	if closeClient {
		fc.SetConnectionClose()
	}
}

// setUpstreamHost sets the Host header for node n as up's pass_host says,
// unless a plugin set it.
func (rc *reqCtx) setUpstreamHost(up *upstreamRT, n *nodeRT) {
	if rc.hostSet {
		return
	}
	switch up.passHost {
	case "node":
		rc.fc.Request.Header.SetHost(n.hostPort)
	case "rewrite":
		rc.fc.Request.Header.SetHost(up.upstreamHost)
	}
}

// setForwardedHeaders sets what APISIX sends upstream: X-Real-IP, an
// appended X-Forwarded-For, and X-Forwarded-Proto/Host/Port unless the
// client sent them. One pass finds what the client sent; the names are
// canonical, so setting them neither copies nor normalizes them.
func (rc *reqCtx) setForwardedHeaders() {
	h := &rc.fc.Request.Header
	var hasXFF, hasProto, hasHost, hasPort bool
	rc.scratch = rc.scratch[:0]
	for k, v := range h.All() {
		switch {
		case len(k) == len(headerXFF) && equalFold(k, headerXFF):
			hasXFF = true
			rc.scratch = append(append(rc.scratch, v...), ", "...)
		case len(k) == len(headerXFProto) && equalFold(k, headerXFProto):
			hasProto = true
		case len(k) == len(headerXFHost) && equalFold(k, headerXFHost):
			hasHost = true
		case len(k) == len(headerXFPort) && equalFold(k, headerXFPort):
			hasPort = true
		case len(k) == len(headerUpgrade) && equalFold(k, headerUpgrade):
			rc.upgrade = true
		}
	}
	h.SetCanonical(headerXRealIP, rc.remoteStr)
	if hasXFF {
		rc.scratch = append(rc.scratch, rc.remoteStr...)
		h.SetCanonical(headerXFF, rc.scratch)
	} else {
		h.SetCanonical(headerXFF, rc.remoteStr)
	}
	if !hasProto {
		h.SetCanonical(headerXFProto, unsafeBytes(rc.Var("scheme")))
	}
	if !hasHost {
		h.SetCanonical(headerXFHost, unsafeBytes(rc.host))
	}
	if !hasPort {
		h.SetCanonical(headerXFPort, unsafeBytes(rc.Var("server_port")))
	}
}

// equalFold compares ASCII header names case-insensitively.
func equalFold(a, b []byte) bool {
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// unsafeBytes views s as bytes for fasthttp setters, which copy.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

var errorPages sync.Map // status → []byte

// nginxReasons are nginx's reason phrases where they differ from Go's.
var nginxReasons = map[int]string{
	302: "Moved Temporarily", 405: "Not Allowed", 408: "Request Time-out", 413: "Request Entity Too Large",
	414: "Request-URI Too Large", 416: "Requested Range Not Satisfiable", 503: "Service Temporarily Unavailable",
	504: "Gateway Time-out",
}

func statusText(status int) string {
	if t, ok := nginxReasons[status]; ok {
		return t
	}
	return http.StatusText(status)
}

// errorPage is an nginx-style HTML error page.
func errorPage(status int) []byte {
	if b, ok := errorPages.Load(status); ok {
		return b.([]byte)
	}
	text := strconv.Itoa(status) + " " + statusText(status)
	b := []byte("<html>\r\n<head><title>" + text + "</title></head>\r\n<body>\r\n<center><h1>" + text +
		"</h1></center>\r\n<hr><center>linkgate</center>\r\n</body>\r\n</html>\r\n")
	errorPages.Store(status, b)
	return b
}
