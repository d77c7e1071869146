package httpapi

import (
	"net"
	"net/netip"
	"testing"

	"github.com/valyala/fasthttp"
)

func requestFrom(peer string, hdr ...string) *fasthttp.RequestCtx {
	var req fasthttp.Request
	req.SetRequestURI("/x")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	ap := netip.MustParseAddrPort(peer)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, net.TCPAddrFromAddrPort(ap), nil)
	return &ctx
}

// The client behind trusted proxies (cases after the "rightmost trusted"
// strategy of X-Forwarded-For and RFC 7239's examples).
func TestClientAddress(t *testing.T) {
	proxies := NewTrustedProxies([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::ffff:172.16.0.0/108"), netip.MustParsePrefix("2001:db8:ff::/48")})
	tests := []struct {
		name, peer  string
		hdr         []string
		want        string
		wantCountry string
	}{
		{"untrusted peer: headers ignored", "203.0.113.5:1", []string{"X-Forwarded-For", "1.2.3.4", "CloudFront-Viewer-Country", "DE", "CloudFront-Viewer-Address", "1.2.3.4:5"}, "203.0.113.5", ""},
		{"no headers", "10.0.0.2:1", nil, "10.0.0.2", ""},
		{"one hop", "10.0.0.2:1", []string{"X-Forwarded-For", "1.2.3.4"}, "1.2.3.4", ""},
		{"client-written entries to the left", "10.0.0.2:1", []string{"X-Forwarded-For", "6.6.6.6, 7.7.7.7,1.2.3.4"}, "1.2.3.4", ""},
		{"several trusted hops", "10.0.0.2:1", []string{"X-Forwarded-For", "6.6.6.6, 1.2.3.4, 10.9.9.9, 172.16.0.1"}, "1.2.3.4", ""},
		{"all trusted: the leftmost", "10.0.0.2:1", []string{"X-Forwarded-For", "10.0.0.9, 10.0.0.7"}, "10.0.0.9", ""},
		{"several header lines, in order", "10.0.0.2:1", []string{"X-Forwarded-For", "6.6.6.6", "X-Forwarded-For", "1.2.3.4, 10.1.1.1"}, "1.2.3.4", ""},
		{"garbage ends the walk at its writer", "10.0.0.2:1", []string{"X-Forwarded-For", "1.2.3.4, bogus, 10.0.0.7"}, "10.0.0.7", ""},
		{"garbage rightmost", "10.0.0.2:1", []string{"X-Forwarded-For", "1.2.3.4, bogus"}, "10.0.0.2", ""},
		{"port and brackets", "10.0.0.2:1", []string{"X-Forwarded-For", "[2001:db8::9]:443, 1.2.3.4:5678"}, "1.2.3.4", ""},
		{"IPv6 hop", "[2001:db8:ff::1]:1", []string{"X-Forwarded-For", "2001:db8::9"}, "2001:db8::9", ""},
		{"mapped peer", "[::ffff:10.0.0.2]:1", []string{"X-Forwarded-For", "::ffff:1.2.3.4"}, "1.2.3.4", ""},
		{"empty entries", "10.0.0.2:1", []string{"X-Forwarded-For", " , 1.2.3.4 ,, "}, "1.2.3.4", ""},
		{"zone refused", "10.0.0.2:1", []string{"X-Forwarded-For", "fe80::1%eth0"}, "10.0.0.2", ""},
		{"Forwarded (RFC 7239 §7.1)", "10.0.0.2:1", []string{"Forwarded", "for=192.0.2.60;proto=http;by=203.0.113.43"}, "192.0.2.60", ""},
		{"Forwarded quoted IPv6 with port", "10.0.0.2:1", []string{"Forwarded", `for="_gazonk", For="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::17", ""},
		{"Forwarded obfuscated", "10.0.0.2:1", []string{"Forwarded", "for=unknown"}, "10.0.0.2", ""},
		{"Forwarded chain", "10.0.0.2:1", []string{"Forwarded", "for=6.6.6.6, for=1.2.3.4, for=10.3.3.3"}, "1.2.3.4", ""},
		{"X-Forwarded-For wins over Forwarded", "10.0.0.2:1", []string{"Forwarded", "for=6.6.6.6", "X-Forwarded-For", "1.2.3.4"}, "1.2.3.4", ""},
		{"CloudFront viewer", "10.0.0.2:1", []string{"X-Forwarded-For", "1.2.3.4", "CloudFront-Viewer-Address", "198.51.100.10:46532", "CloudFront-Viewer-Country", "DE"}, "198.51.100.10", "DE"},
		{"CloudFront viewer IPv6", "10.0.0.2:1", []string{"CloudFront-Viewer-Address", "2001:db8::1:443"}, "2001:db8::1", ""},
		{"CloudFront viewer bad", "10.0.0.2:1", []string{"X-Forwarded-For", "1.2.3.4", "CloudFront-Viewer-Address", "nonsense"}, "1.2.3.4", ""},
	}
	for _, tt := range tests {
		ip, country := proxies.client(requestFrom(tt.peer, tt.hdr...))
		if ip.String() != tt.want || country != tt.wantCountry {
			t.Errorf("%s: client %s %q, want %s %q", tt.name, ip, country, tt.want, tt.wantCountry)
		}
	}
	// Without trusted proxies the peer is the client.
	var none *TrustedProxies
	if ip, c := none.client(requestFrom("10.0.0.2:1", "X-Forwarded-For", "1.2.3.4", "CloudFront-Viewer-Country", "DE")); ip.String() != "10.0.0.2" || c != "" {
		t.Errorf("no trusted proxies: %s %q", ip, c)
	}
}

func TestClientAddressAllocatesNothing(t *testing.T) {
	proxies := NewTrustedProxies([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	ctx := requestFrom("10.0.0.2:1", "X-Forwarded-For", "6.6.6.6, 1.2.3.4, 10.9.9.9", "CloudFront-Viewer-Country", "DE")
	proxies.client(ctx)
	if n := testing.AllocsPerRun(100, func() { proxies.client(ctx) }); n != 0 {
		t.Errorf("%v allocations per client lookup", n)
	}
}

func FuzzClientAddress(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "6.6.6.6, 1.2.3.4, 10.0.0.1", "[::1]:80", "for=\"[2001:db8::1]:1\"", "a,b,,c", "10.0.0.1:", "[", "2001:db8::1:443"} {
		f.Add(s, s)
	}
	proxies := NewTrustedProxies([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	f.Fuzz(func(t *testing.T, xff, fwd string) {
		for _, hdr := range [][]string{{"X-Forwarded-For", xff}, {"Forwarded", fwd}, {"CloudFront-Viewer-Address", xff}} {
			ip, _ := proxies.client(requestFrom("10.0.0.2:1", hdr...))
			if !ip.IsValid() {
				t.Fatalf("%q: no client address", hdr)
			}
		}
	})
}
