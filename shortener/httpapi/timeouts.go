package httpapi

import (
	"net"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/internal/deadline"
)

// Connection timeouts without a deadline per request.
//
// fasthttp enforces ReadTimeout, WriteTimeout and IdleTimeout by setting
// the connection's read or write deadline three times per request; each
// call re-arms a runtime timer, about 0.7 µs of a 6.6 µs redirect
// (docs/serve-benchmarks.md). So the Server runs fasthttp without
// timeouts and its listener wraps every connection in a deadline.Conn
// that applies the same three limits itself, from a coarse clock, with a
// watchdog expiring a read or write still blocked past its limit
// (internal/deadline, shared with the gateway). fasthttp then sees the
// very error its own deadline would have given: a timeout on a half-read
// request answers 408; on an idle connection it closes silently.

// newWatchdog returns the watchdog of a Server's connections, whose tick
// keeps its timeouts (and its DrainQuiet within a tick).
func newWatchdog(cfg ServerConfig) *deadline.Watchdog {
	return deadline.New(deadline.TickFor(cfg.ReadTimeout, cfg.WriteTimeout, cfg.IdleTimeout))
}

// timedListener wraps ln's connections, watched by w, with the Server's
// limits.
func timedListener(w *deadline.Watchdog, ln net.Listener, cfg ServerConfig) net.Listener {
	return w.Listener(ln, deadline.Limits{Read: cfg.ReadTimeout, Write: cfg.WriteTimeout, Idle: cfg.IdleTimeout})
}

// serveConn serves a request of a Server's connection: it tells the
// connection that the request is being handled, and times the request
// from when the connection read it whole, if it knows (deadline.Handling:
// a clock read less per request), else from now.
func (h *Handler) serveConn(ctx *fasthttp.RequestCtx) {
	if !readBody(ctx) {
		return
	}
	if t := deadline.Handling(ctx.Conn()); !t.IsZero() {
		h.serve(ctx, t.Sub(clockBase))
		return
	}
	h.serve(ctx, monotonic())
}
