package shortener_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

var idRE = regexp.MustCompile(`^[A-Za-z0-9]{10}$`)

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	counts := map[rune]int{}
	const n = 20000
	for range n {
		id, err := shortener.NewID()
		if err != nil {
			t.Fatal(err)
		}
		if !idRE.MatchString(id) {
			t.Fatalf("id %q does not match %s", id, idRE)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
		for _, r := range id {
			counts[r]++
		}
	}
	// Every one of the 62 symbols appears, none wildly more than others
	// (expected n*10/62 ≈ 3226 each; a biased generator would skew this).
	if len(counts) != 62 {
		t.Errorf("%d distinct symbols, want 62", len(counts))
	}
	for r, c := range counts {
		if c < 2700 || c > 3800 {
			t.Errorf("symbol %q appears %d times, expected about 3226", r, c)
		}
	}
}

func TestValidID(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{"abcDEF0123", true}, {"a", true}, {"with-dash_underscore", true}, {strings.Repeat("x", 64), true},
		{"", false}, {strings.Repeat("x", 65), false}, {"a/b", false}, {"a.b", false}, {"ü", false}, {"a b", false}, {"%2F", false},
	}
	for _, tt := range tests {
		if got := shortener.ValidID(tt.id); got != tt.want {
			t.Errorf("ValidID(%q) = %v, want %v", tt.id, got, tt.want)
		}
		if got := shortener.ValidID([]byte(tt.id)); got != tt.want {
			t.Errorf("ValidID([]byte(%q)) = %v, want %v", tt.id, got, tt.want)
		}
	}
}

func TestValidateSlug(t *testing.T) {
	tests := []struct {
		slug string
		ok   bool
	}{
		{"abc", true}, {"my-link_2026", true}, {strings.Repeat("a", 64), true},
		{"ab", false}, {strings.Repeat("a", 65), false}, {"has space", false}, {"dot.ted", false}, {"ünï", false},
		{"api", false}, {"API", false}, {"healthz", false}, {"readyz", false}, {"metrics", false},
		{"shortenURL", false}, {"getFullURL", false}, {"static", false}, {"getfullurl", false},
	}
	for _, tt := range tests {
		err := shortener.ValidateSlug(tt.slug)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateSlug(%q) = %v, want ok=%v", tt.slug, err, tt.ok)
		}
		if err != nil && shortener.ErrorCode(err) != shortener.InvalidSlug {
			t.Errorf("ValidateSlug(%q) code %q", tt.slug, shortener.ErrorCode(err))
		}
	}
}

