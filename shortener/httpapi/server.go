package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/internal/deadline"
	"github.com/linkgate/linkgate/internal/linger"
)

// ServerConfig holds the connection-level limits of a Server.
type ServerConfig struct {
	// ReadTimeout bounds reading one whole request, headers and body (it
	// also serves as the read-header timeout: fasthttp has no separate
	// one). Default 10s.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one response. Default 10s.
	WriteTimeout time.Duration
	// IdleTimeout bounds waiting for the next request on a keep-alive
	// connection. Default 60s.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line plus headers; more gets 431.
	// Default 8 KiB.
	MaxHeaderBytes int
	// HandshakeTimeout bounds a TLS handshake (ServeTLS). Default 10s.
	HandshakeTimeout time.Duration
	// HSTS, when set, is the Strict-Transport-Security header of every
	// answer over TLS (e.g. "max-age=31536000").
	HSTS string
}

// Server serves a Handler over HTTP/1.1 with fasthttp: request bodies over
// MaxBodyBytes get 413, oversized headers 431, malformed requests 400, all
// as JSON errors.
type Server struct {
	srv *fasthttp.Server
	cfg ServerConfig
	dog *deadline.Watchdog // the connections' timeouts (timeouts.go)

	tls      tlsState     // ServeTLS (tls.go)
	live     atomic.Int64 // connections not yet closed for good (internal/linger)
	draining atomic.Bool  // Shutdown began: every answer closes its connection
	mu       sync.Mutex
	lns      []net.Listener // Serve's, closed by Shutdown
}

// DrainQuiet is how long a draining Server lets a keep-alive connection
// wait for its next request before it closes it: a client that sends its
// next request as soon as it has an answer (under load, microseconds to
// milliseconds) gets that request answered, with Connection: close.
const DrainQuiet = 500 * time.Millisecond

// NewServer returns a Server for h.
func NewServer(logger *slog.Logger, h *Handler, cfg ServerConfig) *Server {
	return newServer(logger, h, cfg, h.serveConn)
}

// NewRedirectServer returns the cleartext Server of an HTTPS one: it
// answers ACME HTTP-01 challenges (challenge, which returns false for any
// other request), /healthz and /readyz (h's, for probes and load
// balancers), and 308 to https://HOST{httpsPort}/… for everything else.
// httpsPort is ":PORT", or "" for 443.
func NewRedirectServer(logger *slog.Logger, h *Handler, cfg ServerConfig, httpsPort string, challenge func(*fasthttp.RequestCtx) bool) *Server {
	return newServer(logger, h, cfg, func(ctx *fasthttp.RequestCtx) {
		if challenge(ctx) {
			return
		}
		switch string(ctx.Path()) {
		case "/healthz", "/readyz":
			h.serveConn(ctx)
			return
		}
		redirectHTTPS(ctx, httpsPort)
	})
}

// newServer returns a Server answering with serve.
func newServer(logger *slog.Logger, h *Handler, cfg ServerConfig, serve fasthttp.RequestHandler) *Server {
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 10 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 60 * time.Second
	}
	if cfg.MaxHeaderBytes == 0 {
		cfg.MaxHeaderBytes = 8 << 10
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	hsts := []byte(cfg.HSTS)
	// No ReadTimeout, WriteTimeout, IdleTimeout here: Serve's listener
	// enforces them (timeouts.go), without fasthttp's deadline per request.
	s := &Server{cfg: cfg, dog: newWatchdog(cfg)}
	s.srv = &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			serve(ctx)
			if s.draining.Load() {
				ctx.SetConnectionClose()
			}
			if len(hsts) > 0 && ctx.IsTLS() {
				ctx.Response.Header.SetCanonical(hstsHeader, hsts)
			}
		},
		ErrorHandler: func(ctx *fasthttp.RequestCtx, err error) {
			HandleServerError(ctx, err)
			h.logUnread(ctx)
		},
		ExpectHandler:                expectContinue,
		ReadBufferSize:               cfg.MaxHeaderBytes,
		MaxRequestBodySize:           MaxBodyBytes,
		StreamRequestBody:            true, // read whole by readBody, but the import's (stream.go)
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		LazyRequestTime:              true, // the handler times requests itself, and visits from that (wallClock)
		Logger:                       fasthttpLogger{logger},
	}
	s.initTLS(h, fasthttpLogger{logger})
	return s
}

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.draining.Load() {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	return s.srv.Serve(timedListener(s.dog, linger.Listener(ln, &s.live), s.cfg))
}

// Shutdown drains the server: it stops accepting connections, answers
// every request it has read or reads from now on with Connection: close
// (then closes that connection), and closes each keep-alive connection
// waiting for its next request once it has waited DrainQuiet, so only at
// a request boundary, and then as its idle timeout would. It returns once
// every connection is closed, lingering closes included, or when ctx is
// done (the process then ends what is left). Connections close
// gracefully (internal/linger): a client whose request crosses the close
// of its idle connection sees the connection end, never a reset, and may
// send the request again.
//
// fasthttp's own Shutdown closes idle connections at once, and a request
// already on its way on one is lost without an answer (issue 26: 25 of 32
// keep-alive clients creating links lost one), so it is not used.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.draining.Store(true)
	var err error
	for _, ln := range s.lns {
		if cerr := ln.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	s.lns = nil
	s.mu.Unlock()
	s.tls.h1.Close()
	h2err := s.tls.h2.Shutdown(ctx)
	s.dog.Drain(DrainQuiet)
	if werr := linger.Wait(ctx, &s.live); werr != nil {
		return werr
	}
	if err == nil {
		err = h2err
	}
	return err
}

// expectContinue answers "Expect: 100-continue": a body announced larger
// than MaxBodyBytes gets its 413 at once, instead of 100 Continue and then
// the 413 once the client has started sending it.
func expectContinue(ctx *fasthttp.RequestCtx) int {
	if ctx.Request.Header.ContentLength() > MaxBodyBytes && !streamedBody(ctx) {
		HandleServerError(ctx, fasthttp.ErrBodyTooLarge)
		return fasthttp.StatusRequestEntityTooLarge
	}
	return fasthttp.StatusContinue
}

// fasthttpLogger sends fasthttp's own messages to slog at warning level.
type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Warn("http server", slog.String("msg", fmt.Sprintf(format, args...)))
}
