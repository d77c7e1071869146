package httpapi

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/linkgate/linkgate/shortener"
)

// A domain is one of Config.Domains: the Host a request must carry and the
// base of the short links it is answered with.
type domain struct {
	host string // lower case ASCII (IDNA A-labels), with the port if one was given
	name string // host without its port
	base string // scheme://host, the start of returned short links
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
		d.base = u.Scheme + "://" + d.host
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
// any port; names compare case-insensitively (a browser sends A-labels).
func (h *Handler) domainOf(host []byte) int {
	name := host
	if i := bytes.LastIndexByte(host, ':'); i >= 0 && bytes.IndexByte(host[i:], ']') < 0 {
		name = host[:i]
	}
	name = bytes.TrimSuffix(name, []byte(".")) // "sho.rt." is the same name
	for i := range h.domains {
		d := &h.domains[i]
		if bytes.EqualFold(host, []byte(d.host)) || d.host == d.name && bytes.EqualFold(name, []byte(d.name)) {
			return i
		}
	}
	return -1
}

// domainList names the configured domains, for the 421 message.
func (h *Handler) domainList() string {
	names := make([]string, len(h.domains))
	for i, d := range h.domains {
		names[i] = d.host
	}
	return strings.Join(names, ", ")
}
