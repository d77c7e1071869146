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

// A domain is one of Config.Domains or of the registry: the Host a
// request must carry and the base of the short links it is answered with.
type domain struct {
	host string // lower case ASCII (IDNA A-labels), with the port if one was given
	name string // host without its port
	base string // scheme://host, the start of returned short links
}

// maxDomains bounds Config.Domains.
const maxDomains = 64

// parseDomains reads Config.Domains (parseDomain), each given once.
func parseDomains(in []string) ([]domain, error) {
	if len(in) > maxDomains {
		return nil, fmt.Errorf("%d domains: at most %d", len(in), maxDomains)
	}
	out := make([]domain, 0, len(in))
	for _, raw := range in {
		d, err := parseDomain(raw)
		if err != nil {
			return nil, err
		}
		for _, o := range out {
			if o.host == d.host {
				return nil, fmt.Errorf("domain %q given twice", raw)
			}
		}
		out = append(out, d)
	}
	return out, nil
}

// parseDomain reads a domain as --domain and the registry's API take it:
// "sho.rt" (https://sho.rt) or an absolute http(s) URL without path
// ("http://go.example.com:8080"). Names are mapped as a browser maps
// them (UTS #46: upper case, full-width dots, Unicode labels to
// A-labels), so the Host header a client sends for them matches.
func parseDomain(raw string) (domain, error) {
	s := strings.TrimSpace(raw)
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return domain{}, fmt.Errorf("domain %q: want a host name such as sho.rt, or http(s)://host[:port]", raw)
	}
	name, isIP, err := shortener.CanonicalHost(u.Hostname())
	if err != nil || isIP {
		return domain{}, fmt.Errorf("domain %q: not a valid domain name", raw)
	}
	host := name
	if p := u.Port(); p != "" {
		host = net.JoinHostPort(name, p)
	}
	if !shortener.ValidDomain(host) {
		return domain{}, fmt.Errorf("domain %q: at most %d characters of a-z 0-9 . - (after IDNA mapping) and a port", raw, shortener.MaxDomainLength)
	}
	return domain{host: host, name: name, base: u.Scheme + "://" + host}, nil
}

// scheme is "https" or "http".
func (d domain) scheme() string { return d.base[:strings.Index(d.base, "://")] }

// registered is the domain of a registry entry (stored as parseDomain
// read it).
func registered(r shortener.Domain) domain {
	name := r.Host
	if h, _, err := net.SplitHostPort(r.Host); err == nil {
		name = h
	}
	return domain{host: r.Host, name: name, base: r.Scheme + "://" + r.Host}
}

// domainSet is what a Handler answers for at one time: Config.Domains
// (static of them, first, the default domain at 0), then the registry's
// (the Handler swaps in a new set when it reads the registry again).
// Requests look the Host up in index, by lower-case host.
type domainSet struct {
	list   []domain
	static int
	index  map[string]int
	byName map[string]struct{} // the hosts' names, without port: ServesName
	// registry is the registry as last read, entries hidden by a
	// Config.Domains one included.
	registry []shortener.Domain
}

// newDomainSet returns the set of static domains and the registry's;
// without static domains the registry is not used (no default domain:
// the server answers for any Host).
func newDomainSet(static []domain, registry []shortener.Domain) *domainSet {
	s := &domainSet{static: len(static), index: make(map[string]int, len(static)+len(registry)),
		byName: make(map[string]struct{}, len(static)+len(registry)), registry: registry}
	s.list = make([]domain, 0, len(static)+len(registry))
	add := func(d domain) {
		if _, dup := s.index[d.host]; !dup { // a --domain and an entry alike: the --domain
			s.index[d.host] = len(s.list)
			s.byName[d.name] = struct{}{}
			s.list = append(s.list, d)
		}
	}
	for _, d := range static {
		add(d)
	}
	if len(static) > 0 {
		for _, r := range registry {
			add(registered(r))
		}
	}
	return s
}

