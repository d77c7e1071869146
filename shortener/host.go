package shortener

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// Host names are compared in one canonical form, the one a browser
// resolves: after UTS #46 mapping (golang.org/x/net/idna, with the
// WHATWG URL Standard's options: no STD3 rules, no hyphen checks,
// nontransitional), in ASCII (punycode), lower case, without a trailing
// dot; IP addresses as net/netip prints them, IPv4-mapped IPv6 addresses
// unmapped, and the numeric IPv4 forms browsers accept (127.1, 2130706433,
// 0x7f.0.0.1, 0177.0.0.1) parsed as they do. So a blocklisted
// "blocked.example" also blocks "blocked．example" (a full-width dot) and
// "BLOCKED.example.", and http://127.1/ is known to be a loopback address.

// browserIDNA maps host names as the WHATWG URL Standard's "domain to
// ASCII" does (UseSTD3ASCIIRules=false, CheckHyphens=false,
// CheckBidi=true, CheckJoiners=true, Transitional_Processing=false).
var browserIDNA = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.Transitional(false),
	idna.StrictDomainName(false), idna.CheckHyphens(false))

var errHost = errors.New("not a valid host name")

// CanonicalHost returns host (a name or an IP address, without port; IPv6
// with or without brackets) in canonical form, and whether it is an IP
// address. A host that is not a valid name gives an error.
func CanonicalHost(host string) (string, bool, error) {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if h == "" {
		return "", false, errHost
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return canonicalAddr(a).String(), true, nil
	}
	if strings.ContainsAny(h, "[]:%") || !utf8.ValidString(h) {
		return "", false, errHost
	}
	ascii, err := browserIDNA.ToASCII(h)
	if err != nil {
		return "", false, errHost
	}
	ascii = strings.TrimSuffix(ascii, ".")
	if ascii == "" || strings.Contains(ascii, "..") || strings.HasPrefix(ascii, ".") || strings.HasSuffix(ascii, ".") {
		return "", false, errHost
	}
	if endsInNumber(ascii) {
		a, ok := parseWebIPv4(ascii)
		if !ok {
			return "", false, errHost // browsers refuse such hosts too
		}
		return a.String(), true, nil
	}
	return ascii, false, nil
}

// canonicalAddr drops the zone and unmaps IPv4-mapped (::ffff:a.b.c.d)
// and IPv4-compatible (::a.b.c.d, deprecated) addresses.
func canonicalAddr(a netip.Addr) netip.Addr {
	a = a.WithZone("").Unmap()
	if a.Is6() {
		b := a.As16()
		if [12]byte(b[:12]) == ([12]byte{}) && (b[12] != 0 || b[13] != 0) { // not :: or ::1
			return netip.AddrFrom4([4]byte(b[12:]))
		}
	}
	return a
}

// endsInNumber is the URL Standard's test: a host whose last label is a
// number is parsed as an IPv4 address.
func endsInNumber(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if last == "" {
		return false
	}
	if strings.Trim(last, "0123456789") == "" {
		return true
	}
	_, ok := webIPv4Number(last)
	return ok
}

// parseWebIPv4 is the URL Standard's IPv4 parser: one to four parts,
// each decimal, octal (leading 0) or hexadecimal (0x), the last filling
// the remaining bytes.
func parseWebIPv4(h string) (netip.Addr, bool) {
	parts := strings.Split(h, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		n, ok := webIPv4Number(p)
		if !ok {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 255 {
				return netip.Addr{}, false
			}
			v |= n << (8 * (3 - i))
			continue
		}
		if n >= 1<<(8*(5-len(parts))) {
			return netip.Addr{}, false
		}
		v |= n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func webIPv4Number(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(p) >= 2 && (p[:2] == "0x" || p[:2] == "0X"):
		p, base = p[2:], 16
		if p == "" {
			return 0, true
		}
	case len(p) >= 2 && p[0] == '0':
		p, base = p[1:], 8
	}
	n, err := strconv.ParseUint(p, base, 64)
	if err != nil || strings.ContainsAny(p, "+-_") {
		return 0, false
	}
	return n, true
}

// IsLoopbackHost reports whether a canonical host is this machine to
// whoever follows a link to it: a loopback or unspecified address in any
// form (0.0.0.0/8 included, which Linux routes to itself), or localhost
// and its subdomains (RFC 6761).
func IsLoopbackHost(host string, isIP bool) bool {
	if isIP {
		a, err := netip.ParseAddr(host)
		return err == nil && (a.IsLoopback() || a.IsUnspecified() || a.Is4() && a.As4()[0] == 0)
	}
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}