func TestURLPolicyCheck(t *testing.T) {
	bl, err := shortener.ParseBlocklist(strings.NewReader("# comment\n\nevil.example\n*.bad.test\n.worse.test\n"))
	if err != nil {
		t.Fatal(err)
	}
	p := shortener.URLPolicy{MaxLength: 100, Blocklist: bl, SelfHosts: []string{"sho.rt"}}
	tests := []struct {
		url, host string
		want      shortener.Code
	}{
		{"https://aws.amazon.com/ec2/graviton/", "", ""},
		{"http://example.com", "", ""},
		{"HTTPS://Example.COM/Path?q=1#frag", "", ""},
		{"https://例え.テスト/パス", "", ""},
		{"https://h.example:8443/x", "", ""},
		{"https://[2001:db8::1]/x", "", ""},
		{"https://notevil.example/", "", ""},
		{"", "", shortener.InvalidURL},
		{"https://x.example/" + strings.Repeat("a", 100), "", shortener.URLTooLong},
		{"javascript:alert(1)", "", shortener.SchemeNotAllowed},
		{"data:text/html,x", "", shortener.SchemeNotAllowed},
		{"ftp://files.example/", "", shortener.SchemeNotAllowed},
		{"mailto:a@b.example", "", shortener.SchemeNotAllowed},
		{"//example.com/x", "", shortener.InvalidURL},
		{"example.com/x", "", shortener.InvalidURL},
		{"/relative", "", shortener.InvalidURL},
		{"https://", "", shortener.InvalidURL},
		{"https:///path", "", shortener.InvalidURL},
		{"http://:80/", "", shortener.InvalidURL},
		{"https:opaque", "", shortener.InvalidURL},
		{"https://user:pw@example.com/", "", shortener.InvalidURL},
		{"https://example.com/a b", "", shortener.InvalidURL},
		{"https://example.com/a\r\nSet-Cookie: x=1", "", shortener.InvalidURL},
		{"https://example.com/\x00", "", shortener.InvalidURL},
		{"https://example.com/\x7f", "", shortener.InvalidURL},
		{"https://example.com/\u2028", "", shortener.InvalidURL},
		{"https://example.com/\u00a0", "", shortener.InvalidURL},
		{"https://example.com/\u202e", "", shortener.InvalidURL},
		{"https://example.com/\u200b", "", shortener.InvalidURL},
		{"https://example.com/\xff", "", shortener.InvalidURL},
		{"https://exa%mple.com/", "", shortener.InvalidURL},
		{"https://sho.rt/abc", "", shortener.SelfReference},
		{"https://SHO.RT./abc", "", shortener.SelfReference},
		{"https://links.example:8080/abc", "links.example:8080", shortener.SelfReference},
		{"https://links.example/abc", "LINKS.example:8080", shortener.SelfReference},
		{"https://other.example/abc", "links.example:8080", ""},
		{"http://127.0.0.1:9/x", "127.0.0.1:8080", shortener.SelfReference},
		{"http://[::1]/x", "[::1]:8080", shortener.SelfReference},
		{"https://evil.example/", "", shortener.BlockedDomain},
		{"https://sub.EVIL.example./", "", shortener.BlockedDomain},
		{"https://bad.test/", "", shortener.BlockedDomain},
		{"https://a.b.worse.test/", "", shortener.BlockedDomain},
		// The same hosts in other spellings (UTS #46 mapping, IP forms).
		{"https://evil\uff0eexample/", "", shortener.BlockedDomain}, // full-width dot
		{"https://evil\u3002example/", "", shortener.BlockedDomain}, // ideographic full stop
		{"https://\uff25VIL.example/", "", shortener.BlockedDomain}, // full-width E
		{"https://ev%69l.example/", "", shortener.InvalidURL},
		{"https://evil%EF%BC%8Eexample/", "", shortener.BlockedDomain}, // percent-encoded full-width dot
		{"https://evil.example.:443/", "", shortener.BlockedDomain},    // trailing dot and port
		{"https://sub.evil\uff0eexample/", "", shortener.BlockedDomain},
		{"https://sho\uff0ert/x", "", shortener.SelfReference},
		{"https://xn--fiq228c.example/", "", ""}, // punycode of an IDN is fine
		{"https://bad..test/", "", shortener.InvalidURL},
		{"https://a\u200db.example/", "", shortener.InvalidURL},
		// Every loopback and unspecified form is this machine.
		{"http://127.1/", "", shortener.SelfReference},
		{"http://127.0.1/", "", shortener.SelfReference},
		{"http://2130706433/", "", shortener.SelfReference},
		{"http://0x7f000001/", "", shortener.SelfReference},
		{"http://0x7f.0.0.1/", "", shortener.SelfReference},
		{"http://0177.0.0.1/", "", shortener.SelfReference},
		{"http://017700000001/", "", shortener.SelfReference},
		{"http://127.255.255.254/", "", shortener.SelfReference},
		{"http://[::1]:8080/", "", shortener.SelfReference},
		{"http://[0:0:0:0:0:0:0:1]/", "", shortener.SelfReference},
		{"http://[::ffff:127.0.0.1]/", "", shortener.SelfReference},
		{"http://[::ffff:7f00:1]/", "", shortener.SelfReference},
		{"http://[::127.0.0.1]/", "", shortener.SelfReference},
		{"http://[fe80::1%25lo]/", "", ""},
		{"http://0.0.0.0/", "", shortener.SelfReference},
		{"http://0/", "", shortener.SelfReference},
		{"http://[::]/", "", shortener.SelfReference},
		{"http://localhost:8080/", "", shortener.SelfReference},
		{"http://LOCALHOST./", "", shortener.SelfReference},
		{"http://app.localhost/", "", shortener.SelfReference},
		{"http://localhost.example/", "", ""},
		{"http://1.2.3.4.5/", "", shortener.InvalidURL},
		{"http://256.1.1.1/", "", shortener.InvalidURL},
		{"http://08.1.1.1/", "", shortener.InvalidURL},
		{"http://example.123/", "", shortener.InvalidURL},
		{"http://10.0.0.1/", "", ""},
		{"http://3232235521/", "", ""}, // 192.168.0.1: not this machine
		// The request's Host in another form.
		{"http://[::ffff:c0a8:1]/", "192.168.0.1:8080", shortener.SelfReference},
		{"http://3232235521/", "192.168.0.1", shortener.SelfReference},
		{"https://links\uff0eexample/abc", "links.example", shortener.SelfReference},
		{"https://links.example/abc", strings.Repeat("h", 3000), ""},
	}
	for _, tt := range tests {
		err := p.Check(tt.url, tt.host)
		if got := shortener.ErrorCode(err); got != tt.want {
			t.Errorf("Check(%q, host %q) = %v (code %q), want code %q", tt.url, tt.host, err, got, tt.want)
		}
		if err != nil && strings.Contains(shortener.ErrorMessage(err), "\n") {
			t.Errorf("message for %q has a newline: %q", tt.url, shortener.ErrorMessage(err))
		}
	}
}

