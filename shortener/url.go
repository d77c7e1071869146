package shortener

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// DefaultMaxURLLength is the default limit on a target URL, in bytes.
const DefaultMaxURLLength = 2048

// DefaultSchemes are the schemes allowed when a URLPolicy names none.
var DefaultSchemes = []string{"http", "https"}

// URLPolicy says which target URLs may be shortened. The zero value allows
// http and https URLs up to DefaultMaxURLLength bytes. The service never
// fetches a target: the policy looks only at the URL's text.
type URLPolicy struct {
	MaxLength int        // in bytes; 0 means DefaultMaxURLLength
	Schemes   []string   // allowed schemes, compared case-insensitively; nil means DefaultSchemes
	Blocklist *Blocklist // domains refused (suffix match); nil blocks none
	SelfHosts []string   // host names of this service (e.g. from --public-url)
	// AllowLoopback accepts targets on a loopback or unspecified address
	// or localhost (development: links to http://localhost:3000/); they
	// are refused by default, as this machine to whoever follows them.
	// The request's Host and SelfHosts are refused all the same.
	AllowLoopback bool
}

// Check validates raw as a target URL. requestHost is the Host the request
// arrived with ("" if unknown): a URL pointing at it, or at one of
// SelfHosts, would redirect to the service itself. The error is an *Error
// with Code InvalidURL, URLTooLong, SchemeNotAllowed, SelfReference or
// BlockedDomain.
func (p URLPolicy) Check(raw, requestHost string) error {
	max := p.MaxLength
	if max <= 0 {
		max = DefaultMaxURLLength
	}
	switch {
	case raw == "":
		return Errorf(InvalidURL, "url is required")
	case len(raw) > max:
		return Errorf(URLTooLong, "url is %d bytes long; the limit is %d", len(raw), max)
	}
	if err := checkChars(raw); err != nil {
		return err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Errorf(InvalidURL, "url does not parse: %s", parseReason(err))
	}
	if u.Scheme == "" {
		return Errorf(InvalidURL, "url must be absolute, with a scheme such as https://")
	}
	schemes := p.Schemes
	if schemes == nil {
		schemes = DefaultSchemes
	}
	if !containsFold(schemes, u.Scheme) {
		return Errorf(SchemeNotAllowed, "scheme %q is not allowed; allowed: %s", strings.ToLower(u.Scheme), strings.Join(schemes, ", "))
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return Errorf(InvalidURL, "url must have a host, as in https://example.com/")
	}
	if u.User != nil {
		return Errorf(InvalidURL, "url must not carry a user name or password")
	}
	host, isIP, err := CanonicalHost(u.Hostname())
	if err != nil {
		return Errorf(InvalidURL, "url's host is not a valid domain name or IP address")
	}
	if !p.AllowLoopback && IsLoopbackHost(host, isIP) {
		return Errorf(SelfReference, "url points at a loopback address (%s): this machine", host)
	}
	if requestHost != "" && sameHost(host, hostOnly(requestHost)) || slices.ContainsFunc(p.SelfHosts, func(s string) bool { return sameHost(host, s) }) {
		return Errorf(SelfReference, "url points at this service (%s)", host)
	}
	if p.Blocklist.Blocks(host) {
		return Errorf(BlockedDomain, "the domain %s is blocked", host)
	}
	return nil
}

// checkChars refuses control characters, whitespace (CR/LF would let a
// Location header be split), invisible formatting characters (bidi
// overrides, zero-width spaces: used to disguise URLs) and invalid UTF-8.
func checkChars(raw string) error {
	for i, r := range raw {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(raw[i:]); size == 1 {
				return Errorf(InvalidURL, "url is not valid UTF-8 (byte %d)", i)
			}
		case r < 0x80 && (r <= ' ' || r == 0x7f):
			return Errorf(InvalidURL, "url contains a control character or whitespace at byte %d", i)
		case r >= 0x80 && (unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r)):
			return Errorf(InvalidURL, "url contains an invisible or whitespace character (U+%04X) at byte %d", r, i)
		}
	}
	return nil
}

// parseReason drops the quoted URL from a url.Error, which the client sent.
func parseReason(err error) string {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err.Error()
	}
	return err.Error()
}

// hostOnly strips a port from a Host header value.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

// sameHost reports whether the canonical host c and the host h (in any
// form) name the same host.
func sameHost(c, h string) bool {
	ch, _, err := CanonicalHost(h)
	return err == nil && ch == c
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// Blocklist is a set of domains; a host is blocked when it is one of them or
// a subdomain of one (suffix match on whole labels).
type Blocklist struct {
	domains map[string]struct{}
}

// NewBlocklist returns a blocklist of the given domains.
func NewBlocklist(domains ...string) *Blocklist {
	b := &Blocklist{domains: make(map[string]struct{}, len(domains))}
	for _, d := range domains {
		d = strings.TrimPrefix(strings.TrimPrefix(d, "*"), ".")
		if c, _, err := CanonicalHost(d); err == nil {
			d = c
		}
		b.domains[d] = struct{}{}
	}
	return b
}

// ParseBlocklist reads one domain per line. Blank lines and lines starting
// with '#' are ignored; a leading "*." or "." is allowed and means the same
// as the bare domain (subdomains are always blocked).
func ParseBlocklist(r io.Reader) (*Blocklist, error) {
	var domains []string
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		d := strings.TrimSpace(sc.Text())
		if d == "" || strings.HasPrefix(d, "#") {
			continue
		}
		bare := strings.TrimPrefix(strings.TrimPrefix(d, "*"), ".")
		if _, _, err := CanonicalHost(bare); err != nil || strings.ContainsAny(bare, " \t/:@?#") {
			return nil, fmt.Errorf("blocklist line %d: %q is not a domain name or IP address", line, d)
		}
		domains = append(domains, bare)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read blocklist: %w", err)
	}
	return NewBlocklist(domains...), nil
}

// Len returns the number of domains on the list.
func (b *Blocklist) Len() int {
	if b == nil {
		return 0
	}
	return len(b.domains)
}

// Blocks reports whether host (no port; in any form CanonicalHost takes)
// is on the list or under a domain on it; an IP address only when it is
// on the list itself. A nil Blocklist blocks nothing.
func (b *Blocklist) Blocks(host string) bool {
	if b == nil || len(b.domains) == 0 {
		return false
	}
	host, isIP, err := CanonicalHost(host)
	if err != nil {
		return false
	}
	if isIP {
		_, ok := b.domains[host]
		return ok
	}
	for {
		if _, ok := b.domains[host]; ok {
			return true
		}
		i := strings.IndexByte(host, '.')
		if i < 0 {
			return false
		}
		host = host[i+1:]
	}
}
