package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/httpapi"
)

// Links belong to domains: the same slug on two domains is two links,
// each answered on its own domain, and every short link returned starts
// with the link's domain, never with the request's Host.
func TestDomainLinks(t *testing.T) {
	s := start(t, setup{cfg: httpapi.Config{AdminKey: "k", Domains: []string{"sho.rt", "go.example.com", "http://local.test:8080"}}, visits: true})
	create := func(host, body string) response {
		return s.do(t, "POST", "/api/v1/links", body, "Host", host, "Content-Type", "application/json")
	}
	mustLink := func(r response, domain, shortURL string) linkBody {
		t.Helper()
		if r.Status != 201 && r.Status != 200 {
			t.Fatalf("status %d %s", r.Status, r.Body)
		}
		l := decodeLink(t, r)
		if l.Domain != domain || l.ShortURL != shortURL {
			t.Errorf("link %+v: want domain %q, short_url %q", l, domain, shortURL)
		}
		return l
	}
	mustLink(create("sho.rt", `{"url":"https://one.example/","slug":"promo"}`), "sho.rt", "https://sho.rt/promo")
	mustLink(create("go.example.com", `{"url":"https://two.example/","slug":"promo"}`), "go.example.com", "https://go.example.com/promo")
	// The domain field, compared as a Host is, overrides the Host.
	r := create("sho.rt", `{"url":"https://three.example/","slug":"promo","domain":"LOCAL.test:8080"}`)
	mustLink(r, "local.test:8080", "http://local.test:8080/promo")
	if loc := r.Header.Get("Location"); loc != "/api/v1/links/promo?domain=local.test:8080" {
		t.Errorf("Location %q", loc)
	}
	wantError(t, create("sho.rt", `{"url":"https://four.example/","slug":"promo","domain":"go.example.com."}`), 409, "slug_taken")
	for _, d := range []string{"evil.example", "", "sho.rt/x", strings.Repeat("a", 300)} {
		r := create("sho.rt", `{"url":"https://five.example/","domain":`+quote(d)+`}`)
		wantError(t, r, 400, "invalid_parameter")
	}

	// Each domain redirects to its own link.
	for _, tt := range []struct{ host, want string }{
		{"sho.rt", "https://one.example/"}, {"SHO.RT:443", "https://one.example/"},
		{"go.example.com", "https://two.example/"}, {"local.test:8080", "https://three.example/"},
	} {
		if r := s.do(t, "GET", "/promo", "", "Host", tt.host); r.Status != 302 || r.Header.Get("Location") != tt.want {
			t.Errorf("GET /promo on %s: %d %q, want %s", tt.host, r.Status, r.Header.Get("Location"), tt.want)
		}
		if r := s.do(t, "GET", "/getFullURL/promo", "", "Host", tt.host); r.Body != quote(tt.want) {
			t.Errorf("getFullURL on %s: %d %q", tt.host, r.Status, r.Body)
		}
	}
	// The API names a domain by ?domain= or by the Host; the answer is
	// the link's domain's, whatever the Host.
	mustLink(s.do(t, "GET", "/api/v1/links/promo?domain=go.example.com", "", "Host", "sho.rt"), "go.example.com", "https://go.example.com/promo")
	mustLink(s.do(t, "GET", "/api/v1/links/promo", "", "Host", "go.example.com"), "go.example.com", "https://go.example.com/promo")
	mustLink(s.do(t, "GET", "/api/v1/links/promo?domain=sho.rt", "", "Host", "go.example.com"), "sho.rt", "https://sho.rt/promo")
	wantError(t, s.do(t, "GET", "/api/v1/links/promo?domain=evil.example", "", "Host", "sho.rt"), 400, "invalid_parameter")
	if r := s.do(t, "GET", "/api/v1/links/promo/qr?format=svg&domain=go.example.com", "", "Host", "sho.rt"); r.Status != 200 {
		t.Errorf("QR on another domain: %d %q", r.Status, r.Body)
	}

	// Visits are counted per link (those above included).
	for range 3 {
		s.do(t, "GET", "/promo", "", "Host", "go.example.com")
	}
	for _, tt := range []struct {
		q    string
		want int64
	}{{"?domain=go.example.com", 4}, {"?domain=local.test:8080", 1}, {"", 2}} {
		r := s.do(t, "GET", "/api/v1/links/promo/stats"+tt.q, "", "Host", "sho.rt", "Authorization", "Bearer k")
		var st struct{ Total int64 }
		if err := json.Unmarshal([]byte(r.Body), &st); err != nil || r.Status != 200 || st.Total != tt.want {
			t.Errorf("stats%s: %d %s, want total %d", tt.q, r.Status, r.Body, tt.want)
		}
	}

	// Listing: every domain, or one.
	list := func(q string) map[string]string {
		t.Helper()
		r := s.do(t, "GET", "/api/v1/links"+q, "", "Host", "sho.rt", "Authorization", "Bearer k")
		var p struct{ Links []linkBody }
		if err := json.Unmarshal([]byte(r.Body), &p); err != nil || r.Status != 200 {
			t.Fatalf("list%s: %d %s", q, r.Status, r.Body)
		}
		got := map[string]string{}
		for _, l := range p.Links {
			got[l.ShortURL] = l.URL
		}
		return got
	}
	if got := list(""); len(got) != 3 || got["https://go.example.com/promo"] != "https://two.example/" {
		t.Errorf("list: %v", got)
	}
	if got := list("?domain=go.example.com"); len(got) != 1 || got["https://go.example.com/promo"] == "" {
		t.Errorf("list ?domain=go.example.com: %v", got)
	}
	if got := list("?domain=sho.rt&limit=1"); len(got) != 1 || got["https://sho.rt/promo"] == "" {
		t.Errorf("list ?domain=sho.rt: %v", got)
	}

	// An edit stays on its domain and cannot move the link.
	wantError(t, s.do(t, "PATCH", "/api/v1/links/promo", `{"domain":"sho.rt"}`, "Host", "go.example.com", "Authorization", "Bearer k"), 400, "invalid_parameter")
	mustLink(s.do(t, "PATCH", "/api/v1/links/promo", `{"url":"https://two.example/edited"}`, "Host", "go.example.com", "Authorization", "Bearer k"),
		"go.example.com", "https://go.example.com/promo")
	if r := s.do(t, "GET", "/promo", "", "Host", "sho.rt"); r.Header.Get("Location") != "https://one.example/" {
		t.Errorf("an edit on go.example.com changed sho.rt's link: %q", r.Header.Get("Location"))
	}

	// A delete on one domain leaves the others.
	if r := s.do(t, "DELETE", "/api/v1/links/promo", "", "Host", "go.example.com", "Authorization", "Bearer k"); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := s.do(t, "GET", "/promo", "", "Host", "go.example.com"); r.Status != 404 {
		t.Errorf("deleted link answers %d", r.Status)
	}
	for _, host := range []string{"sho.rt", "local.test:8080"} {
		if r := s.do(t, "GET", "/promo", "", "Host", host); r.Status != 302 {
			t.Errorf("delete on go.example.com: /promo on %s answers %d", host, r.Status)
		}
	}

	// The seed's create puts the link on the Host's domain.
	r = s.do(t, "POST", "/shortenURL", `{"OriginalURL":"https://seed.example/"}`, "Host", "go.example.com")
	var seed struct{ ShortURL string }
	if err := json.Unmarshal([]byte(r.Body), &seed); err != nil || r.Status != 201 {
		t.Fatalf("shortenURL: %d %s", r.Status, r.Body)
	}
	if r := s.do(t, "GET", "/"+seed.ShortURL, "", "Host", "go.example.com"); r.Status != 302 {
		t.Errorf("seed link on its domain: %d", r.Status)
	}
	if r := s.do(t, "GET", "/"+seed.ShortURL, "", "Host", "sho.rt"); r.Status != 404 {
		t.Errorf("seed link of go.example.com on sho.rt: %d", r.Status)
	}
}