func TestURLPolicyAllowLoopback(t *testing.T) {
	p := shortener.URLPolicy{AllowLoopback: true, SelfHosts: []string{"sho.rt"}}
	for _, tt := range []struct {
		url, host string
		want      shortener.Code
	}{
		{"http://localhost:3000/", "127.0.0.1:8080", ""},
		{"http://127.0.0.1:3000/", "localhost:8080", ""},
		{"http://127.1:3000/", "127.0.0.1:8080", shortener.SelfReference},
		{"http://[::ffff:7f00:1]/", "127.0.0.1", shortener.SelfReference},
		{"http://localhost./x", "LOCALHOST:8080", shortener.SelfReference},
		{"https://sho.rt/x", "", shortener.SelfReference},
	} {
		if got := shortener.ErrorCode(p.Check(tt.url, tt.host)); got != tt.want {
			t.Errorf("Check(%q, host %q) = %q, want %q", tt.url, tt.host, got, tt.want)
		}
	}
}

func TestURLPolicySchemes(t *testing.T) {
	p := shortener.URLPolicy{Schemes: []string{"https", "mailto"}}
	if err := p.Check("http://a.example/", ""); shortener.ErrorCode(err) != shortener.SchemeNotAllowed {
		t.Errorf("http with https-only: %v", err)
	}
	if err := p.Check("HTTPS://a.example/", ""); err != nil {
		t.Errorf("upper-case scheme: %v", err)
	}
	// mailto has no host: an allowed scheme still needs one.
	if err := p.Check("mailto:a@b.example", ""); shortener.ErrorCode(err) != shortener.InvalidURL {
		t.Errorf("mailto: %v", err)
	}
}

