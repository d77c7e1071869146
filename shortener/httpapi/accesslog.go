package httpapi

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/internal/accesslog"
)

// logAccess hands the answered request that started at monotonic() ==
// start to Config.AccessLog. The log copies what it keeps of the
// request's buffers; nothing allocates.
func (h *Handler) logAccess(ctx *fasthttp.RequestCtx, start time.Duration) {
	req := &ctx.Request.Header
	h.logEntry(ctx, start, accesslog.Entry{
		Method: req.Method(), URI: req.RequestURI(), Proto: req.Protocol(), Host: req.Host(),
		Referer: req.Referer(), UA: req.UserAgent(),
	})
}

// logUnread logs a request the server could not read (HandleServerError):
// its request line and headers are unknown ("-"), what fasthttp made of
// a part of them is not logged.
func (h *Handler) logUnread(ctx *fasthttp.RequestCtx) {
	if h.cfg.AccessLog != nil {
		h.logEntry(ctx, monotonic(), accesslog.Entry{})
	}
}

// logEntry completes e with the answer, the time and the client's
// address. A format that does not write the time taken (combined) gets
// the time the request was read, which the connection knew without a
// clock read of its own (serveConn): the answer's time would cost one
// per request, about a fifth of what the log costs the redirect.
func (h *Handler) logEntry(ctx *fasthttp.RequestCtx, start time.Duration, e accesslog.Entry) {
	end := start
	if h.cfg.AccessLog.Timed() {
		end = monotonic()
	}
	e.Time, e.Duration = h.wall.at(end), end-start
	e.Status = ctx.Response.StatusCode()
	switch {
	case ctx.Response.IsBodyStream():
		e.Bytes = -1 // an export or backup: written after the handler, size unknown here
	case !ctx.IsHead():
		e.Bytes = int64(len(ctx.Response.Body()))
	}
	e.Addr, _ = h.cfg.TrustedProxies.client(ctx)
	h.cfg.AccessLog.Log(&e)
}
