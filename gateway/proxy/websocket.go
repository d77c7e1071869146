package proxy

import (
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // RFC 6455's handshake digest, not a security hash
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/internal/deadline"
)

// WebSocket. A route with enable_websocket (its own, else its service's,
// or its inline upstream's, as APISIX) passes an upgrade request to a node
// on a connection of its own, with the client's Upgrade and Connection
// headers, and once the node answers 101 relays bytes both ways until
// either side closes — what nginx does for APISIX with proxy_set_header
// Upgrade/Connection. Frames are the endpoints' business: a peer that
// sends invalid frames is closed by the other end, and with it this
// tunnel only. Other routes drop the Upgrade and Connection headers, as
// APISIX does without enable_websocket: the node sees a plain request and
// answers it (a WebSocket server with 400).
//
// HTTP/2 clients use extended CONNECT (RFC 8441, :protocol websocket): the
// node gets an HTTP/1.1 upgrade with a key of the gateway's, the client a
// 200 and the stream as the tunnel (h2.Stream.Tunnel). The HTTP/2 server
// announces SETTINGS_ENABLE_CONNECT_PROTOCOL on every connection.
//
// A tunnel ends after the route's read timeout without a byte either way
// (nginx's proxy_read_timeout on an upgraded connection, 60 s by default)
// or after Options.WebSocketMaxDuration. Its request goes through the log
// phase when it ends: prometheus counts it in apisix_http_status with code
// 101 and its bytes in apisix_bandwidth; Stats.WebSockets is the number
// open. Shutdown closes open tunnels.

var headerUpgrade = []byte("Upgrade")

// wsGUID is RFC 6455's key suffix.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

func wsAccept(key string) string {
	h := sha1.Sum([]byte(key + wsGUID)) //nolint:gosec // see import
	return base64.StdEncoding.EncodeToString(h[:])
}

var (
	wsDisabled    = []byte(`{"error_msg":"websocket is not enabled on this route"}` + "\n")
	wsBadProtocol = []byte(`{"error_msg":"extended CONNECT supports only the websocket protocol"}` + "\n")
)

// dropUpgrade removes the headers that would turn a request into an
// upgrade, for routes without enable_websocket.
func dropUpgrade(h *fasthttp.RequestHeader) {
	h.Del("Upgrade")
	if h.ConnectionUpgrade() {
		h.Del("Connection")
	}
}

// proxyWebSocket runs an upgrade request: the handshake with a node (a
// new connection; another node on a connection error, as proxy_next_upstream),
// then the tunnel — after fasthttp has sent the 101, through its hijack;
// for HTTP/2, in the stream's handler.
func (g *Gateway) proxyWebSocket(rc *reqCtx, up *upstreamRT) {
	fc := rc.fc
	req, resp := &fc.Request, &fc.Response
	if s := rc.h2req; s != nil {
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Sec-WebSocket-Key", s.key)
		if len(req.Header.Peek("Sec-WebSocket-Version")) == 0 {
			req.Header.Set("Sec-WebSocket-Version", "13")
		}
	}
	// An upgrade request has no body: bytes after its header are the
	// tunnel's.
	req.Header.SetContentLength(0)
	req.ResetBody()

	var (
		tried uint64
		n     *nodeRT
		uc    *upConn
		err   error
	)
	for attempt := 0; attempt <= up.retries; attempt++ {
		i := up.pick(rc, tried)
		if i < 0 {
			break
		}
		if i < 64 {
			tried |= 1 << uint(i)
		}
		n = up.nodes[i]
		rc.setUpstreamHost(up, n)
		rc.node, rc.nodeAddr = n.host, n.addr
		if uc, err = n.client.dial(); err == nil {
			if err = n.client.wsHandshake(uc, req, resp); err == nil {
				break
			}
			uc = nil
		}
		up.passive(n, classify(err), 0)
		g.log.Warn("websocket upstream failed", "route", rc.route.e.ID, "node", n.addr, "err", err)
	}
	if uc == nil {
		status := http.StatusBadGateway
		if err != nil && classify(err) == outcomeTimeout {
			status = http.StatusGatewayTimeout
		}
		resp.Reset()
		rc.reply(gateway.Reply{Status: status})
		return
	}
	up.passive(n, outcomeHTTP, resp.StatusCode())
	if g.opts.ServerHeader != "" {
		resp.Header.SetServer(g.opts.ServerHeader)
	}
	if resp.StatusCode() != http.StatusSwitchingProtocols {
		// The node refused the upgrade: its answer goes to the client (to
		// an HTTP/2 client, a 2xx would open a tunnel: 502).
		err := resp.ReadBody(uc.br, maxResponseBytes)
		n.client.discard(uc)
		switch {
		case err != nil:
			resp.Reset()
			rc.reply(gateway.Reply{Status: http.StatusBadGateway})
		case rc.h2req != nil && resp.StatusCode() < 300:
			resp.Reset()
			rc.reply(gateway.Reply{Status: http.StatusBadGateway})
		}
		return
	}
	resp.Header.Set("Connection", "upgrade") // as nginx writes it
	if s := rc.h2req; s != nil && string(resp.Header.Peek("Sec-WebSocket-Accept")) != wsAccept(s.key) {
		n.client.discard(uc)
		resp.Reset()
		rc.reply(gateway.Reply{Status: http.StatusBadGateway})
		return
	}
	t := &tunnel{g: g, rc: rc, n: n, up: uc, idle: n.client.read, max: g.opts.WebSocketMaxDuration}
	if !g.addTunnel(t) { // shutting down
		n.client.discard(uc)
		resp.Reset()
		rc.reply(gateway.Reply{Status: http.StatusServiceUnavailable})
		return
	}
	rc.async = true
	if s := rc.h2req; s != nil {
		s.tunnel = t
		s.protocol = string(resp.Header.Peek("Sec-WebSocket-Protocol"))
		s.extensions = string(resp.Header.Peek("Sec-WebSocket-Extensions"))
		return
	}
	dc := deadline.Unwrap(fc.Conn())
	fc.Hijack(func(c net.Conn) {
		var closer io.Closer = c
		if dc != nil {
			dc.SetLimits(nil) // the tunnel's own timeouts apply
			// fasthttp closes a hijacked connection only when the handler
			// returns; closing what is under it ends a blocked read.
			closer = dc
		}
		t.run(c, closer, nil)
	})
}

