package httpapi

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"mime"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/shortener"
)

// The web page: one HTML page (its slots filled in on the server,
// ui_page.go, so that the basic form works without JavaScript: POST / → 303 → GET /?created=ID shows the result),
// plus a script that makes it the dashboard: sign-in (session.go), the
// links with their filters, edits, deletes and QR codes, the statistics
// of a link and of all links, and the API keys. Anonymous visitors (with
// --create-access public) create links and see the ones created from this
// browser (localStorage; never a key). Everything is embedded; no CDN, no
// inline script (the Content-Security-Policy allows only 'self').

//go:embed ui/index.html ui/app.js ui/app.css
var uiFiles embed.FS

// Expiry choices of the form, as Go durations ("" never expires).
var uiExpiries = []struct{ Value, Label string }{
	{"", "Never"}, {"1h", "In 1 hour"}, {"24h", "In 1 day"}, {"168h", "In 7 days"}, {"720h", "In 30 days"},
}

const uiCSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

type ui struct {
	page   []pagePart        // ui/index.html at its slots
	static map[string]*asset // by name: app.js (not cached) and app.<hash>.js (immutable)
	js     string            // the path of the content-hashed script
	css    string            // and style
}

// asset is a static file, with its gzip encoding.
type asset struct {
	body, gz  []byte
	ctype     string
	immutable bool
}

func newUI() *ui {
	u := &ui{static: map[string]*asset{}}
	for _, name := range []string{"app.js", "app.css"} {
		b, err := uiFiles.ReadFile("ui/" + name)
		if err != nil {
			panic(err) // embedded: cannot happen
		}
		var gz bytes.Buffer
		w, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
		w.Write(b)
		w.Close()
		sum := sha256.Sum256(b)
		ext := path.Ext(name)
		hashed := strings.TrimSuffix(name, ext) + "." + hex.EncodeToString(sum[:])[:12] + ext
		a := asset{body: b, gz: gz.Bytes(), ctype: mime.TypeByExtension(ext)}
		u.static[name] = &a
		im := a
		im.immutable = true
		u.static[hashed] = &im
		if ext == ".js" {
			u.js = "/static/" + hashed
		} else {
			u.css = "/static/" + hashed
		}
	}
	src, err := uiFiles.ReadFile("ui/index.html")
	if err != nil {
		panic(err)
	}
	if u.page, err = parsePage(string(src), pageSlots); err != nil {
		panic("ui/index.html: " + err.Error()) // embedded: TestPageSlots sees it first
	}
	return u
}

// pageData is what the page's slots show.
type pageData struct {
	JS, CSS     string // the assets' content-hashed paths
	Expiries    []struct{ Value, Label string }
	StatsPublic bool
	Domains     []string // the domains to choose from, when there are several
	Form        struct{ URL, Slug, Expires, MaxVisits, Domain string }
	Error       string
	Result      *linkJSON
	QRSize      int
	CSRF        string // the session's token, for the no-JavaScript form
	// Session is who the page is signed in as (nil: nobody), so that the
	// header is drawn as the script will leave it.
	Session *pageSession
}

type pageSession struct {
	Name                          string
	Links, Stats, AdminKeys, Make bool // may list links, read statistics, manage keys, create
}

func (h *Handler) renderPage(ctx *fasthttp.RequestCtx, status int, d pageData) {
	d.JS, d.CSS, d.Expiries, d.StatsPublic, d.QRSize = h.ui.js, h.ui.css, uiExpiries, h.cfg.StatsPublic, DefaultQRSize
	if ds := h.domainSet(); len(ds.list) > 1 {
		for _, dom := range ds.list {
			d.Domains = append(d.Domains, dom.host)
		}
		if d.Form.Domain == "" {
			d.Form.Domain = h.domainName(ctx, h.hostDomain(ctx))
		}
	}
	if ss, _, open := h.sessions.get(ctx.Request.Header.Cookie(sessionCookie), h.now()); open {
		d.CSRF = ss.csrf
		d.Session = h.pageSession(ctx, ss)
	}
	page := render(h.ui.page, &d)
	setPageHeaders(&ctx.Response.Header, uiCSP)
	ctx.Response.Header.Set("Vary", "Accept-Encoding")
	ctx.SetStatusCode(status)
	if ctx.Request.Header.HasAcceptEncoding("gzip") {
		ctx.Response.Header.Set("Content-Encoding", "gzip")
		ctx.SetBody(fasthttp.AppendGzipBytesLevel(nil, page, fasthttp.CompressBestSpeed))
		return
	}
	ctx.SetBody(page)
}

// pageSession describes a signed-in page's session, as GET
// /api/v1/session would.
func (h *Handler) pageSession(ctx *fasthttp.RequestCtx, ss *session) *pageSession {
	c := caller{admin: ss.admin}
	name := "admin key"
	if !ss.admin {
		tctx, cancel := h.timeout()
		defer cancel()
		k, err := h.keys.get(tctx, ss.keyID)
		if err != nil {
			return nil // the script finds out
		}
		c.key, name = &k, k.Name
	}
	return &pageSession{Name: name, Links: c.allows(shortener.ScopeRead), Stats: c.allows(shortener.ScopeStats),
		AdminKeys: c.allows(shortener.ScopeAdmin) && h.keys.store != nil,
		Make:      h.cfg.CreateAccess != AccessKey || c.allows(shortener.ScopeCreate)}
}

