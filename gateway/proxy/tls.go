package proxy

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/internal/connqueue"
	"github.com/linkgate/linkgate/internal/deadline"
	"github.com/linkgate/linkgate/internal/h2"
	"github.com/linkgate/linkgate/internal/linger"
)

// The TLS listener: handshakes with the certificate the SNI selects
// (gateway/certs), then ALPN decides the protocol — HTTP/1.1 connections
// join the cleartext listener's fasthttp server, h2 connections are served
// by linkgate's HTTP/2 server (internal/h2), whose requests go into a
// fasthttp.RequestCtx and through the same handle: routing, plugins,
// metrics and forwarded headers (X-Forwarded-Proto: https) are one code
// path. Upstreams stay HTTP/1.1 on the same connection pools.

type tlsState struct {
	tlsMu  sync.Mutex
	tlsLns []net.Listener
	h1tls  *connqueue.Queue // handshaken HTTP/1.1 connections, served by g.server

	h2 *h2.Server

	handshakes, handshakeErrors atomic.Int64
}

// TLS defaults: nginx's http2_max_concurrent_streams and
// large_client_header_buffers (h2's defaults), a handshake timeout as
// APISIX's client_header_timeout bounds its handshakes.
const defaultHandshakeTimeout = 10 * time.Second

func (g *Gateway) initTLS() {
	o := &g.opts
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = defaultHandshakeTimeout
	}
	if o.MaxConcurrentStreams == 0 {
		o.MaxConcurrentStreams = h2.DefaultMaxStreams
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = h2.DefaultMaxHeaderBytes
	}
	g.h1tls = connqueue.New()
	g.h2 = h2.NewServer(h2.HandlerFunc(g.serveStream), h2.Options{
		MaxConcurrentStreams: o.MaxConcurrentStreams,
		MaxHeaderBytes:       o.MaxHeaderBytes,
		ServerHeader:         o.ServerHeader,
		ReadTimeout:          g.limits.Read,
		WriteTimeout:         g.limits.Write,
		IdleTimeout:          g.limits.Idle,
		ExtendedConnect:      true,
		Logger:               fasthttpLogger{g.log},
	})
}

// serveStream is the HTTP/2 server's handler: a stream's request takes
// the HTTP/1.1 requests' path (handle); an extended CONNECT for WebSocket
// runs its tunnel on the stream once the node has upgraded.
func (g *Gateway) serveStream(s *h2.Stream) {
	fc := s.Ctx()
	switch p := s.Protocol(); p {
	case "":
		g.handle(fc, true, nil)
	case "websocket":
		ws := newH2Stream(&fc.Request) // the stream is the tunnel, not a body
		g.handle(fc, true, ws)
		if ws.tunnel == nil {
			return
		}
		var h fasthttp.ResponseHeader
		h.SetNoDefaultContentType(true)
		if ws.protocol != "" {
			h.Set("Sec-WebSocket-Protocol", ws.protocol)
		}
		if ws.extensions != "" {
			h.Set("Sec-WebSocket-Extensions", ws.extensions)
		}
		side := s.Tunnel(&h)
		ws.tunnel.run(side, side, nil)
	default:
		fc.Response.SetStatusCode(fasthttp.StatusBadRequest)
		fc.Response.Header.SetContentTypeBytes(jsonType)
		fc.Response.SetBodyRaw(wsBadProtocol)
	}
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
	ln = linger.Listener(rawListener{ln}, &g.live)
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
	switch tc.ConnectionState().NegotiatedProtocol {
	case "acme-tls/1":
		// An ACME TLS-ALPN-01 validation: the handshake was all of it
		// (RFC 8737, section 3).
		tc.Close()
		return
	case "h2":
		// The HTTP/2 server applies its own timeouts through the
		// connection's cheap deadlines, and reads and writes from several
		// goroutines.
		c.shared = true
		c.wrote.Store(false)
		dc.SetDeadline(time.Time{})
		g.h2.ServeConn(tc, dc, h2View{tc})
		return
	}
	dc.SetLimits(&g.limits)
	if !g.h1tls.Put(tc) {
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
