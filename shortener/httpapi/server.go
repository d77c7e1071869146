package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/valyala/fasthttp"
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
		Handler:                      markHandling(h.ServeFastHTTP),
		ErrorHandler:                 HandleServerError,
		ReadBufferSize:               cfg.MaxHeaderBytes,
		MaxRequestBodySize:           MaxBodyBytes,
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		LazyRequestTime:              true, // the handler times requests itself; visits read ctx.Time()
		CloseOnShutdown:              true,
		Logger:                       fasthttpLogger{logger},
	}}
}

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	return s.srv.Serve(timedListener(ln, s.cfg))
}

// Shutdown stops accepting connections and waits for requests in flight to
// finish, until ctx is done; then it closes what is left.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.srv.ShutdownWithContext(ctx)
}

// fasthttpLogger sends fasthttp's own messages to slog at warning level.
type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Warn("http server", slog.String("msg", fmt.Sprintf(format, args...)))
}
