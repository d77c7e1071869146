package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener/httpapi"
)

type domainsBody struct {
	Domains []struct {
		Domain    string  `json:"domain"`
		BaseURL   string  `json:"base_url"`
		Source    string  `json:"source"`
		Default   bool    `json:"default"`
		CreatedAt *string `json:"created_at"`
	} `json:"domains"`
}

func decodeDomains(t *testing.T, r response) domainsBody {
	t.Helper()
	var out domainsBody
	if r.Status != 200 {
		t.Fatalf("GET /api/v1/domains: %d %s", r.Status, r.Body)
	}
	if err := json.Unmarshal([]byte(r.Body), &out); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	return out
}

// The registry: a domain added through the API is served (Host check,
// links, redirects) by the instance that added it at once, by another
// on the same store once it reads the registry again; deleted, it is
// refused again. Its links keep a delete from happening.
func TestDomainRegistry(t *testing.T) {
	clk := &clock{now: time.Date(2026, 12, 7, 19, 0, 0, 0, time.UTC)}
	cfg := httpapi.Config{AdminKey: "k", Domains: []string{"sho.rt"}, Now: clk.Now, UI: true}
	a := start(t, setup{cfg: cfg, registry: true})
	b := start(t, setup{cfg: cfg, registry: true, store: a.Store}) // a second instance
	admin := []string{"Authorization", "Bearer k", "Host", "sho.rt", "Content-Type", "application/json"}
	on := func(s *testServer, method, host, path, body string) response {
		return s.do(t, method, path, body, "Host", host, "Authorization", "Bearer k", "Content-Type", "application/json")
	}
	// The web page offers the domains served (a choice from two on).
	pageOffers := func(s *testServer, domain string) bool {
		t.Helper()
		r := s.do(t, "GET", "/", "", "Host", "sho.rt")
		if r.Status != 200 {
			t.Fatalf("GET /: %d", r.Status)
		}
		return strings.Contains(r.Body, `<option value="`+domain+`"`)
	}
	if pageOffers(a, "go.example.com") {
		t.Error("the page offers go.example.com before it is added")
	}

	if got := decodeDomains(t, a.do(t, "GET", "/api/v1/domains", "", admin...)); len(got.Domains) != 1 ||
		got.Domains[0].Domain != "sho.rt" || got.Domains[0].Source != "flag" || !got.Domains[0].Default || got.Domains[0].CreatedAt != nil {
		t.Errorf("domains before any add: %+v", got)
	}
	wantError(t, on(a, "GET", "go.example.com", "/x", ""), 421, "misdirected_request")
	if b.Handler.ServesName(context.Background(), "go.example.com") {
		t.Error("instance B serves go.example.com before it is added")
	}

	r := a.do(t, "POST", "/api/v1/domains", `{"domain":"GO.Example.COM."}`, admin...)
	if r.Status != 201 || r.Header.Get("Location") != "/api/v1/domains/go.example.com" ||
		!strings.Contains(r.Body, `"domain":"go.example.com"`) || !strings.Contains(r.Body, `"source":"api"`) {
		t.Fatalf("POST /api/v1/domains: %d %s %q", r.Status, r.Body, r.Header.Get("Location"))
	}
	// Instance A serves it at once: the page's choices, links on it, its
	// redirects.
	if !pageOffers(a, "go.example.com") || !pageOffers(a, "sho.rt") {
		t.Error("the page does not offer both domains after the add")
	}
	l := decodeLink(t, on(a, "POST", "go.example.com", "/api/v1/links", `{"url":"https://target.example/","slug":"promo"}`))
	if l.Domain != "go.example.com" || l.ShortURL != "https://go.example.com/promo" {
		t.Errorf("link on the added domain: %+v", l)
	}
	if r := on(a, "GET", "go.example.com", "/promo", ""); r.Status != 302 || r.Header.Get("Location") != "https://target.example/" {
		t.Errorf("redirect on the added domain: %d %q", r.Status, r.Header.Get("Location"))
	}
	if r := on(a, "GET", "sho.rt", "/api/v1/links?domain=go.example.com", ""); r.Status != 200 || !strings.Contains(r.Body, `"short_url":"https://go.example.com/promo"`) {
		t.Errorf("list by the added domain: %d %s", r.Status, r.Body)
	}
	// Instance B: not before it reads the registry (its refresh); the
	// TLS allow-check (ServesName) reads it on a miss, at most once per
	// MinMissRefresh.
	wantError(t, on(b, "GET", "go.example.com", "/promo", ""), 421, "misdirected_request")
	if b.Handler.ServesName(context.Background(), "go.example.com") {
		t.Error("ServesName read the registry again within MinMissRefresh")
	}
	clk.Add(httpapi.MinMissRefresh)
	if !b.Handler.ServesName(context.Background(), "GO.example.com.") {
		t.Error("ServesName did not read the registry again on a miss")
	}
	if r := on(b, "GET", "go.example.com", "/promo", ""); r.Status != 302 {
		t.Errorf("redirect on B after its refresh: %d %s", r.Status, r.Body)
	}
	got := decodeDomains(t, b.do(t, "GET", "/api/v1/domains", "", admin...))
	if len(got.Domains) != 2 || got.Domains[1].Domain != "go.example.com" || got.Domains[1].BaseURL != "https://go.example.com" ||
		got.Domains[1].Source != "api" || got.Domains[1].CreatedAt == nil || *got.Domains[1].CreatedAt != "2026-12-07T19:00:00Z" {
		t.Errorf("domains on B: %+v", got)
	}

	for _, tt := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"again", `{"domain":"go.example.com"}`, 409, "domain_taken"},
		{"a --domain", `{"domain":"SHO.rt"}`, 409, "domain_fixed"},
		{"an address", `{"domain":"10.0.0.1"}`, 400, "invalid_parameter"},
		{"a path", `{"domain":"https://x.example/path"}`, 400, "invalid_parameter"},
		{"no name", `{"domain":""}`, 400, "invalid_parameter"},
		{"too long", `{"domain":"` + strings.Repeat("a", 130) + `.example"}`, 400, "invalid_parameter"},
		{"unknown field", `{"domain":"x.example","tls":true}`, 400, "invalid_json"},
		{"not JSON", `domain=x.example`, 400, "invalid_json"},
		{"too large", `{"domain":"` + strings.Repeat("a", 9<<10) + `"}`, 413, "payload_too_large"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, a.do(t, "POST", "/api/v1/domains", tt.body, admin...), tt.status, tt.code)
		})
	}
	wantError(t, a.do(t, "POST", "/api/v1/domains", `{"domain":"x.example"}`, "Host", "sho.rt"), 401, "unauthorized")
	wantError(t, a.do(t, "DELETE", "/api/v1/domains/go.example.com", "", "Host", "sho.rt"), 401, "unauthorized")
	wantError(t, a.do(t, "PUT", "/api/v1/domains", "", admin...), 405, "method_not_allowed")

	// Its link keeps it: 409 with the count.
	r = a.do(t, "DELETE", "/api/v1/domains/GO.example.com", "", admin...)
	var inUse struct {
		Error struct {
			Code  string
			Links int
		}
	}
	if err := json.Unmarshal([]byte(r.Body), &inUse); err != nil || r.Status != 409 || inUse.Error.Code != "domain_in_use" || inUse.Error.Links != 1 {
		t.Errorf("DELETE of a domain with a link: %d %s", r.Status, r.Body)
	}
	wantError(t, a.do(t, "DELETE", "/api/v1/domains/sho.rt", "", admin...), 409, "domain_fixed")
	if r := on(a, "DELETE", "sho.rt", "/api/v1/links/promo?domain=go.example.com", ""); r.Status != 204 {
		t.Fatalf("delete the link: %d %s", r.Status, r.Body)
	}
	if r := a.do(t, "DELETE", "/api/v1/domains/go.example.com", "", admin...); r.Status != 204 {
		t.Fatalf("DELETE of the domain: %d %s", r.Status, r.Body)
	}
	wantError(t, a.do(t, "DELETE", "/api/v1/domains/go.example.com", "", admin...), 404, "not_found")
	wantError(t, on(a, "GET", "go.example.com", "/promo", ""), 421, "misdirected_request")
	wantError(t, on(a, "POST", "sho.rt", "/api/v1/links", `{"url":"https://target.example/","domain":"go.example.com"}`), 400, "invalid_parameter")
	if a.Handler.ServesName(context.Background(), "go.example.com") {
		t.Error("A serves a deleted domain's name")
	}
	if pageOffers(a, "go.example.com") {
		t.Error("the page offers a deleted domain")
	}
	if err := b.Handler.RefreshDomains(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantError(t, on(b, "GET", "go.example.com", "/promo", ""), 421, "misdirected_request")
}

// Without a --domain the server answers for any Host: there is no
// default domain to keep links stored before, so nothing is added.
func TestDomainRegistryNeedsADefault(t *testing.T) {
	s := start(t, setup{cfg: httpapi.Config{AdminKey: "k"}, registry: true})
	wantError(t, s.do(t, "POST", "/api/v1/domains", `{"domain":"go.example.com"}`, "Authorization", "Bearer k"), 409, "no_default_domain")
	if got := decodeDomains(t, s.do(t, "GET", "/api/v1/domains", "", "Authorization", "Bearer k")); len(got.Domains) != 0 {
		t.Errorf("domains: %+v", got)
	}
}
