package httpapi

import (
	"bytes"
	"net"
	"net/netip"
	"strings"
	"unsafe"

	"github.com/valyala/fasthttp"
)

// TrustedProxies are the peers whose forwarding headers are believed: the
// load balancers and CDNs in front of the server. A request from any other
// peer is that peer's, whatever headers it sends.
//
// From a trusted peer, the client is the rightmost address of
// X-Forwarded-For (all its header lines in order) that is not itself a
// trusted proxy: each proxy appends the address it received the request
// from, so entries to the left of the first untrusted one are the
// client's to write. Without X-Forwarded-For the Forwarded header's for=
// parameters (RFC 7239) are read the same way. (A proxy that sets only
// Forwarded must drop a client's X-Forwarded-For: ALB, CloudFront, nginx
// and Envoy all append to X-Forwarded-For.) An entry that does not parse
// ends the walk at the proxy that wrote it. CloudFront-Viewer-Address and
// CloudFront-Viewer-Country, which CloudFront sets, are believed from
// trusted peers only, and then win.
type TrustedProxies struct {
	prefixes []netip.Prefix
}

// NewTrustedProxies returns the policy trusting the given prefixes.
func NewTrustedProxies(prefixes []netip.Prefix) *TrustedProxies {
	p := &TrustedProxies{}
	for _, pf := range prefixes {
		p.prefixes = append(p.prefixes, netip.PrefixFrom(pf.Addr().Unmap(), unmappedBits(pf)).Masked())
	}
	return p
}

func unmappedBits(p netip.Prefix) int {
	if p.Addr().Is4In6() {
		return max(p.Bits()-96, 0)
	}
	return p.Bits()
}

// Len returns the number of trusted prefixes.
func (p *TrustedProxies) Len() int {
	if p == nil {
		return 0
	}
	return len(p.prefixes)
}

// trusted reports whether a is a trusted proxy. A linear scan: lists are
// short (a VPC, or CloudFront's ~200 prefixes, looked up only for
// requests from trusted peers or through them).
func (p *TrustedProxies) trusted(a netip.Addr) bool {
	if p == nil || !a.IsValid() {
		return false
	}
	a = a.Unmap()
	for _, pf := range p.prefixes {
		if pf.Contains(a) {
			return true
		}
	}
	return false
}

const (
	headerXFF       = "X-Forwarded-For"
	headerForwarded = "Forwarded"
)

var (
	headerViewerAddress = []byte("CloudFront-Viewer-Address")
	headerViewerCountry = []byte("CloudFront-Viewer-Country")
)

// peerAddr returns the address of the connection's other end.
func peerAddr(ctx *fasthttp.RequestCtx) netip.Addr {
	if a, ok := ctx.RemoteAddr().(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

// client returns the client's address, and its country when a trusted
// CloudFront said it ("" otherwise). It does not allocate.
func (p *TrustedProxies) client(ctx *fasthttp.RequestCtx) (netip.Addr, string) {
	peer := peerAddr(ctx)
	if !p.trusted(peer) {
		return peer, ""
	}
	h := &ctx.Request.Header
	country := ""
	if c := h.PeekBytes(headerViewerCountry); len(c) == 2 {
		country = unsafe.String(unsafe.SliceData(c), 2)
	}
	if v := h.PeekBytes(headerViewerAddress); len(v) > 0 {
		if a, ok := withPort(unsafe.String(unsafe.SliceData(v), len(v))); ok {
			return a, country
		}
	}
	client := peer
	if xff := h.PeekAll(headerXFF); len(xff) > 0 {
		for i := len(xff) - 1; i >= 0; i-- {
			if a, done := p.walk(xff[i], false, &client); done {
				return a, country
			}
		}
		return client, country
	}
	if fwd := h.PeekAll(headerForwarded); len(fwd) > 0 {
		for i := len(fwd) - 1; i >= 0; i-- {
			if a, done := p.walk(fwd[i], true, &client); done {
				return a, country
			}
		}
	}
	return client, country
}

// walk reads one header line's entries right to left. *last is the
// nearest trusted hop so far; it returns the client and true at the first
// untrusted entry, or at one that does not parse (then the client is
// *last, the proxy that wrote it).
func (p *TrustedProxies) walk(line []byte, forwarded bool, last *netip.Addr) (netip.Addr, bool) {
	for len(line) > 0 {
		var entry []byte
		if i := bytes.LastIndexByte(line, ','); i >= 0 {
			entry, line = line[i+1:], line[:i]
		} else {
			entry, line = line, nil
		}
		entry = bytes.TrimSpace(entry)
		if len(entry) == 0 {
			continue
		}
		var a netip.Addr
		var ok bool
		if forwarded {
			a, ok = forwardedFor(entry)
		} else {
			a, ok = parseHostPort(entry)
		}
		if !ok {
			return *last, true
		}
		if !p.trusted(a) {
			return a, true
		}
		*last = a
	}
	return netip.Addr{}, false
}

// forwardedFor returns the address of the for= parameter of one element
// of a Forwarded header.
func forwardedFor(elem []byte) (netip.Addr, bool) {
	for len(elem) > 0 {
		var pair []byte
		if i := bytes.IndexByte(elem, ';'); i >= 0 {
			pair, elem = elem[:i], elem[i+1:]
		} else {
			pair, elem = elem, nil
		}
		pair = bytes.TrimSpace(pair)
		if len(pair) > 4 && bytes.EqualFold(pair[:4], []byte("for=")) {
			v := pair[4:]
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			return parseHostPort(v)
		}
	}
	return netip.Addr{}, false
}

// parseHostPort parses an address with an optional port: 192.0.2.1,
// 192.0.2.1:80, 2001:db8::1, [2001:db8::1], [2001:db8::1]:80.
func parseHostPort(b []byte) (netip.Addr, bool) {
	s := unsafe.String(unsafe.SliceData(b), len(b))
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		if rest := s[end+1:]; rest != "" && (rest[0] != ':' || !numeric(rest[1:])) {
			return netip.Addr{}, false
		}
		return plainAddr(s[1:end])
	}
	if a, ok := plainAddr(s); ok {
		return a, true
	}
	return withPort(s)
}

// withPort parses an address followed by a colon and a port, the way
// CloudFront-Viewer-Address writes it: 192.0.2.1:46532, and IPv6 without
// brackets, 2001:db8::1:46532.
func withPort(s string) (netip.Addr, bool) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || !numeric(s[i+1:]) {
		return netip.Addr{}, false
	}
	return plainAddr(s[:i])
}

func plainAddr(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

func numeric(s string) bool {
	if s == "" || len(s) > 5 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
