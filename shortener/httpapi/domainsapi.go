package httpapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/shortener"
)

// The domains API (scope admin): the domains this server answers for,
// Config.Domains (source "flag", fixed) and the registry's (source
// "api"), which it adds and deletes. Config.Registry keeps them; every
// Handler on the same store reads it again on RefreshDomains (serve: every
// --domain-refresh), and on a miss of ServesName.

const (
	codeDomainTaken = "domain_taken"  // the domain is served already
	codeDomainFixed = "domain_fixed"  // a --domain: not added nor deleted through the API
	codeDomainInUse = "domain_in_use" // links remain on it
	codeNoDefault   = "no_default_domain"
)

// domainJSON is a domain on the wire.
type domainJSON struct {
	Domain    string  `json:"domain"`
	BaseURL   string  `json:"base_url"`
	Source    string  `json:"source"` // "flag" or "api"
	Default   bool    `json:"default"`
	CreatedAt *string `json:"created_at"` // null for a --domain
}

// domainsView lists the set: static domains first, then the registry's
// by host.
func domainsView(ds *domainSet) []domainJSON {
	created := make(map[string]time.Time, len(ds.registry))
	for _, r := range ds.registry {
		created[r.Host] = r.CreatedAt
	}
	out := make([]domainJSON, 0, len(ds.list))
	for i, d := range ds.list {
		v := domainJSON{Domain: d.host, BaseURL: d.base, Source: "flag", Default: i == 0}
		if i >= ds.static {
			v.Source = "api"
			s := created[d.host].UTC().Format(time.RFC3339)
			v.CreatedAt = &s
		}
		out = append(out, v)
	}
	return out
}

// RefreshDomains reads the registry again: the Host check, the links'
// domains, the web page's choices and ServesName use what it read from
// then on. Without Config.Registry it does nothing.
func (h *Handler) RefreshDomains(ctx context.Context) error {
	if h.cfg.Registry == nil {
		return nil
	}
	h.refreshMu.Lock()
	defer h.refreshMu.Unlock()
	rs, err := h.cfg.Registry.Domains(ctx)
	if err != nil {
		return fmt.Errorf("read the domain registry: %w", err)
	}
	h.domains.Store(newDomainSet(h.static, rs))
	h.refreshed = h.now()
	return nil
}

// MinMissRefresh is how often at most ServesName reads the registry
// again for a name it does not know.
const MinMissRefresh = time.Second

// ServesName reports whether name (a TLS server name: a host name,
// without port) is the name of a domain the Handler answers for, any
// port. On a miss it reads the registry again first (at most once per
// MinMissRefresh, whoever asks), so a domain added through another
// instance is served at its first handshake here once MinMissRefresh has
// passed since this instance last read the registry.
func (h *Handler) ServesName(ctx context.Context, name string) bool {
	if h.domainSet().hasName(name) {
		return true
	}
	if h.cfg.Registry == nil {
		return false
	}
	h.refreshMu.Lock()
	stale := h.now().Sub(h.refreshed) >= MinMissRefresh
	h.refreshMu.Unlock()
	if !stale {
		return false
	}
	if err := h.RefreshDomains(ctx); err != nil {
		h.logger.Warn("domain registry", "error", err)
		return false
	}
	return h.domainSet().hasName(name)
}

// registryDomains returns the registry after an admin check, or answers.
func (h *Handler) registryDomains(ctx *fasthttp.RequestCtx) (shortener.DomainStore, bool) {
	if _, ok := h.authorize(ctx, shortener.ScopeAdmin); !ok {
		return nil, false
	}
	if h.cfg.Registry == nil {
		writeError(ctx, fasthttp.StatusNotFound, codeNotFound, "this server keeps no domain registry")
		return nil, false
	}
	return h.cfg.Registry, true
}

