package httpapi

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/internal/connqueue"
	"github.com/linkgate/linkgate/internal/deadline"
	"github.com/linkgate/linkgate/internal/h2"
	"github.com/linkgate/linkgate/internal/linger"
)

// The HTTPS listener (ServeTLS): each connection's handshake runs within
// HandshakeTimeout with the certificate its SNI selects (the tls.Config's
// GetCertificate: files or ACME, cmd/linkgate), then ALPN decides the
// protocol — http/1.1 connections join the fasthttp server, h2 ones are
// served by linkgate's HTTP/2 server (internal/h2, the gateway's), whose
// streams go through the same handler; an acme-tls/1 handshake (a
// TLS-ALPN-01 validation) ends with the handshake.

// DefaultHandshakeTimeout bounds a TLS handshake (ServerConfig).
const DefaultHandshakeTimeout = 10 * time.Second

// tlsState is a Server's HTTPS side.
type tlsState struct {
	once  sync.Once
	h1    *connqueue.Queue // handshaken HTTP/1.1 connections, served by srv
	h2    *h2.Server
	limit deadline.Limits
}

// hstsHeader is the Strict-Transport-Security header's name.
var hstsHeader = []byte("Strict-Transport-Security")

// ServeTLS accepts TLS connections on ln until Shutdown, with cfg's
// certificates; cfg.NextProtos should offer h2 and http/1.1.
func (s *Server) ServeTLS(ln net.Listener, cfg *tls.Config) error {
	s.mu.Lock()
	if s.draining.Load() {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	s.tls.once.Do(func() { go func() { _ = s.srv.Serve(s.tls.h1) }() })
	ln = linger.Listener(ln, &s.live)
	for {
		raw, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		go s.handshake(s.dog.Wrap(raw, nil), cfg)
	}
}

// handshake runs the TLS handshake of one connection and hands it to the
// server of its protocol.
func (s *Server) handshake(dc *deadline.Conn, cfg *tls.Config) {
	tc := tls.Server(dc, cfg)
	dc.SetReadTimeout(s.cfg.HandshakeTimeout)
	dc.SetWriteTimeout(s.cfg.HandshakeTimeout)
	if err := tc.Handshake(); err != nil {
		tc.Close()
		return
	}
	switch tc.ConnectionState().NegotiatedProtocol {
	case "h2":
		dc.SetDeadline(time.Time{}) // the HTTP/2 server applies its own timeouts through dc
		s.tls.h2.ServeConn(tc, dc, h2View{tc})
	case "acme-tls/1":
		tc.Close() // a TLS-ALPN-01 validation: the handshake was all
	default:
		dc.SetDeadline(time.Time{})
		dc.SetLimits(&s.tls.limit)
		if !s.tls.h1.Put(tc) {
			tc.Close()
		}
	}
}

// initTLS prepares the HTTPS side of a new Server serving h.
func (s *Server) initTLS(h *Handler, logger fasthttp.Logger) {
	s.tls.h1 = connqueue.New()
	s.tls.limit = deadline.Limits{Read: s.cfg.ReadTimeout, Write: s.cfg.WriteTimeout, Idle: s.cfg.IdleTimeout}
	hsts := []byte(s.cfg.HSTS)
	s.tls.h2 = h2.NewServer(h2.HandlerFunc(func(st *h2.Stream) {
		ctx := st.Ctx()
		h.serveConn(ctx)
		if len(hsts) > 0 {
			ctx.Response.Header.SetCanonical(hstsHeader, hsts)
		}
	}), h2.Options{
		// HPACK's decoded size (32 bytes more per field) is no request
		// line plus headers: at least nginx's 32 KiB, h2's default.
		MaxHeaderBytes: max(s.cfg.MaxHeaderBytes, h2.DefaultMaxHeaderBytes),
		ReadTimeout:    s.cfg.ReadTimeout,
		WriteTimeout:   s.cfg.WriteTimeout,
		IdleTimeout:    s.cfg.IdleTimeout,
		Logger:         logger,
	})
}

// h2View is an h2 connection as a fasthttp.RequestCtx sees it: the
// addresses and TLS state of the connection. It hides NetConn, so
// deadline.Handling does not count its streams as HTTP/1.1 requests.
type h2View struct{ *tls.Conn }

func (h2View) NetConn() net.Conn { return nil }

// redirectHTTPS answers 308 to the request's URL over https, on
// httpsPort (":PORT", "" for 443). A Host that is not a host name gets 400.
func redirectHTTPS(ctx *fasthttp.RequestCtx, httpsPort string) {
	host := ctx.Host()
	if i := bytes.LastIndexByte(host, ':'); i >= 0 && bytes.IndexByte(host[i:], ']') < 0 {
		host = host[:i]
	}
	if !validHost(host) {
		writeError(ctx, fasthttp.StatusBadRequest, "bad_host", "this server answers over https only; the request has no valid Host to redirect to")
		return
	}
	u := append(append(append(make([]byte, 0, 64), "https://"...), host...), httpsPort...)
	u = append(u, ctx.RequestURI()...)
	ctx.Response.Header.SetCanonical(locationHeader, u)
	ctx.SetStatusCode(fasthttp.StatusPermanentRedirect)
}

var locationHeader = []byte("Location")

// validHost reports whether h is a DNS name or an IP literal a Location
// may carry: letters, digits, '-', '.', and ':' '[' ']' of IPv6.
func validHost(h []byte) bool {
	if len(h) == 0 || len(h) > 255 {
		return false
	}
	for _, c := range h {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == ':', c == '[', c == ']':
		default:
			return false
		}
	}
	return true
}

// ServeH2 serves one cleartext HTTP/2 connection opened with prior
// knowledge (RFC 9113 §3.3) until it ends: the HTTPS listener's HTTP/2
// path without TLS, for benchmarks.
func (s *Server) ServeH2(c net.Conn) { s.tls.h2.ServeConn(c, nil, c) }
