package httpapi

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/shortener"
)

// A domain is one of Config.Domains: the Host a request must carry and the
// base of the short links it is answered with.
type domain struct {
	host string // lower case ASCII (IDNA A-labels), with the port if one was given
	name string // host without its port
	base string // scheme://host, the start of returned short links
	// hostBytes is host, for the Host match on every request.
	hostBytes []byte
}

// maxDomains bounds Config.Domains: the Host check is a linear scan.
const maxDomains = 64

// parseDomains reads Config.Domains: each "sho.rt" (https://sho.rt) or an
// absolute http(s) URL without path ("http://go.example.com:8080"). Names
// are mapped as a browser maps them (UTS #46: upper case, full-width dots,
// Unicode labels to A-labels), so the Host header a client sends for them
// matches.
func parseDomains(in []string) ([]domain, error) {
	if len(in) > maxDomains {
		return nil, fmt.Errorf("%d domains: at most %d", len(in), maxDomains)
	}
	out := make([]domain, 0, len(in))
	for _, raw := range in {
		s := strings.TrimSpace(raw)
		if !strings.Contains(s, "://") {
			s = "https://" + s
		}
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("domain %q: want a host name such as sho.rt, or http(s)://host[:port]", raw)
		}
		name, isIP, err := shortener.CanonicalHost(u.Hostname())
		if err != nil || isIP {
			return nil, fmt.Errorf("domain %q: not a valid domain name", raw)
		}
		d := domain{host: name, name: name}
		if p := u.Port(); p != "" {
			d.host = net.JoinHostPort(name, p)
		}
		if !shortener.ValidDomain(d.host) {
			return nil, fmt.Errorf("domain %q: at most %d characters of a-z 0-9 . - (after IDNA mapping) and a port", raw, shortener.MaxDomainLength)
		}
		d.base = u.Scheme + "://" + d.host
		d.hostBytes = []byte(d.host)
		for _, o := range out {
			if o.host == d.host {
				return nil, fmt.Errorf("domain %q given twice", raw)
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// domainOf returns the index in h.domains of the domain a Host header
// names, or -1. A domain configured without a port matches its name with
// any port, unless another is configured with that port; names compare
// case-insensitively (a browser sends A-labels).
func (h *Handler) domainOf(host []byte) int {
	name := host
	if i := bytes.LastIndexByte(host, ':'); i >= 0 && bytes.IndexByte(host[i:], ']') < 0 {
		name = host[:i]
	}
	name = bytes.TrimSuffix(name, []byte(".")) // "sho.rt." is the same name
	match := -1
	for i := range h.domains {
		d := &h.domains[i]
		if bytes.EqualFold(host, d.hostBytes) {
			return i
		}
		if match < 0 && d.host == d.name && bytes.EqualFold(name, d.hostBytes) {
			match = i
		}
	}
	return match
}

// domainList names the configured domains, for the 421 message.
func (h *Handler) domainList() string {
	names := make([]string, len(h.domains))
	for i, d := range h.domains {
		names[i] = d.host
	}
	return strings.Join(names, ", ")
}

// Links belong to domains (shortener/domain.go): the first of
// Config.Domains is the default domain, whose links have Link.Domain ""
// and are stored under their bare id (the seed's layout); another
// domain's links have its host as their Link.Domain. A request names a
// domain by its Host, which ServeFastHTTP has checked; the API also takes
// it as a domain field (create) or ?domain= (the other link routes).

// hostDomain returns the Link.Domain of the domain the request's Host
// names: "" for the default domain, and whenever there is only one.
func (h *Handler) hostDomain(ctx *fasthttp.RequestCtx) string {
	if len(h.domains) < 2 {
		return ""
	}
	if i := h.domainOf(ctx.Host()); i > 0 {
		return h.domains[i].host
	}
	return ""
}

// namedDomain returns the Link.Domain of the domain a client named in a
// domain field or parameter, compared as a Host header is ("SHO.RT",
// "sho.rt.", with a port where the domain has none), or an error with
// Code InvalidParameter for one the server does not serve.
func (h *Handler) namedDomain(ctx *fasthttp.RequestCtx, name string) (string, error) {
	if len(h.domains) > 0 {
		if i := h.domainOf([]byte(name)); i == 0 {
			return "", nil
		} else if i > 0 {
			return h.domains[i].host, nil
		}
		return "", shortener.Errorf(shortener.InvalidParameter, "unknown domain %.100q: this server serves %s", name, h.domainList())
	}
	if def := h.defaultDomainName(ctx); strings.EqualFold(strings.TrimSuffix(name, "."), def) {
		return "", nil
	}
	return "", shortener.Errorf(shortener.InvalidParameter, "unknown domain %.100q: this server serves one domain, %s", name, h.defaultDomainName(ctx))
}

// requestDomain is the domain a link route (get, edit, delete, stats,
// QR) names: ?domain= if given, else the Host's. ok is false once the
// error is answered.
func (h *Handler) requestDomain(ctx *fasthttp.RequestCtx) (string, bool) {
	v := ctx.QueryArgs().Peek("domain")
	if v == nil {
		return h.hostDomain(ctx), true
	}
	d, err := h.namedDomain(ctx, string(v))
	if err != nil {
		h.writeDomainError(ctx, err)
		return "", false
	}
	return d, true
}

// linkBase is where the short links of domain (a Link.Domain) start:
// scheme://host. The default domain's is the PublicURL, the first
// configured domain, or (neither configured) what baseURL derives from
// the request. A stored domain no longer configured keeps its name, with
// the default domain's scheme; the Host header never names one.
func (h *Handler) linkBase(ctx *fasthttp.RequestCtx, domain string) string {
	if domain == "" {
		if len(h.domains) > 0 {
			return h.domains[0].base
		}
		return h.baseURL(ctx)
	}
	for _, d := range h.domains {
		if d.host == domain {
			return d.base
		}
	}
	scheme := "https://"
	if len(h.domains) > 0 {
		scheme = h.domains[0].base[:strings.Index(h.domains[0].base, "://")+3]
	}
	return scheme + domain
}

// domainName is a link's domain as the API shows it: the host of its
// short links.
func (h *Handler) domainName(ctx *fasthttp.RequestCtx, domain string) string {
	if domain != "" {
		return domain
	}
	return h.defaultDomainName(ctx)
}

func (h *Handler) defaultDomainName(ctx *fasthttp.RequestCtx) string {
	b := h.linkBase(ctx, "")
	host := b[strings.Index(b, "://")+3:]
	if i := strings.IndexByte(host, '/'); i >= 0 { // a --public-url with a path
		host = host[:i]
	}
	return host
}