// The default domain (the first --domain) keeps the seed's layout: its
// links are stored under their bare id, which the seed's app reads, and
// links stored before domains existed belong to it.
func TestDefaultDomainKeepsTheSeedLayout(t *testing.T) {
	s := start(t, setup{cfg: httpapi.Config{Domains: []string{"sho.rt", "go.example.com"}}})
	ctx := context.Background()
	if err := s.Store.Create(ctx, shortener.Link{ID: "old-link", URL: "https://before-domains.example/"}); err != nil {
		t.Fatal(err)
	}
	if r := s.do(t, "GET", "/old-link", "", "Host", "sho.rt"); r.Header.Get("Location") != "https://before-domains.example/" {
		t.Errorf("a link stored before domains: %d %q", r.Status, r.Header.Get("Location"))
	}
	if r := s.do(t, "GET", "/old-link", "", "Host", "go.example.com"); r.Status != 404 {
		t.Errorf("a default-domain link on another domain: %d", r.Status)
	}
	for _, host := range []string{"sho.rt", "go.example.com"} {
		if r := s.do(t, "POST", "/api/v1/links", `{"url":"https://`+host+`.target.example/","slug":"both"}`, "Host", host); r.Status != 201 {
			t.Fatalf("create on %s: %d %s", host, r.Status, r.Body)
		}
	}
	for key, want := range map[string]string{"both": "https://sho.rt.target.example/", "go.example.com/both": "https://go.example.com.target.example/"} {
		l, err := s.Store.Get(ctx, key)
		if err != nil || l.URL != want {
			t.Errorf("store key %q: %+v, %v; want %s", key, l, err, want)
		}
	}
}

