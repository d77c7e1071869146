package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/netip"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/shortener"
)

// The redirect is the hot path: look the id up, write Location and the
// configured 30x, nothing else. It does not allocate when the store
// implements shortener.URLAppender (BenchmarkRedirect), nor when it
// forwards the visitor's query string (into the same pooled buffer).

var (
	headerLocation     = []byte("Location")
	headerCacheControl = []byte("Cache-Control")
	mimeJSON           = []byte("application/json")
)

// locations are reusable buffers for the Location value.
var locations = sync.Pool{New: func() any {
	b := make([]byte, 0, 512)
	return &b
}}

// handleRedirect follows the link id of a request that started at
// monotonic() == start.
func (h *Handler) handleRedirect(ctx *fasthttp.RequestCtx, id []byte, start time.Duration) {
	buf := locations.Get().(*[]byte)
	key, kb := id, (*[]byte)(nil) // the store key: the id on the default domain
	if ds := h.domainSet(); len(ds.list) > 1 {
		if i := ds.of(ctx.Host()); i > 0 {
			d := ds.list[i].host
			kb = locations.Get().(*[]byte)
			*kb = shortener.AppendKey((*kb)[:0], d, id)
			key = *kb
		}
	}
	loc, l, err := h.svc.AppendResolve(context.Background(), (*buf)[:0], key)
	full := loc
	if err == nil && l.ForwardQuery.Enabled(h.cfg.ForwardQuery) {
		if q := ctx.URI().QueryString(); len(q) > 0 {
			n := len(loc)
			full = shortener.AppendForwardQuery(loc, loc, q)
			loc = full[n:]
		}
	}
	if err == nil {
		ctx.Response.Header.SetCanonical(headerLocation, loc)
		ctx.Response.Header.SetCanonical(headerCacheControl, h.cacheControl)
		ctx.SetStatusCode(h.redirectStatus)
		if h.visits != nil && ctx.IsGet() {
			var ip netip.Addr
			var country string
			if h.visitAddr {
				ip, country = h.cfg.TrustedProxies.client(ctx)
			}
			h.visits.Record(key, ctx.Request.Header.Referer(), ctx.Request.Header.UserAgent(), ctx.URI().QueryString(), ip, country, h.wall.at(start), l)
		}
	}
	*buf = full
	locations.Put(buf)
	if kb != nil {
		locations.Put(kb)
	}
	if err != nil {
		h.redirectFailed(ctx, err)
	}
}

// redirectFailed answers a redirect that cannot be followed: a 302 to
// Config.NotFoundURL or ExpiredURL when set, else a small HTML page for
// browsers; the JSON error when the client asks for JSON.
func (h *Handler) redirectFailed(ctx *fasthttp.RequestCtx, err error) {
	status, _ := statusOf(err)
	if bytes.Contains(ctx.Request.Header.Peek("Accept"), mimeJSON) || status >= 500 {
		h.writeDomainError(ctx, err)
		return
	}
	page, to := notFoundPage, h.cfg.NotFoundURL
	if errors.Is(err, shortener.ErrExpired) {
		page, to = expiredPage, h.cfg.ExpiredURL
	}
	if to != "" {
		ctx.Response.Header.Set("Location", to)
		ctx.Response.Header.Set("Cache-Control", "no-store")
		ctx.SetStatusCode(fasthttp.StatusFound)
		return
	}
	setPageHeaders(&ctx.Response.Header, pageCSP)
	ctx.SetStatusCode(status)
	ctx.SetBodyString(page)
}

// pageCSS is the style of the error pages, inline: pageCSP allows it by
// its hash, and nothing else.
const pageCSS = `body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;color:#222}h1{font-size:1.5rem}`

const pageStyle = `<style>` + pageCSS + `</style>`

// pageCSP is the Content-Security-Policy of the error pages: no script,
// no resource, no form, no frame; their one inline style by its hash.
var pageCSP = func() string {
	sum := sha256.Sum256([]byte(pageCSS))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}()

// setPageHeaders sets the headers of every HTML answer: its type, the
// Content-Security-Policy csp, no MIME sniffing, no Referer sent from it
// (a short link's address stays private), not cached.
func setPageHeaders(hdr *fasthttp.ResponseHeader, csp string) {
	hdr.SetContentType("text/html; charset=utf-8")
	hdr.Set("Content-Security-Policy", csp)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("Cache-Control", "no-store")
}

const notFoundPage = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>Link not found</title>` + pageStyle + `</head><body><h1>Link not found</h1><p>There is no short link at this address. Check it for typing mistakes.</p></body></html>
`

const expiredPage = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>Link expired</title>` + pageStyle + `</head><body><h1>Link expired</h1><p>This short link has expired or reached its visit limit.</p></body></html>
`
