package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/internal/deadline"
)

// The TLS listener: handshakes with the certificate the SNI selects
// (gateway/certs), then ALPN decides the protocol — HTTP/1.1 connections
// join the cleartext listener's fasthttp server, h2 connections are served
// by the standard library's HTTP/2 server (net/http), whose requests are
// copied into a fasthttp.RequestCtx and go through the same handle:
// routing, plugins, metrics and forwarded headers (X-Forwarded-Proto:
// https) are one code path. Upstreams stay HTTP/1.1 on the same
// connection pools.

type tlsState struct {
	tlsMu  sync.Mutex
	tlsLns []net.Listener
	h1tls  *connQueue   // handshaken HTTP/1.1 connections, served by g.server
	h2q    *connQueue   // handshaken h2 connections, served by h2srv
	h2srv  *http.Server // net/http's HTTP/2 server
	h2ctxs sync.Pool    // *fasthttp.RequestCtx

	handshakes, handshakeErrors, h2Conns atomic.Int64
}

// connKey finds a request's h2View in its context.
type connKey struct{}

// TLS defaults: nginx's http2_max_concurrent_streams and
// large_client_header_buffers, a handshake timeout as APISIX's
// client_header_timeout bounds its handshakes.
const (
	defaultHandshakeTimeout = 10 * time.Second
	defaultMaxStreams       = 128
	defaultMaxHeaderBytes   = 32 << 10
)

func (g *Gateway) initTLS() {
	o := &g.opts
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = defaultHandshakeTimeout
	}
	if o.MaxConcurrentStreams == 0 {
		o.MaxConcurrentStreams = defaultMaxStreams
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = defaultMaxHeaderBytes
	}
	g.h1tls, g.h2q = newConnQueue(), newConnQueue()
	var protos http.Protocols
	protos.SetHTTP2(true)
	g.h2srv = &http.Server{
		Handler:        http.HandlerFunc(g.serveH2Request),
		Protocols:      &protos,
		ReadTimeout:    o.ReadTimeout,
		WriteTimeout:   o.WriteTimeout,
		IdleTimeout:    o.IdleTimeout,
		MaxHeaderBytes: o.MaxHeaderBytes,
		HTTP2:          &http.HTTP2Config{MaxConcurrentStreams: int(o.MaxConcurrentStreams)},
		ErrorLog:       slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			tc, _ := c.(*tls.Conn)
			return context.WithValue(ctx, connKey{}, h2View{tc})
		},
		ConnState: func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				g.h2Conns.Add(1)
			case http.StateClosed, http.StateHijacked:
				g.h2Conns.Add(-1)
			}
		},
	}
	g.h2ctxs.New = func() any { return new(fasthttp.RequestCtx) }
}

// ServeTLS accepts TLS connections on ln until Shutdown, with the
// certificates of Options.Certs.
func (g *Gateway) ServeTLS(ln net.Listener) error {
	if g.opts.Certs == nil {
		return errors.New("gateway: ServeTLS without Options.Certs")
	}
	g.tlsMu.Lock()
	g.tlsLns = append(g.tlsLns, ln)
	first := len(g.tlsLns) == 1
	g.tlsMu.Unlock()
	if first {
		go func() { _ = g.server.Serve(g.h1tls) }()
		go func() { _ = g.h2srv.Serve(g.h2q) }()
	}
	cfg := g.opts.Certs.Config()
	w := g.dogs.For(g.opts.HandshakeTimeout, g.limits.Read, g.limits.Write, g.limits.Idle)
	for {
		raw, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			return err
		}
		g.accepted.Add(1)
		go g.handshake(w.Wrap(raw, nil), cfg)
	}
}

// handshake runs the TLS handshake of one connection within
// HandshakeTimeout and hands it to the server of its protocol.
func (g *Gateway) handshake(dc *deadline.Conn, cfg *tls.Config) {
	c := &conn{Conn: dc}
	tc := tls.Server(c, cfg)
	dc.SetReadTimeout(g.opts.HandshakeTimeout)
	dc.SetWriteTimeout(g.opts.HandshakeTimeout)
	if err := tc.Handshake(); err != nil {
		g.handshakeErrors.Add(1)
		g.log.Debug("TLS handshake failed", "client", dc.RemoteAddr().String(), "err", err)
		tc.Close()
		return
	}
	g.handshakes.Add(1)
	q := g.h1tls
	if tc.ConnectionState().NegotiatedProtocol == "h2" {
		// net/http's HTTP/2 server applies its own timeouts (per stream,
		// and IdleTimeout for the connection) through the connection's
		// cheap deadlines, and reads and writes in two goroutines.
		c.shared = true
		c.wrote.Store(false)
		dc.SetDeadline(time.Time{})
		q = g.h2q
	} else {
		dc.SetLimits(&g.limits)
	}
	if !q.put(tc) {
		tc.Close()
	}
}