// maxHostHeaderDomain bounds a Host header that can name a domain.
const maxHostHeaderDomain = shortener.MaxDomainLength + 1 // a trailing dot

// of returns the index in s.list of the domain a Host header names, or
// -1. A domain without a port matches its name with any port, unless
// another has that port; names compare case-insensitively (a browser
// sends A-labels, in any case). It does not allocate.
func (s *domainSet) of(host []byte) int {
	if len(s.list) == 0 || len(host) > maxHostHeaderDomain {
		return -1
	}
	var buf [maxHostHeaderDomain]byte
	lower := buf[:len(host)]
	for i, c := range host {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	if i, ok := s.index[string(lower)]; ok {
		return i
	}
	name := lower
	if i := bytes.LastIndexByte(lower, ':'); i >= 0 && bytes.IndexByte(lower[i:], ']') < 0 {
		name = lower[:i]
	}
	name = bytes.TrimSuffix(name, []byte(".")) // "sho.rt." is the same name
	if i, ok := s.index[string(name)]; ok && s.list[i].host == s.list[i].name {
		return i
	}
	return -1
}

// hasName reports whether name (a host name without port, any case,
// maybe with a trailing dot) is the name of one of the domains.
func (s *domainSet) hasName(name string) bool {
	_, ok := s.byName[strings.ToLower(strings.TrimSuffix(name, "."))]
	return ok
}

// names lists the domains, for the 421 message: the first few.
func (s *domainSet) names() string {
	const most = 8
	names := make([]string, 0, most)
	for i, d := range s.list {
		if i == most {
			return strings.Join(names, ", ") + fmt.Sprintf(" and %d more", len(s.list)-most)
		}
		names = append(names, d.host)
	}
	return strings.Join(names, ", ")
}

// domainSet returns the set of domains now.
func (h *Handler) domainSet() *domainSet { return h.domains.Load() }

// domainOf is h.domainSet().of(host).
func (h *Handler) domainOf(host []byte) int { return h.domainSet().of(host) }

// Links belong to domains (shortener/domain.go): the first of
// Config.Domains is the default domain, whose links have Link.Domain ""
// and are stored under their bare id (the seed's layout); another
// domain's links have its host as their Link.Domain. A request names a
// domain by its Host, which ServeFastHTTP has checked; the API also takes
// it as a domain field (create) or ?domain= (the other link routes).

// hostDomain returns the Link.Domain of the domain the request's Host
// names: "" for the default domain, and whenever there is only one.
func (h *Handler) hostDomain(ctx *fasthttp.RequestCtx) string {
	ds := h.domainSet()
	if len(ds.list) < 2 {
		return ""
	}
	if i := ds.of(ctx.Host()); i > 0 {
		return ds.list[i].host
	}
	return ""
}

// namedDomain returns the Link.Domain of the domain a client named in a
// domain field or parameter, compared as a Host header is ("SHO.RT",
// "sho.rt.", with a port where the domain has none), or an error with
// Code InvalidParameter for one the server does not serve.
func (h *Handler) namedDomain(ctx *fasthttp.RequestCtx, name string) (string, error) {
	if ds := h.domainSet(); len(ds.list) > 0 {
		if i := ds.of([]byte(name)); i == 0 {
			return "", nil
		} else if i > 0 {
			return ds.list[i].host, nil
		}
		return "", shortener.Errorf(shortener.InvalidParameter, "unknown domain %.100q: this server serves %s", name, ds.names())
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
	ds := h.domainSet()
	if domain == "" {
		if len(ds.list) > 0 {
			return ds.list[0].base
		}
		return h.baseURL(ctx)
	}
	if i, ok := ds.index[domain]; ok {
		return ds.list[i].base
	}
	scheme := "https://"
	if len(ds.list) > 0 {
		scheme = ds.list[0].base[:strings.Index(ds.list[0].base, "://")+3]
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