// wsHandshake sends the upgrade request on uc and reads the node's answer
// header. On an error, uc is closed.
func (p *nodePool) wsHandshake(uc *upConn, req *fasthttp.Request, resp *fasthttp.Response) error {
	uc.dc.SetWriteTimeout(p.send)
	err := req.Write(uc.bw)
	if err == nil {
		err = uc.bw.Flush()
	}
	if err == nil {
		uc.dc.SetReadTimeout(p.read)
		resp.Reset()
		resp.Header.SetNoDefaultContentType(true)
		resp.Header.DisableNormalizing()
		resp.SkipBody = true
		err = resp.ReadLimitBody(uc.br, maxResponseBytes)
		resp.SkipBody = false
	}
	if err != nil {
		p.discard(uc)
	}
	return err
}

// tunnel relays an upgraded connection between a client and a node.
//
// It is registered (Shutdown closes it) and its timer runs from the node's
// 101 on. fasthttp may not call the hijack (the client went before the
// 101 was written, or the server is stopping): then the timer or Shutdown
// finds it still pending, closes the node's connection and releases the
// request without a log phase — the client got no answer.
type tunnel struct {
	g    *Gateway
	rc   *reqCtx
	n    *nodeRT
	up   *upConn
	idle time.Duration // 0: none
	max  time.Duration // 0: none

	state   atomic.Int32 // tunnelPending, tunnelRunning, tunnelAbandoned
	last    atomic.Int64 // unix ns of the last byte either way
	toUser  atomic.Int64 // bytes sent to the client
	stop    func()       // stops the timer
	mu      sync.Mutex   // guards closed and closers
	closed  bool
	closers []io.Closer
}

const (
	tunnelPending int32 = iota
	tunnelRunning
	tunnelAbandoned
)

// wsBufs are the buffers of the client → node direction (the other one
// reads through the upstream connection's own buffer).
var wsBufs = sync.Pool{New: func() any { b := make([]byte, 8<<10); return &b }}

// run relays until either side ends or a timeout, then closes both; the
// request goes through the log phase. f flushes each write to the client
// (nil: none needed).
func (t *tunnel) run(client io.ReadWriter, closer io.Closer, f http.Flusher) {
	if !t.state.CompareAndSwap(tunnelPending, tunnelRunning) {
		_ = closer.Close() // abandoned: released already
		return
	}
	if !t.attach(closer) { // closed by Shutdown just now
		_ = closer.Close()
		t.release(true)
		return
	}
	t.up.dc.SetDeadline(time.Time{})
	done := make(chan struct{})
	go func() { // client → node
		defer close(done)
		bp := wsBufs.Get().(*[]byte)
		_, _ = io.CopyBuffer(activeWriter{t, t.up.c, nil, nil}, struct{ io.Reader }{client}, *bp)
		wsBufs.Put(bp)
		t.close()
	}()
	_, _ = t.up.br.WriteTo(activeWriter{t, client, f, &t.toUser}) // node → client
	t.close()
	<-done
	t.release(true)
}

// attach adds c to what close closes; false when already closed.
func (t *tunnel) attach(c io.Closer) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.closers = append(t.closers, c)
	return true
}

