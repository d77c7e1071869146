package httpapi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/httpapi"
)

// Every HTML answer, on every route, carries the page headers: a
// Content-Security-Policy, X-Content-Type-Options: nosniff and
// Referrer-Policy: no-referrer. Each route is asked as a browser asks
// (Accept: text/html); the table must name every route, and the answers
// known to be HTML must be HTML.
func TestHTMLAnswersHaveSecurityHeaders(t *testing.T) {
	const admin = "admin-key-for-headers"
	s := start(t, setup{cfg: httpapi.Config{UI: true, AdminKey: admin}})
	past := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	for _, l := range []shortener.Link{
		{ID: "headers001", URL: "https://h.example/", CreatedAt: past},
		{ID: "expired001", URL: "https://e.example/", CreatedAt: past, ExpiresAt: past.Add(time.Minute)},
	} {
		if err := s.Store.Create(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	domains := start(t, setup{cfg: httpapi.Config{UI: true, Domains: []string{"sho.rt"}}})
	tests := []struct {
		route        string
		srv          *testServer
		method, path string
		body         string
		hdr          []string
		html         bool // the answer must be HTML
	}{
		{route: "redirect", method: "GET", path: "/headers001"},
		{route: "redirect", method: "GET", path: "/nosuchlink", html: true},                                  // 404 page
		{route: "redirect", method: "GET", path: "/expired001", html: true},                                  // 410 page
		{route: "redirect", srv: domains, method: "GET", path: "/x", hdr: []string{"Host", "other.example"}}, // 421
		{route: "shorten_url", method: "POST", path: "/shortenURL", body: "{"},
		{route: "get_full_url", method: "GET", path: "/getFullURL/nosuchlink"},
		{route: "links_create", method: "POST", path: "/api/v1/links", body: "{}"},
		{route: "links_list", method: "GET", path: "/api/v1/links"},
		{route: "links_get", method: "GET", path: "/api/v1/links/headers001"},
		{route: "links_delete", method: "DELETE", path: "/api/v1/links/headers001"},
		{route: "links_update", method: "PATCH", path: "/api/v1/links/headers001", body: "{}"},
		{route: "healthz", method: "GET", path: "/healthz"},
		{route: "readyz", method: "GET", path: "/readyz"},
		{route: "metrics", method: "GET", path: "/metrics"},
		{route: "links_stats", method: "GET", path: "/api/v1/links/headers001/stats"},
		{route: "links_stats_csv", method: "GET", path: "/api/v1/links/headers001/stats.csv"},
		{route: "stats", method: "GET", path: "/api/v1/stats"},
		{route: "stats_csv", method: "GET", path: "/api/v1/stats.csv"},
		{route: "links_qr", method: "GET", path: "/api/v1/links/headers001/qr"},
		{route: "ui", method: "GET", path: "/", html: true},
		{route: "ui", srv: domains, method: "GET", path: "/", hdr: []string{"Host", "sho.rt"}, html: true},
		{route: "ui_form", method: "POST", path: "/", body: "url=not+a+url", hdr: []string{"Content-Type", "application/x-www-form-urlencoded"}, html: true},
		{route: "ui_static", method: "GET", path: "/static/app.js"},
		{route: "keys_create", method: "POST", path: "/api/v1/keys", body: "{}"},
		{route: "keys_list", method: "GET", path: "/api/v1/keys"},
		{route: "keys_delete", method: "DELETE", path: "/api/v1/keys/nosuchkey"},
		{route: "domains_list", method: "GET", path: "/api/v1/domains"},
		{route: "domains_create", method: "POST", path: "/api/v1/domains", body: "{}"},
		{route: "domains_delete", method: "DELETE", path: "/api/v1/domains/none.example"},
		{route: "session_get", method: "GET", path: "/api/v1/session"},
		{route: "session_create", method: "POST", path: "/api/v1/session", body: "{}"},
		{route: "session_delete", method: "DELETE", path: "/api/v1/session"},
		{route: "export", method: "GET", path: "/api/v1/export"},
		{route: "import", method: "POST", path: "/api/v1/import", body: "{}"},
		{route: "backup", method: "GET", path: "/api/v1/backup"},
		{route: "method_not_allowed", method: "PUT", path: "/api/v1/links"},
		{route: "not_found", method: "GET", path: "/api/v1/nothing"},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.route] = true
		srv := tt.srv
		if srv == nil {
			srv = s
		}
		hdr := append([]string{"Accept", "text/html,application/xhtml+xml,*/*;q=0.8", "User-Agent", "Mozilla/5.0 Firefox/120.0"}, tt.hdr...)
		r := srv.do(t, tt.method, tt.path, tt.body, hdr...)
		isHTML := strings.HasPrefix(r.Header.Get("Content-Type"), "text/html")
		if tt.html && !isHTML {
			t.Errorf("%s %s (%s): %d %q, want an HTML answer", tt.method, tt.path, tt.route, r.Status, r.Header.Get("Content-Type"))
		}
		if !isHTML {
			continue
		}
		csp := r.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src") || !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe-inline") ||
			r.Header.Get("X-Content-Type-Options") != "nosniff" || r.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s %s (%s): %d HTML without the page headers: CSP %q, X-Content-Type-Options %q, Referrer-Policy %q",
				tt.method, tt.path, tt.route, r.Status, csp, r.Header.Get("X-Content-Type-Options"), r.Header.Get("Referrer-Policy"))
		}
		if strings.Contains(r.Body, "<style>") && !strings.Contains(csp, "style-src 'sha256-") {
			t.Errorf("%s %s: an inline style the CSP does not allow by its hash: %q", tt.method, tt.path, csp)
		}
	}
	for _, name := range httpapi.RouteNames {
		if !covered[name] {
			t.Errorf("route %s: not asked; add it to the table", name)
		}
	}
}