func (h *Handler) handleDomainsList(ctx *fasthttp.RequestCtx) {
	if _, ok := h.authorize(ctx, shortener.ScopeAdmin); !ok {
		return
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	writeJSON(ctx, fasthttp.StatusOK, struct {
		Domains []domainJSON `json:"domains"`
	}{domainsView(h.domainSet())})
}

func (h *Handler) handleDomainsAdd(ctx *fasthttp.RequestCtx) {
	reg, ok := h.registryDomains(ctx)
	if !ok {
		return
	}
	var req struct {
		Domain string `json:"domain"`
	}
	if err := decodeStrict(ctx.PostBody(), &req); err != nil {
		h.writeDecodeError(ctx, err)
		return
	}
	d, err := parseDomain(req.Domain)
	if err != nil {
		writeError(ctx, fasthttp.StatusBadRequest, string(shortener.InvalidParameter), err.Error())
		return
	}
	if len(h.static) == 0 {
		writeError(ctx, fasthttp.StatusConflict, codeNoDefault, "this server answers for any Host (no --domain): start it with a --domain, its default domain, to add others")
		return
	}
	if h.isStatic(d.host) {
		writeError(ctx, fasthttp.StatusConflict, codeDomainFixed, d.host+" is a --domain of this server")
		return
	}
	tctx, cancel := h.timeout()
	defer cancel()
	entry := shortener.Domain{Host: d.host, Scheme: d.scheme(), CreatedAt: h.now().UTC().Truncate(time.Second)}
	switch err := reg.AddDomain(tctx, entry); {
	case errors.Is(err, shortener.ErrConflict):
		writeError(ctx, fasthttp.StatusConflict, codeDomainTaken, d.host+" is in the registry already")
		return
	case err != nil:
		h.writeDomainError(ctx, err)
		return
	}
	if err := h.RefreshDomains(tctx); err != nil {
		h.logger.Warn("domain registry", "error", err) // added: served at the next refresh
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.Response.Header.Set("Location", "/api/v1/domains/"+d.host)
	created := entry.CreatedAt.Format(time.RFC3339)
	writeJSON(ctx, fasthttp.StatusCreated, domainJSON{Domain: d.host, BaseURL: d.base, Source: "api", CreatedAt: &created})
}

// domainInUse is the 409 of a delete of a domain with links: the error,
// and how many links it has.
type domainInUse struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Links   int    `json:"links"`
	} `json:"error"`
}

func (h *Handler) handleDomainsDelete(ctx *fasthttp.RequestCtx, name []byte) {
	reg, ok := h.registryDomains(ctx)
	if !ok {
		return
	}
	d, err := parseDomain(string(name))
	if err != nil {
		writeError(ctx, fasthttp.StatusNotFound, codeNotFound, "no such domain")
		return
	}
	if h.isStatic(d.host) {
		writeError(ctx, fasthttp.StatusConflict, codeDomainFixed, d.host+" is a --domain of this server: remove the flag instead")
		return
	}
	tctx, cancel := h.timeout()
	defer cancel()
	rs, err := reg.Domains(tctx)
	if err != nil {
		h.writeDomainError(ctx, err)
		return
	}
	if !slices.ContainsFunc(rs, func(r shortener.Domain) bool { return r.Host == d.host }) {
		writeError(ctx, fasthttp.StatusNotFound, codeNotFound, "no such domain in the registry: "+d.host)
		return
	}
	// Refused while links remain: they would answer 421 from then on.
	n, err := h.svc.CountDomainLinks(tctx, d.host)
	if err != nil {
		h.writeDomainError(ctx, err)
		return
	}
	if n > 0 {
		var out domainInUse
		out.Error.Code, out.Error.Links = codeDomainInUse, n
		out.Error.Message = fmt.Sprintf("%s has %d links: delete them first (GET /api/v1/links?domain=%s lists them)", d.host, n, d.host)
		writeJSON(ctx, fasthttp.StatusConflict, out)
		return
	}
	if err := reg.DeleteDomain(tctx, d.host); err != nil {
		h.writeDomainError(ctx, err)
		return
	}
	if err := h.RefreshDomains(tctx); err != nil {
		h.logger.Warn("domain registry", "error", err)
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// isStatic reports whether host is one of Config.Domains.
func (h *Handler) isStatic(host string) bool {
	return slices.ContainsFunc(h.static, func(d domain) bool { return d.host == host })
}