// No Host reaches a link: with several domains, one public URL or
// neither, whatever Host a request carries, each short_url starts with
// the link's own domain, which is a configured one (or, with neither
// configured, a loopback Host or the address the server listens on).
func TestDomainShortURLNeverFromHost(t *testing.T) {
	hosts := []string{"sho.rt", "go.example.com", "evil.example", "127.0.0.1:1", "localhost"}
	for _, tt := range []struct {
		cfg   httpapi.Config
		bases map[string]string // Host → the base of its links; absent: 421
	}{
		{httpapi.Config{Domains: []string{"sho.rt", "go.example.com"}}, map[string]string{"sho.rt": "https://sho.rt", "go.example.com": "https://go.example.com"}},
		{httpapi.Config{PublicURL: "https://sho.rt"}, map[string]string{"sho.rt": "https://sho.rt", "go.example.com": "https://sho.rt", "evil.example": "https://sho.rt", "127.0.0.1:1": "https://sho.rt", "localhost": "https://sho.rt"}},
		{httpapi.Config{}, map[string]string{"sho.rt": "", "go.example.com": "", "evil.example": "", "127.0.0.1:1": "http://127.0.0.1:1", "localhost": "http://localhost"}},
	} {
		tt.cfg.UI = true
		s := start(t, setup{cfg: tt.cfg})
		for _, host := range hosts {
			want, ok := tt.bases[host]
			if want == "" {
				want = s.URL // the listener's address
			}
			for _, path := range []string{"/api/v1/links", "/"} {
				body, ct := `{"url":"https://t.example/"}`, "application/json"
				if path == "/" {
					body, ct = "url=https%3A%2F%2Ft.example%2F", "application/x-www-form-urlencoded"
				}
				r := s.do(t, "POST", path, body, "Host", host, "Content-Type", ct, "Accept", "application/json")
				if !ok {
					wantError(t, r, 421, "misdirected_request")
					continue
				}
				if path == "/" { // the page shows the link the form created
					page := s.do(t, "GET", r.Header.Get("Location"), "", "Host", host)
					if r.Status != 303 || page.Status != 200 || !strings.Contains(page.Body, `value="`+want+"/") || strings.Contains(page.Body, "evil") {
						t.Errorf("Host %q: form %d %q, page %d without %s/", host, r.Status, r.Header.Get("Location"), page.Status, want)
					}
					continue
				}
				l := decodeLink(t, r)
				if l.ShortURL != want+"/"+l.ID || want != strings.SplitN(want, "://", 2)[0]+"://"+l.Domain {
					t.Errorf("%+v: Host %q: domain %q short_url %q, want %s/%s", tt.cfg, host, l.Domain, l.ShortURL, want, l.ID)
				}
				// The link view and the page name the same link the same way.
				v := decodeLink(t, s.do(t, "GET", "/api/v1/links/"+l.ID+"?domain="+l.Domain, "", "Host", host))
				if v.ShortURL != l.ShortURL {
					t.Errorf("%+v: Host %q: GET answered %q, create %q", tt.cfg, host, v.ShortURL, l.ShortURL)
				}
			}
		}
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