func TestParseBlocklistRejectsJunk(t *testing.T) {
	for _, in := range []string{"https://x.example/\n", "a b\n", "*.\n"} {
		if _, err := shortener.ParseBlocklist(strings.NewReader(in)); err == nil {
			t.Errorf("ParseBlocklist(%q) succeeded", in)
		}
	}
	bl, err := shortener.ParseBlocklist(strings.NewReader("A.Example\nＢ.example\n10.1.2.3\n"))
	if err != nil || bl.Len() != 3 || !bl.Blocks("a.example") || bl.Blocks("ba.example") || bl.Blocks("example") {
		t.Errorf("blocklist suffix matching wrong: %v", err)
	}
	// Entries and hosts are compared in canonical form; IPs only exactly.
	for host, want := range map[string]bool{"b.example": true, "x.B.EXAMPLE.": true, "10.1.2.3": true,
		"[::ffff:10.1.2.3]": true, "167838211": true, "4.10.1.2.3": false, "1.2.3": false} {
		if got := bl.Blocks(host); got != want {
			t.Errorf("Blocks(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestErrors(t *testing.T) {
	err := fmt.Errorf("get: %w", shortener.Errorf(shortener.NotFound, "no link %q", "x"))
	if !errors.Is(err, shortener.ErrNotFound) || errors.Is(err, shortener.ErrConflict) {
		t.Errorf("errors.Is by code broken for %v", err)
	}
	if got := shortener.ErrorMessage(err); got != `no link "x"` {
		t.Errorf("message %q", got)
	}
	if shortener.ErrorCode(errors.New("boom")) != shortener.Internal || shortener.ErrorMessage(errors.New("secret detail")) != "internal error" {
		t.Error("unknown errors must be internal with a generic message")
	}
	if shortener.ErrorCode(context.DeadlineExceeded) != shortener.Unavailable || shortener.ErrorCode(nil) != "" {
		t.Error("deadline must be unavailable; nil has no code")
	}
}

func TestLinkExpired(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		l    shortener.Link
		want bool
	}{
		{"plain", shortener.Link{}, false},
		{"future", shortener.Link{ExpiresAt: now.Add(time.Second)}, false},
		{"now", shortener.Link{ExpiresAt: now}, true},
		{"past", shortener.Link{ExpiresAt: now.Add(-time.Second)}, true},
		{"visits left", shortener.Link{MaxVisits: 2, Visits: 1}, false},
		{"visits used", shortener.Link{MaxVisits: 2, Visits: 2}, true},
	}
	for _, tt := range tests {
		if got := tt.l.Expired(now); got != tt.want {
			t.Errorf("%s: Expired = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func BenchmarkNewID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := shortener.NewID(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkURLPolicyCheck(b *testing.B) {
	p := shortener.URLPolicy{Blocklist: shortener.NewBlocklist("evil.example", "bad.test")}
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Check("https://aws.amazon.com/ec2/graviton/?utm_source=linkgate&x=1", "links.example:8080"); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzURLPolicyCheck(f *testing.F) {
	for _, s := range []string{"https://aws.amazon.com/ec2/graviton/", "javascript:alert(1)", "http://[::1]:80/", "https://a\r\nb", "https://u:p@h/", "https://例え.テスト/", "%zz", "http://h/\u202e"} {
		f.Add(s, "links.example")
	}
	p := shortener.URLPolicy{Blocklist: shortener.NewBlocklist("evil.example")}
	f.Fuzz(func(t *testing.T, raw, host string) {
		err := p.Check(raw, host)
		if err == nil {
			// Whatever is accepted is safe to put in a Location header:
			// no control characters, no whitespace, an allowed scheme.
			if strings.ContainsAny(raw, "\r\n\t \x00") {
				t.Fatalf("accepted %q with whitespace or control characters", raw)
			}
			if l := strings.ToLower(raw); !strings.HasPrefix(l, "http://") && !strings.HasPrefix(l, "https://") {
				t.Fatalf("accepted %q with a scheme outside http/https", raw)
			}
			// Its host, however spelt, is neither this machine nor blocked.
			u, _ := url.Parse(raw)
			c, isIP, err := shortener.CanonicalHost(u.Hostname())
			if err != nil || shortener.IsLoopbackHost(c, isIP) || p.Blocklist.Blocks(c) {
				t.Fatalf("accepted %q: host %q (%v), loopback or blocked", raw, c, err)
			}
			return
		}
		switch shortener.ErrorCode(err) {
		case shortener.InvalidURL, shortener.URLTooLong, shortener.SchemeNotAllowed, shortener.SelfReference, shortener.BlockedDomain:
		default:
			t.Fatalf("Check(%q) = %v: unexpected code %q", raw, err, shortener.ErrorCode(err))
		}
	})
}

// CanonicalHost is idempotent, and what it returns is a host it accepts.
func FuzzCanonicalHost(f *testing.F) {
	for _, s := range []string{"example.com", "EXAMPLE.com.", "例え.テスト", "a\uff0eb", "127.1", "0x7f.1", "[::ffff:1.2.3.4]", "::1", "1.2.3.4.5", "xn--fiq228c", "a..b", "%", "\xb3", "0.."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		c, isIP, err := shortener.CanonicalHost(h)
		if err != nil {
			return
		}
		c2, isIP2, err := shortener.CanonicalHost(c)
		if err != nil || c2 != c || isIP2 != isIP {
			t.Fatalf("CanonicalHost(%q) = %q, but CanonicalHost of that = %q, %v, %v", h, c, c2, isIP2, err)
		}
	})
}

func FuzzValidateSlug(f *testing.F) {
	for _, s := range []string{"abc", "my-link", "api", "a/b", "ü", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, slug string) {
		err := shortener.ValidateSlug(slug)
		if err == nil {
			if !shortener.ValidID(slug) || len(slug) < shortener.MinSlugLength {
				t.Fatalf("accepted slug %q that is not a valid id", slug)
			}
			return
		}
		if shortener.ErrorCode(err) != shortener.InvalidSlug {
			t.Fatalf("ValidateSlug(%q) code %q", slug, shortener.ErrorCode(err))
		}
	})
}
