package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

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
}

// Server serves a Handler over HTTP/1.1 with fasthttp: request bodies over
// MaxBodyBytes get 413, oversized headers 431, malformed requests 400, all
// as JSON errors.
type Server struct {
	srv *fasthttp.Server
	cfg ServerConfig

	live atomic.Int64 // connections not yet closed for good (internal/linger)
}

// NewServer returns a Server for h.
func NewServer(logger *slog.Logger, h *Handler, cfg ServerConfig) *Server {
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
	// No ReadTimeout, WriteTimeout, IdleTimeout here: Serve's listener
	// enforces them (timeouts.go), without fasthttp's deadline per request.
	return &Server{cfg: cfg, srv: &fasthttp.Server{
		Handler:                      h.serveConn,
		ErrorHandler:                 HandleServerError,
		ExpectHandler:                expectContinue,
		ReadBufferSize:               cfg.MaxHeaderBytes,
		MaxRequestBodySize:           MaxBodyBytes,
		StreamRequestBody:            true, // read whole by readBody, but the import's (stream.go)
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		LazyRequestTime:              true, // the handler times requests itself, and visits from that (wallClock)
		CloseOnShutdown:              true,
		Logger:                       fasthttpLogger{logger},
	}}
}

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	return s.srv.Serve(timedListener(linger.Listener(ln, &s.live), s.cfg))
}

// Shutdown stops accepting connections, answers the requests it has
// received (with Connection: close), closes idle keep-alive connections
// and waits for the requests in flight, until ctx is done; then it closes
// what is left. Connections close gracefully (internal/linger): a client
// that sends a request just as its idle connection is closed sees the
// connection end, never a reset, and may send it again elsewhere.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.ShutdownWithContext(ctx)
	// fasthttp's Shutdown may return before it has closed its last
	// connections: wait for them, lingering closes included.
	if werr := linger.Wait(ctx, &s.live); err == nil {
		err = werr
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