// close closes both connections (the relay then ends); a tunnel still
// pending is released.
func (t *tunnel) close() {
	t.mu.Lock()
	cs := t.closers
	t.closers, t.closed = nil, true
	t.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
	}
	if t.state.CompareAndSwap(tunnelPending, tunnelAbandoned) {
		t.release(false)
	}
}

// release ends the tunnel: the timer, the registration, the node's
// connection count, and the request (through the log phase when logged).
func (t *tunnel) release(logged bool) {
	t.stop()
	t.g.removeTunnel(t)
	t.n.active.Add(-1)
	if logged {
		t.g.finish(t.rc, t.toUser.Load())
		return
	}
	t.rc.reset()
	t.g.ctxs.Put(t.rc)
}

// activeWriter writes one direction of a tunnel, noting the activity.
type activeWriter struct {
	t     *tunnel
	w     io.Writer
	f     http.Flusher
	count *atomic.Int64
}

func (a activeWriter) Write(p []byte) (int, error) {
	a.t.last.Store(time.Now().UnixNano())
	n, err := a.w.Write(p)
	if a.count != nil {
		a.count.Add(int64(n))
	}
	if err == nil && a.f != nil {
		a.f.Flush()
	}
	return n, err
}

// watch starts the timer that closes the tunnel after idle without a byte
// or after max. It fires about once per idle period, not per byte.
func (t *tunnel) watch() {
	if t.idle <= 0 && t.max <= 0 {
		t.stop = func() {}
		return
	}
	start := time.Now()
	t.last.Store(start.UnixNano())
	next := func(now time.Time) (time.Duration, bool) {
		wait := time.Duration(-1)
		if t.idle > 0 {
			quiet := now.Sub(time.Unix(0, t.last.Load()))
			if quiet >= t.idle {
				return 0, false
			}
			wait = t.idle - quiet
		}
		if t.max > 0 {
			left := t.max - now.Sub(start)
			if left <= 0 {
				return 0, false
			}
			if wait < 0 || left < wait {
				wait = left
			}
		}
		return wait, true
	}
	var mu sync.Mutex
	stopped := false
	var timer *time.Timer
	check := func() {
		mu.Lock()
		wait, ok := next(time.Now())
		if ok && !stopped {
			timer.Reset(wait)
		}
		mu.Unlock()
		if !ok {
			t.close()
		}
	}
	mu.Lock()
	wait, _ := next(start)
	timer = time.AfterFunc(wait, check)
	mu.Unlock()
	t.stop = func() {
		mu.Lock()
		stopped = true
		timer.Stop()
		mu.Unlock()
	}
}

// addTunnel registers t for Shutdown and starts its timer; false once the
// gateway shuts down.
func (g *Gateway) addTunnel(t *tunnel) bool {
	g.tunMu.Lock()
	defer g.tunMu.Unlock()
	if g.tunClosed {
		return false
	}
	if g.tunnels == nil {
		g.tunnels = map[*tunnel]struct{}{}
	}
	g.tunnels[t] = struct{}{}
	t.n.active.Add(1) // an open connection to the node, for least_conn
	t.closers = []io.Closer{t.up.c}
	t.watch()
	return true
}

func (g *Gateway) removeTunnel(t *tunnel) {
	g.tunMu.Lock()
	delete(g.tunnels, t)
	g.tunMu.Unlock()
}

// closeTunnels ends every open tunnel (Shutdown) and refuses new ones.
func (g *Gateway) closeTunnels() {
	g.tunMu.Lock()
	g.tunClosed = true
	ts := make([]*tunnel, 0, len(g.tunnels))
	for t := range g.tunnels {
		ts = append(ts, t)
	}
	g.tunMu.Unlock()
	for _, t := range ts {
		t.close()
	}
}

func (g *Gateway) openTunnels() int64 {
	g.tunMu.Lock()
	defer g.tunMu.Unlock()
	return int64(len(g.tunnels))
}

// h2Stream is an HTTP/2 extended CONNECT being handled: the WebSocket
// tunnel runs on the stream once the node has upgraded.
type h2Stream struct {
	key                  string // Sec-WebSocket-Key sent to the node
	tunnel               *tunnel
	protocol, extensions string // the node's choices, for the client
}

// newH2Stream turns an extended CONNECT into the GET upgrade request the
// route sees (methods match GET, as for HTTP/1.1 clients).
func newH2Stream(req *fasthttp.Request) *h2Stream {
	var b [16]byte
	_, _ = rand.Read(b[:])
	req.Header.SetMethod(http.MethodGet)
	req.Header.Set("Upgrade", "websocket")
	return &h2Stream{key: base64.StdEncoding.EncodeToString(b[:])}
}
