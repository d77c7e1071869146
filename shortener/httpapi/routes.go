package httpapi

import (
	"bytes"
	"time"

	"github.com/valyala/fasthttp"
)

// The whole API (api/openapi.yaml documents it):
//
//	GET|HEAD /{id}                  redirect (the hot path)
//	POST     /shortenURL            seed-compatible create
//	GET      /getFullURL/{id}       seed-compatible lookup
//	POST     /api/v1/links          create (custom slug, expiry, visit limit)
//	GET      /api/v1/links          list, paginated; ?tag= ?q= ?created_after= ?created_before= ?state= newest (?order=oldest: oldest) first (links:read)
//	GET      /api/v1/links/{id}     one link
//	PATCH    /api/v1/links/{id}     edit: url, expiry, visit limit, tags, forward_query (links:write)
//	DELETE   /api/v1/links/{id}     delete (links:write)
//	GET      /api/v1/links/{id}/stats   visit statistics over a range (admin unless --stats-public); stats.go
//	GET      /api/v1/links/{id}/stats.csv   the same as CSV
//	GET      /api/v1/stats          visit statistics across links, ?domain= ?tag= (stats:read)
//	GET      /api/v1/stats.csv      the same as CSV
//	GET      /api/v1/links/{id}/qr      QR code of the short link (?format=png|svg&size=)
//	POST     /api/v1/keys           create an API key (admin): its token is shown once
//	GET      /api/v1/keys           list API keys (admin), without secrets
//	DELETE   /api/v1/keys/{id}      revoke an API key (admin)
//	GET      /api/v1/domains        the domains served: --domain's and the registry's (admin); domainsapi.go
//	POST     /api/v1/domains        add a domain to the registry (admin)
//	DELETE   /api/v1/domains/{domain}   delete a registry domain without links (admin)
//	GET      /api/v1/session        the web page's session: who is signed in, its CSRF token
//	POST     /api/v1/session        sign in with a key: a session cookie (session.go)
//	DELETE   /api/v1/session        sign out: the session is revoked
//	GET      /api/v1/export         every link with its statistics, streamed (?format=jsonl|csv) (admin; transfer.go)
//	POST     /api/v1/import         import JSON Lines, streamed both ways (admin)
//	GET      /api/v1/backup         a consistent copy of the store, a tar archive streamed (admin)
//	GET      /                      the web page (with Config.UI)
//	POST     /                      the web page's form, without JavaScript (with Config.UI)
//	GET      /static/{file}         the web page's script and style (with Config.UI)
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
	routePatch
	routeHealthz
	routeReadyz
	routeMetrics
	routeStats
	routeStatsCSV
	routeStatsAll
	routeStatsAllCSV
	routeQR
	routeUI
	routeUIForm
	routeUIStatic
	routeKeysCreate
	routeKeysList
	routeKeysDelete
	routeDomainsList
	routeDomainsAdd
	routeDomainsDelete
	routeSessionGet
	routeSignIn
	routeSignOut
	routeExport
	routeImport
	routeBackup
	routeMethodNotAllowed
	routeNotFound
	numRoutes
)

var routeNames = [numRoutes]string{
	routeRedirect: "redirect", routeShorten: "shorten_url", routeGetFullURL: "get_full_url",
	routeCreate: "links_create", routeList: "links_list", routeGet: "links_get", routeDelete: "links_delete", routePatch: "links_update",
	routeHealthz: "healthz", routeReadyz: "readyz", routeMetrics: "metrics",
	routeStats: "links_stats", routeStatsCSV: "links_stats_csv", routeStatsAll: "stats", routeStatsAllCSV: "stats_csv", routeQR: "links_qr", routeUI: "ui", routeUIForm: "ui_form", routeUIStatic: "ui_static",
	routeKeysCreate: "keys_create", routeKeysList: "keys_list", routeKeysDelete: "keys_delete",
	routeDomainsList: "domains_list", routeDomainsAdd: "domains_create", routeDomainsDelete: "domains_delete",
	routeSessionGet: "session_get", routeSignIn: "session_create", routeSignOut: "session_delete",
	routeExport: "export", routeImport: "import", routeBackup: "backup",
	routeMethodNotAllowed: "method_not_allowed", routeNotFound: "not_found",
}

func (r route) String() string { return routeNames[r] }

// class is a route's in-flight budget: each class is shed on its own, so
// a flood of one kind of request (creates, QR codes) cannot take the
// budget of another (redirects).
type class uint8