// handleUI serves the page; ?created=ID shows that link as the result of
// the form (the no-JavaScript path).
func (h *Handler) handleUI(ctx *fasthttp.RequestCtx) {
	var d pageData
	if id := ctx.QueryArgs().Peek("created"); id != nil {
		domain := h.hostDomain(ctx)
		var err error
		if v := ctx.QueryArgs().Peek("domain"); v != nil {
			domain, err = h.namedDomain(ctx, string(v))
		}
		var l shortener.Link
		if err == nil {
			tctx, cancel := h.timeout()
			defer cancel()
			l, err = h.svc.Get(tctx, domain, string(id))
		}
		if err != nil {
			status, _ := statusOf(err)
			d.Error = shortener.ErrorMessage(err)
			h.renderPage(ctx, status, d)
			return
		}
		r := h.linkJSON(ctx, l)
		d.Result = &r
	}
	h.renderPage(ctx, fasthttp.StatusOK, d)
}

// handleUIForm creates a link from the page's form (application/
// x-www-form-urlencoded) and redirects to the result (303, so reloading
// does not post again). Errors re-render the form with the message and
// the entered values, with the status the API would give; clients that
// do not accept HTML get the API's JSON error.
func (h *Handler) handleUIForm(ctx *fasthttp.RequestCtx) {
	mt, _, _ := mime.ParseMediaType(string(ctx.Request.Header.ContentType()))
	if mt != "application/x-www-form-urlencoded" {
		writeError(ctx, fasthttp.StatusUnsupportedMediaType, codeUnsupportedMediaType,
			"the form takes application/x-www-form-urlencoded; the JSON API is POST /api/v1/links")
		return
	}
	if !h.allowCreateRequest(ctx) {
		return
	}
	args := ctx.PostArgs()
	var d pageData
	d.Form.URL = strings.TrimSpace(string(args.Peek("url")))
	d.Form.Slug = strings.TrimSpace(string(args.Peek("slug")))
	d.Form.Expires = string(args.Peek("expires"))
	d.Form.MaxVisits = strings.TrimSpace(string(args.Peek("max_visits")))
	req := shortener.CreateRequest{URL: d.Form.URL, Slug: d.Form.Slug, Host: string(ctx.Host()), Domain: h.hostDomain(ctx)}
	var err error
	if v := args.Peek("domain"); v != nil {
		d.Form.Domain = string(v)
		req.Domain, err = h.namedDomain(ctx, d.Form.Domain)
	}
	if err == nil && d.Form.Expires != "" {
		ok := false
		for _, e := range uiExpiries {
			ok = ok || e.Value == d.Form.Expires
		}
		var ttl time.Duration
		if ttl, err = time.ParseDuration(d.Form.Expires); !ok || err != nil {
			err = shortener.Errorf(shortener.InvalidParameter, "choose an expiry from the list")
		} else {
			req.ExpiresAt = time.Now().Add(ttl)
		}
	}
	if err == nil && d.Form.MaxVisits != "" {
		n, perr := strconv.ParseInt(d.Form.MaxVisits, 10, 64)
		if perr != nil || n <= 0 {
			err = shortener.Errorf(shortener.InvalidParameter, "max visits must be a positive whole number, or empty for unlimited")
		}
		req.MaxVisits = n
	}
	var l shortener.Link
	if err == nil {
		tctx, cancel := h.timeout()
		defer cancel()
		l, err = h.svc.Create(tctx, req)
	}
	if err != nil {
		if !bytes.Contains(ctx.Request.Header.Peek("Accept"), []byte("text/html")) {
			h.writeDomainError(ctx, err)
			return
		}
		status, _ := statusOf(err)
		d.Error = shortener.ErrorMessage(err)
		h.renderPage(ctx, status, d)
		return
	}
	h.metrics.created.Inc()
	if l.Domain != "" {
		ctx.Response.Header.Set("Location", "/?created="+l.ID+"&domain="+l.Domain)
	} else {
		ctx.Response.Header.Set("Location", "/?created="+l.ID)
	}
	ctx.SetStatusCode(fasthttp.StatusSeeOther)
}

// serveStatic serves the page's script and style: gzip-encoded to
// clients that take it, and cached for a year under their content-hashed
// names (the page names those), revalidated under their plain ones.
func (u *ui) serveStatic(ctx *fasthttp.RequestCtx, name []byte) {
	a, ok := u.static[string(name)]
	if !ok {
		writeError(ctx, fasthttp.StatusNotFound, codeNotFound, "no such file")
		return
	}
	hdr := &ctx.Response.Header
	hdr.SetContentType(a.ctype)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Vary", "Accept-Encoding")
	if a.immutable {
		hdr.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		hdr.Set("Cache-Control", "no-cache")
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	if ctx.Request.Header.HasAcceptEncoding("gzip") {
		hdr.Set("Content-Encoding", "gzip")
		ctx.SetBody(a.gz)
		return
	}
	ctx.SetBody(a.body)
}
