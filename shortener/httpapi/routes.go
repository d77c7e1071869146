package httpapi

import (
	"bytes"

	"github.com/valyala/fasthttp"
)

// The whole API (api/openapi.yaml documents it):
//
//	GET|HEAD /{id}                  redirect (the hot path)
//	POST     /shortenURL            seed-compatible create
//	GET      /getFullURL/{id}       seed-compatible lookup
//	POST     /api/v1/links          create (custom slug, expiry, visit limit)
//	GET      /api/v1/links          list, paginated (admin)
//	GET      /api/v1/links/{id}     one link
//	DELETE   /api/v1/links/{id}     delete (admin)
//	GET      /healthz               process is up
//	GET      /readyz                store answers
//	GET      /metrics               Prometheus metrics
//
// Wrong methods on a known path answer 405 with Allow; unknown paths 404.

// route names a route for metrics and dispatch.
type route uint8

const (
	routeRedirect route = iota
	routeShorten
	routeGetFullURL
	routeCreate
	routeList
	routeGet
	routeDelete
	routeHealthz
	routeReadyz
	routeMetrics
	routeMethodNotAllowed
	routeNotFound
	numRoutes
)

var routeNames = [numRoutes]string{
	routeRedirect: "redirect", routeShorten: "shorten_url", routeGetFullURL: "get_full_url",
	routeCreate: "links_create", routeList: "links_list", routeGet: "links_get", routeDelete: "links_delete",
	routeHealthz: "healthz", routeReadyz: "readyz", routeMetrics: "metrics",
	routeMethodNotAllowed: "method_not_allowed", routeNotFound: "not_found",
}

func (r route) String() string { return routeNames[r] }

// operational routes are never shed under load: probes and scrapes must
// work when the service is busiest.
func (r route) operational() bool {
	return r == routeHealthz || r == routeReadyz || r == routeMetrics
}

var (
	pathShorten    = []byte("/shortenURL")
	pathGetFullURL = []byte("/getFullURL/")
	pathLinks      = []byte("/api/v1/links")
	pathHealthz    = []byte("/healthz")
	pathReadyz     = []byte("/readyz")
	pathMetrics    = []byte("/metrics")
)

// match finds the route for a request. id is the path parameter, if any
// (it aliases the request's path). allow is the Allow header for 405s.
func match(ctx *fasthttp.RequestCtx) (r route, id []byte, allow string) {
	path := ctx.Path()
	m := ctx.Method()
	get := string(m) == fasthttp.MethodGet || string(m) == fasthttp.MethodHead
	// The hot path first: /{id}, a single segment.
	if len(path) > 1 && bytes.IndexByte(path[1:], '/') < 0 {
		switch {
		case bytes.Equal(path, pathShorten):
			if string(m) == fasthttp.MethodPost {
				return routeShorten, nil, ""
			}
			return routeMethodNotAllowed, nil, "POST"
		case bytes.Equal(path, pathHealthz), bytes.Equal(path, pathReadyz), bytes.Equal(path, pathMetrics):
			if !get {
				return routeMethodNotAllowed, nil, "GET, HEAD"
			}
			switch path[1] {
			case 'h':
				return routeHealthz, nil, ""
			case 'r':
				return routeReadyz, nil, ""
			}
			return routeMetrics, nil, ""
		}
		if !get {
			return routeMethodNotAllowed, nil, "GET, HEAD"
		}
		return routeRedirect, path[1:], ""
	}
	switch {
	case bytes.HasPrefix(path, pathGetFullURL):
		id = path[len(pathGetFullURL):]
		if len(id) == 0 || bytes.IndexByte(id, '/') >= 0 {
			return routeNotFound, nil, ""
		}
		if !get {
			return routeMethodNotAllowed, nil, "GET, HEAD"
		}
		return routeGetFullURL, id, ""
	case bytes.HasPrefix(path, pathLinks):
		rest := path[len(pathLinks):]
		switch {
		case len(rest) == 0:
			switch {
			case string(m) == fasthttp.MethodPost:
				return routeCreate, nil, ""
			case get:
				return routeList, nil, ""
			}
			return routeMethodNotAllowed, nil, "GET, HEAD, POST"
		case rest[0] == '/' && len(rest) > 1 && bytes.IndexByte(rest[1:], '/') < 0:
			switch {
			case get:
				return routeGet, rest[1:], ""
			case string(m) == fasthttp.MethodDelete:
				return routeDelete, rest[1:], ""
			}
			return routeMethodNotAllowed, nil, "GET, HEAD, DELETE"
		}
	}
	return routeNotFound, nil, ""
}

// dispatch runs the handler of route r and returns the status it answered.
func (h *Handler) dispatch(ctx *fasthttp.RequestCtx, r route, id []byte, allow string) {
	switch r {
	case routeRedirect:
		h.handleRedirect(ctx, id)
	case routeShorten:
		h.handleShortenURL(ctx)
	case routeGetFullURL:
		h.handleGetFullURL(ctx, id)
	case routeCreate:
		h.handleCreate(ctx)
	case routeList:
		h.handleList(ctx)
	case routeGet:
		h.handleGet(ctx, id)
	case routeDelete:
		h.handleDelete(ctx, id)
	case routeHealthz:
		h.handleHealthz(ctx)
	case routeReadyz:
		h.handleReadyz(ctx)
	case routeMetrics:
		h.metricsHandler(ctx)
	case routeMethodNotAllowed:
		ctx.Response.Header.Set("Allow", allow)
		writeError(ctx, fasthttp.StatusMethodNotAllowed, codeMethodNotAllowed, "method "+string(ctx.Method())+" not allowed; allowed: "+allow)
	default:
		writeError(ctx, fasthttp.StatusNotFound, codeNotFound, "no such route")
	}
}