// h2View is an h2 connection as a fasthttp.RequestCtx sees it: the
// addresses and TLS state of the connection. It hides NetConn, so
// deadline.Handling does not count its streams as HTTP/1.1 requests.
type h2View struct{ *tls.Conn }

func (h2View) NetConn() net.Conn { return nil }

var hopHeaders = map[string]bool{"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Transfer-Encoding": true, "Upgrade": true}

// serveH2Request copies an HTTP/2 request into a fasthttp.RequestCtx,
// handles it as any other, and writes the answer back.
func (g *Gateway) serveH2Request(w http.ResponseWriter, r *http.Request) {
	view, _ := r.Context().Value(connKey{}).(h2View)
	fc := g.h2ctxs.Get().(*fasthttp.RequestCtx)
	defer func() {
		fc.Request.Reset()
		fc.Response.Reset()
		g.h2ctxs.Put(fc)
	}()
	fc.Init2(view, fasthttpLogger{g.log}, false)
	req := &fc.Request
	req.Header.DisableNormalizing()
	req.Header.SetMethod(r.Method)
	req.Header.SetRequestURI(r.RequestURI)
	req.Header.SetHost(r.Host)
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	var ws *h2Stream
	if proto, ok := extendedConnect(r); ok {
		if proto != "websocket" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write(wsBadProtocol)
			return
		}
		ws = newH2Stream(w, r, req) // the stream is the tunnel, not a body
	} else if r.ContentLength != 0 {
		// Read as HTTP/1.1 bodies are: whole when small, else streamed.
		// (Not an io.Closer: net/http closes it after the handler.)
		req.SetBodyStream(struct{ io.Reader }{r.Body}, int(r.ContentLength))
	}
	g.handle(fc, true, ws)
	if ws != nil && ws.tunnel != nil {
		ws.runH2(g.opts.ServerHeader)
		return
	}
	resp := &fc.Response
	h := w.Header()
	for k, v := range resp.Header.All() {
		name := http.CanonicalHeaderKey(string(k))
		if hopHeaders[name] || name == "Content-Length" {
			continue
		}
		h.Add(name, string(v))
	}
	if ct := resp.Header.ContentType(); len(ct) > 0 && h.Get("Content-Type") == "" {
		h.Set("Content-Type", string(ct))
	}
	if g.opts.ServerHeader != "" && h.Get("Server") == "" {
		h.Set("Server", g.opts.ServerHeader)
	}
	if resp.IsBodyStream() {
		// A streamed upstream body: each read is passed on and flushed at
		// once (server-sent events); the request ends at CloseBodyStream.
		defer resp.CloseBodyStream()
		if cl := resp.Header.ContentLength(); cl >= 0 {
			h.Set("Content-Length", strconv.Itoa(cl))
		}
		w.WriteHeader(resp.StatusCode())
		copyFlushing(w, resp.BodyStream())
		return
	}
	body := resp.Body()
	if r.Method != http.MethodHead {
		h.Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.WriteHeader(resp.StatusCode())
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// copyFlushing copies r to w, flushing after every read.
func copyFlushing(w http.ResponseWriter, r io.Reader) {
	f, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// closeTLS stops the TLS listeners (Shutdown).
func (g *Gateway) closeTLS() {
	g.tlsMu.Lock()
	defer g.tlsMu.Unlock()
	for _, ln := range g.tlsLns {
		ln.Close()
	}
}

// shutdownHTTP2 sends GOAWAY on every h2 connection and waits for their
// streams, until ctx ends (then closes them).
func (g *Gateway) shutdownHTTP2(ctx context.Context) error {
	g.h2q.Close()
	err := g.h2srv.Shutdown(ctx)
	if err != nil {
		_ = g.h2srv.Close()
	}
	return err
}

// connQueue is a net.Listener of connections handed over by the TLS
// accept loop.
type connQueue struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newConnQueue() *connQueue {
	return &connQueue{ch: make(chan net.Conn), done: make(chan struct{})}
}

// put hands c to the server; false once the queue is closed.
func (q *connQueue) put(c net.Conn) bool {
	select {
	case q.ch <- c:
		return true
	case <-q.done:
		return false
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

func (q *connQueue) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