const (
	classOperational class = iota // probes and scrapes: never shed, they must work when the service is busiest
	classRedirect                 // redirects and lookups (and the web page, 404s, 405s)
	classCreate                   // creates
	classQRStats                  // QR codes and statistics
	classAdmin                    // list, edit, delete, keys
	numClasses
)

var classNames = [numClasses]string{classOperational: "operational", classRedirect: "redirect", classCreate: "create", classQRStats: "qr_stats", classAdmin: "admin"}

func (c class) String() string { return classNames[c] }

func (r route) class() class {
	switch r {
	case routeHealthz, routeReadyz, routeMetrics:
		return classOperational
	case routeShorten, routeCreate, routeUIForm:
		return classCreate
	case routeQR, routeStats, routeStatsCSV:
		return classQRStats
	case routeList, routeStatsAll, routeStatsAllCSV, routeDelete, routePatch, routeKeysCreate, routeKeysList, routeKeysDelete, routeDomainsList, routeDomainsAdd, routeDomainsDelete, routeSessionGet, routeSignIn, routeSignOut,
		routeExport, routeImport, routeBackup:
		return classAdmin
	}
	return classRedirect
}

var (
	pathShorten    = []byte("/shortenURL")
	pathGetFullURL = []byte("/getFullURL/")
	pathLinks      = []byte("/api/v1/links")
	pathKeys       = []byte("/api/v1/keys")
	pathSession    = []byte("/api/v1/session")
	pathDomains    = []byte("/api/v1/domains")
	pathExport     = []byte("/api/v1/export")
	pathImport     = []byte("/api/v1/import")
	pathBackup     = []byte("/api/v1/backup")
	pathHealthz    = []byte("/healthz")
	pathReadyz     = []byte("/readyz")
	pathMetrics    = []byte("/metrics")
	pathStatic     = []byte("/static/")
	suffixStats    = []byte("/stats")
	suffixStatsCSV = []byte("/stats.csv")
	pathStats      = []byte("/api/v1/stats")
	pathStatsCSV   = []byte("/api/v1/stats.csv")
	suffixQR       = []byte("/qr")
)

// match finds the route for a request. id is the path parameter, if any
// (it aliases the request's path). allow is the Allow header for 405s.
func match(ctx *fasthttp.RequestCtx) (r route, id []byte, allow string) {
	path := ctx.Path()
	m := ctx.Method()
	get := string(m) == fasthttp.MethodGet || string(m) == fasthttp.MethodHead
	if len(path) == 1 { // "/": the web page
		switch {
		case get:
			return routeUI, nil, ""
		case string(m) == fasthttp.MethodPost:
			return routeUIForm, nil, ""
		}
		return routeMethodNotAllowed, nil, "GET, HEAD, POST"
	}
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
			case string(m) == fasthttp.MethodPatch:
				return routePatch, rest[1:], ""
			}
			return routeMethodNotAllowed, nil, "GET, HEAD, PATCH, DELETE"
		case rest[0] == '/' && len(rest) > 1:
			// /api/v1/links/{id}/stats and /qr
			sub := rest[1:]
			slash := bytes.IndexByte(sub, '/')
			if slash <= 0 {
				break
			}
			id, tail := sub[:slash], sub[slash:]
			var r route
			switch {
			case bytes.Equal(tail, suffixStats):
				r = routeStats
			case bytes.Equal(tail, suffixStatsCSV):
				r = routeStatsCSV
			case bytes.Equal(tail, suffixQR):
				r = routeQR
			default:
				return routeNotFound, nil, ""
			}
			if !get {
				return routeMethodNotAllowed, nil, "GET, HEAD"
			}
			return r, id, ""
		}
	case bytes.Equal(path, pathStats), bytes.Equal(path, pathStatsCSV):
		if !get {
			return routeMethodNotAllowed, nil, "GET, HEAD"
		}
		if len(path) == len(pathStats) {
			return routeStatsAll, nil, ""
		}
		return routeStatsAllCSV, nil, ""
	case bytes.Equal(path, pathKeys):
		switch {
		case string(m) == fasthttp.MethodPost:
			return routeKeysCreate, nil, ""
		case get:
			return routeKeysList, nil, ""
		}
		return routeMethodNotAllowed, nil, "GET, HEAD, POST"
	case bytes.HasPrefix(path, pathKeys) && path[len(pathKeys)] == '/' && len(path) > len(pathKeys)+1 && bytes.IndexByte(path[len(pathKeys)+1:], '/') < 0:
		if string(m) != fasthttp.MethodDelete {
			return routeMethodNotAllowed, nil, "DELETE"
		}
		return routeKeysDelete, path[len(pathKeys)+1:], ""
	case bytes.Equal(path, pathDomains):
		switch {
		case string(m) == fasthttp.MethodPost:
			return routeDomainsAdd, nil, ""
		case get:
			return routeDomainsList, nil, ""
		}
		return routeMethodNotAllowed, nil, "GET, HEAD, POST"
	case bytes.HasPrefix(path, pathDomains) && path[len(pathDomains)] == '/' && len(path) > len(pathDomains)+1 && bytes.IndexByte(path[len(pathDomains)+1:], '/') < 0:
		if string(m) != fasthttp.MethodDelete {
			return routeMethodNotAllowed, nil, "DELETE"
		}
		return routeDomainsDelete, path[len(pathDomains)+1:], ""
	case bytes.Equal(path, pathSession):
		switch {
		case get:
			return routeSessionGet, nil, ""
		case string(m) == fasthttp.MethodPost:
			return routeSignIn, nil, ""
		case string(m) == fasthttp.MethodDelete:
			return routeSignOut, nil, ""
		}
		return routeMethodNotAllowed, nil, "GET, HEAD, POST, DELETE"
	case bytes.Equal(path, pathImport):
		if string(m) != fasthttp.MethodPost {
			return routeMethodNotAllowed, nil, "POST"
		}
		return routeImport, nil, ""
	case bytes.Equal(path, pathExport), bytes.Equal(path, pathBackup):
		if string(m) != fasthttp.MethodGet {
			return routeMethodNotAllowed, nil, "GET"
		}
		if path[len(path)-1] == 't' {
			return routeExport, nil, ""
		}
		return routeBackup, nil, ""
	case bytes.HasPrefix(path, pathStatic):
		if !get {
			return routeMethodNotAllowed, nil, "GET, HEAD"
		}
		return routeUIStatic, path[len(pathStatic):], ""
	}
	return routeNotFound, nil, ""
}

