package httpapi

import (
	"context"

	"github.com/valyala/fasthttp"
)

// /healthz: the process is up and serving.
func (h *Handler) handleHealthz(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.Response.Header.SetContentType(contentTypeJSON)
	ctx.SetBodyString(`{"status":"ok"}` + "\n")
}

// /readyz: the store answers within ReadyTimeout; else 503 unavailable.
func (h *Handler) handleReadyz(ctx *fasthttp.RequestCtx) {
	tctx, cancel := context.WithTimeout(context.Background(), h.cfg.ReadyTimeout)
	defer cancel()
	ctx.Response.Header.Set("Cache-Control", "no-store")
	if err := h.svc.Ready(tctx); err != nil {
		h.writeDomainError(ctx, err)
		return
	}
	ctx.Response.Header.SetContentType(contentTypeJSON)
	ctx.SetBodyString(`{"status":"ready"}` + "\n")
}
