package httpapi

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/shortener"
)

// FuzzDomains checks the --domain parser (the registry's API's too) and
// the Host match together:
// every domain accepted is a valid key domain (shortener.ValidDomain, so
// its links can be stored), the Host a browser sends for it (any case, a
// trailing dot, its port or, without one, any port) names it and no
// other, and a Host naming none of them answers 421, never a link.
func FuzzDomains(f *testing.F) {
	for _, s := range []string{
		"sho.rt", "http://go.example.com:8080", "bücher.example", "SHO.RT.", "https://xn--bcher-kva.example/",
		"sho.rt,go.sho.rt", "sho.rt,sho.rt:8443", "http://sho.rt:8443,sho.rt", "my_host.example", "10.0.0.1", "[::1]", "sho.rt:0", "a..b", "ｓｈｏ．ｒｔ",
		strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + ".example",
	} {
		f.Add(s, "sho.rt")
	}
	f.Fuzz(func(t *testing.T, list, host string) {
		ds, err := parseDomains(strings.Split(list, ","))
		if err != nil {
			return
		}
		h := &Handler{}
		h.domains.Store(newDomainSet(ds, nil))
		for i, d := range ds {
			if !shortener.ValidDomain(d.host) || !strings.HasSuffix(d.base, "://"+d.host) {
				t.Fatalf("domain %q parsed as %+v", list, d)
			}
			// The registry keeps a domain as its host and scheme.
			if r := registered(shortener.Domain{Host: d.host, Scheme: d.scheme()}); r != d {
				t.Fatalf("domain %+v stored and read back as %+v", d, r)
			}
			if !h.domainSet().hasName(strings.ToUpper(d.name) + ".") {
				t.Fatalf("domain %+v: its name is not served", d)
			}
			variants := []string{d.host, strings.ToUpper(d.host)}
			if d.host == d.name {
				variants = append(variants, d.name+".", d.name+":8443")
			}
			for _, v := range variants {
				want := i
				for j, o := range ds { // a domain with that very port wins
					if j != i && strings.EqualFold(o.host, v) {
						want = j
					}
				}
				if got := h.domainOf([]byte(v)); got != want {
					t.Fatalf("domains %q: Host %q names domain %d, want %d (%q)", list, v, got, want, ds[want].host)
				}
			}
		}
		i := h.domainOf([]byte(host))
		if i < -1 || i >= len(ds) {
			t.Fatalf("domainOf(%q) = %d of %d domains", host, i, len(ds))
		}
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetHost(host)
		if i < 0 {
			if len(ds) > 0 && h.hostDomain(&ctx) != "" {
				t.Fatalf("Host %q names no domain of %q, but hostDomain is %q", host, list, h.hostDomain(&ctx))
			}
			return
		}
		if d := h.hostDomain(&ctx); i > 0 && d != ds[i].host || i == 0 && d != "" {
			t.Fatalf("Host %q: domain %d (%q), hostDomain %q", host, i, ds[i].host, d)
		}
		if got := h.linkBase(&ctx, h.hostDomain(&ctx)); got != ds[i].base {
			t.Fatalf("Host %q: links start %q, want %q", host, got, ds[i].base)
		}
	})
}