// dispatch runs the handler of route r, a request that started at
// monotonic() == start.
func (h *Handler) dispatch(ctx *fasthttp.RequestCtx, r route, id []byte, allow string, start time.Duration) {
	switch r {
	case routeRedirect:
		h.handleRedirect(ctx, id, start)
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
	case routePatch:
		h.handlePatch(ctx, id)
	case routeHealthz:
		h.handleHealthz(ctx)
	case routeReadyz:
		h.handleReadyz(ctx)
	case routeMetrics:
		h.metricsHandler(ctx)
	case routeStats, routeStatsCSV:
		h.handleStats(ctx, id, r == routeStatsCSV)
	case routeStatsAll, routeStatsAllCSV:
		h.handleStats(ctx, nil, r == routeStatsAllCSV)
	case routeQR:
		h.handleQR(ctx, id)
	case routeKeysCreate:
		h.handleKeysCreate(ctx)
	case routeKeysList:
		h.handleKeysList(ctx)
	case routeKeysDelete:
		h.handleKeysDelete(ctx, id)
	case routeDomainsList:
		h.handleDomainsList(ctx)
	case routeDomainsAdd:
		h.handleDomainsAdd(ctx)
	case routeDomainsDelete:
		h.handleDomainsDelete(ctx, id)
	case routeSessionGet:
		h.handleSessionGet(ctx)
	case routeSignIn:
		h.handleSignIn(ctx)
	case routeSignOut:
		h.handleSignOut(ctx)
	case routeExport:
		h.handleExport(ctx)
	case routeImport:
		h.handleImport(ctx)
	case routeBackup:
		h.handleBackup(ctx)
	case routeUI, routeUIForm, routeUIStatic:
		if h.ui == nil {
			writeError(ctx, fasthttp.StatusNotFound, codeNotFound, "no such route (the web page is disabled: --ui=false)")
			return
		}
		switch r {
		case routeUI:
			h.handleUI(ctx)
		case routeUIForm:
			h.handleUIForm(ctx)
		default:
			h.ui.serveStatic(ctx, id)
		}
	case routeMethodNotAllowed:
		ctx.Response.Header.Set("Allow", allow)
		writeError(ctx, fasthttp.StatusMethodNotAllowed, codeMethodNotAllowed, "method "+string(ctx.Method())+" not allowed; allowed: "+allow)
	default:
		writeError(ctx, fasthttp.StatusNotFound, codeNotFound, "no such route")
	}
}
