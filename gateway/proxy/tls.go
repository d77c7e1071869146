package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkgate/linkgate/internal/deadline"
	"github.com/linkgate/linkgate/internal/linger"
)

// The TLS listener: handshakes with the certificate the SNI selects
// (gateway/certs), then ALPN decides the protocol — HTTP/1.1 connections
// join the cleartext listener's fasthttp server, h2 connections are served
// by the gateway's own HTTP/2 server (h2.go), whose requests go into a
// fasthttp.RequestCtx and through the same handle: routing, plugins,
// metrics and forwarded headers (X-Forwarded-Proto: https) are one code
// path. Upstreams stay HTTP/1.1 on the same connection pools.

type tlsState struct {
	tlsMu  sync.Mutex
	tlsLns []net.Listener
	h1tls  *connQueue // handshaken HTTP/1.1 connections, served by g.server

	h2Workers h2Pool
	h2mu      sync.Mutex // guards h2set and h2closed
	h2set     map[*srvConn]struct{}
	h2closed  bool
	h2wg      sync.WaitGroup

	handshakes, handshakeErrors, h2Conns atomic.Int64
}

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
	g.h1tls = newConnQueue()
	g.h2set = map[*srvConn]struct{}{}
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
	}
	cfg := g.opts.Certs.Config()
	w := g.dogs.For(g.opts.HandshakeTimeout, g.limits.Read, g.limits.Write, g.limits.Idle)
	ln = linger.Listener(ln, &g.live)
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
	if tc.ConnectionState().NegotiatedProtocol == "h2" {
		// The HTTP/2 server applies its own timeouts through the
		// connection's cheap deadlines, and reads and writes from several
		// goroutines.
		c.shared = true
		c.wrote.Store(false)
		dc.SetDeadline(time.Time{})
		g.serveH2(tc, dc, h2View{tc})
		return
	}
	dc.SetLimits(&g.limits)
	if !g.h1tls.put(tc) {
		tc.Close()
	}
}

// h2View is an h2 connection as a fasthttp.RequestCtx sees it: the
// addresses and TLS state of the connection. It hides NetConn, so
// deadline.Handling does not count its streams as HTTP/1.1 requests.
type h2View struct{ *tls.Conn }

func (h2View) NetConn() net.Conn { return nil }

// closeTLS stops the TLS listeners (Shutdown).
func (g *Gateway) closeTLS() {
	g.tlsMu.Lock()
	defer g.tlsMu.Unlock()
	for _, ln := range g.tlsLns {
		ln.Close()
	}
}

// addH2 registers an h2 connection; false once shutting down.
func (g *Gateway) addH2(sc *srvConn) bool {
	g.h2mu.Lock()
	defer g.h2mu.Unlock()
	if g.h2closed {
		return false
	}
	g.h2set[sc] = struct{}{}
	g.h2wg.Add(1)
	g.h2Conns.Add(1)
	return true
}

func (g *Gateway) removeH2(sc *srvConn) {
	g.h2mu.Lock()
	delete(g.h2set, sc)
	g.h2mu.Unlock()
	g.h2Conns.Add(-1)
	g.h2wg.Done()
}

// shutdownHTTP2 sends GOAWAY on every h2 connection and waits for their
// streams, until ctx ends (then closes them).
func (g *Gateway) shutdownHTTP2(ctx context.Context) error {
	g.h2mu.Lock()
	g.h2closed = true
	conns := make([]*srvConn, 0, len(g.h2set))
	for sc := range g.h2set {
		conns = append(conns, sc)
	}
	g.h2mu.Unlock()
	for _, sc := range conns {
		sc.shutdown()
	}
	done := make(chan struct{})
	go func() { g.h2wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		for _, sc := range conns {
			sc.c.Close()
		}
		<-done
	}
	g.h2Workers.stop()
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
