package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/linkgate/linkgate/shortener/httpapi"
)

// api/openapi.yaml is a valid OpenAPI 3 document, and what the server
// answers matches it: every request below is routed through the document
// and its response (status, headers, body schema) validated against it.
func TestOpenAPIDocument(t *testing.T) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("invalid OpenAPI document: %v", err)
	}
	// The statistics' CSV has rows of two widths (the series, then the
	// dimensions), which kin-openapi's CSV decoder refuses: it is checked
	// as text (TestStatsAPI reads it as CSV).
	openapi3filter.RegisterBodyDecoder("text/csv", func(r io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(r)
		return string(b), err
	})
	s := start(t, setup{cfg: httpapi.Config{AdminKey: "k", UI: true, CreateRate: httpapi.Rate{N: 40, Per: time.Hour}}, visits: true, transfer: true})
	for _, ct := range []string{"application/x-ndjson", "application/x-tar"} {
		openapi3filter.RegisterBodyDecoder(ct, openapi3filter.FileBodyDecoder)
	}
	doc.Servers = openapi3.Servers{{URL: s.URL}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	id := wantSeedCreated(t, s.do(t, "POST", "/shortenURL", `{"OriginalURL":"https://spec.example/"}`), "https://spec.example/")
	tests := []struct {
		method, path, body string
		hdr                []string
	}{
		{"POST", "/shortenURL", `{"OriginalURL":"https://spec.example/a"}`, nil},
		{"POST", "/shortenURL", `{"OriginalURL":"nope"}`, nil},
		{"POST", "/shortenURL", strings.Repeat("x", 9000), nil},
		{"GET", "/getFullURL/" + id, "", nil},
		{"GET", "/getFullURL/nope000000", "", nil},
		{"GET", "/" + id, "", nil},
		{"GET", "/nope000000", "", nil},
		{"GET", "/nope000000", "", []string{"Accept", "application/json"}},
		{"POST", "/api/v1/links", `{"url":"https://spec.example/b","slug":"spec-slug","expires_at":"2099-01-01T00:00:00Z","max_visits":5}`, []string{"Content-Type", "application/json"}},
		{"POST", "/api/v1/links", `{"url":"https://spec.example/b","slug":"spec-slug"}`, []string{"Content-Type", "application/json"}},
		{"POST", "/api/v1/links", `{"url":"https://spec.example/b","bogus":1}`, []string{"Content-Type", "application/json"}},
		{"GET", "/api/v1/links/spec-slug", "", nil},
		{"GET", "/api/v1/links/" + id, "", nil},
		{"GET", "/api/v1/links?limit=1", "", []string{"Authorization", "Bearer k"}},
		{"GET", "/api/v1/links", "", nil},
		{"DELETE", "/api/v1/links/spec-slug", "", []string{"X-API-Key", "k"}},
		{"DELETE", "/api/v1/links/spec-slug", "", []string{"X-API-Key", "k"}},
		{"PATCH", "/api/v1/links/" + id, `{"url":"https://spec.example/edited","tags":["spec"],"forward_query":true,"max_visits":null}`, []string{"X-API-Key", "k", "Content-Type", "application/json"}},
		{"PATCH", "/api/v1/links/" + id, `{"expires_at":"2099-01-01T00:00:00Z","forward_query":null}`, []string{"X-API-Key", "k", "Content-Type", "application/json"}},
		{"PATCH", "/api/v1/links/" + id, `{"tags":["bad tag"]}`, []string{"X-API-Key", "k", "Content-Type", "application/json"}},
		{"PATCH", "/api/v1/links/" + id, `{"url":null}`, []string{"X-API-Key", "k", "Content-Type", "application/json"}},
		{"PATCH", "/api/v1/links/nope000000", `{"url":"https://spec.example/"}`, []string{"X-API-Key", "k", "Content-Type", "application/json"}},
		{"PATCH", "/api/v1/links/" + id, `{"url":"https://spec.example/"}`, []string{"Content-Type", "application/json"}},
		{"GET", "/api/v1/links?tag=spec&q=EDITED&created_after=2020-01-01T00:00:00Z&limit=5", "", []string{"Authorization", "Bearer k"}},
		{"GET", "/api/v1/links?order=newest&limit=1", "", []string{"Authorization", "Bearer k"}},
		{"GET", "/api/v1/links?created_before=yesterday", "", []string{"Authorization", "Bearer k"}},
		{"GET", "/api/v1/links?domain=" + strings.TrimPrefix(s.URL, "http://"), "", []string{"Authorization", "Bearer k"}},
		{"GET", "/api/v1/links/" + id + "?domain=" + strings.TrimPrefix(s.URL, "http://"), "", nil},
		{"GET", "/api/v1/links/" + id + "?domain=evil.example", "", nil},
		{"POST", "/api/v1/links", `{"url":"https://spec.example/d","domain":"` + strings.TrimPrefix(s.URL, "http://") + `"}`, []string{"Content-Type", "application/json"}},
		{"PATCH", "/api/v1/links/" + id, `{"domain":"other.example"}`, []string{"X-API-Key", "k", "Content-Type", "application/json"}},
		{"GET", "/" + id + "?utm_source=spec", "", nil},
		{"GET", "/" + id, "", []string{"User-Agent", "Twitterbot/1.0"}},
		{"GET", "/api/v1/links/" + id + "/stats", "", []string{"X-API-Key", "k"}},
		{"GET", "/api/v1/links/" + id + "/stats", "", nil},
		{"GET", "/api/v1/links/nope000000/stats", "", []string{"X-API-Key", "k"}},
		{"GET", "/api/v1/links/" + id + "/stats?from=2026-01-01&granularity=day&bots=exclude&top=3&dimensions=referrer,utm_source", "", []string{"X-API-Key", "k"}},
		{"GET", "/api/v1/links/" + id + "/stats?granularity=hour&from=" + time.Now().Add(-30*24*time.Hour).UTC().Format(time.RFC3339), "", []string{"X-API-Key", "k"}},
		{"GET", "/api/v1/links/" + id + "/stats?from=2026-01-02&to=2026-01-01", "", []string{"X-API-Key", "k"}},
		{"GET", "/api/v1/links/" + id + "/stats?granularity=minute", "", []string{"X-API-Key", "k"}},
		{"GET", "/api/v1/links/" + id + "/stats?dimensions=shoe", "", []string{"X-API-Key", "k"}},
		{"GET", "/api/v1/links/" + id + "/stats?from=2000-01-01", "", []string{"X-API-Key", "k"}},
		{"GET", "/api/v1/links/" + id + "/stats.csv", "", []string{"X-API-Key", "k"}},
		{"GET", "/api/v1/stats", "", []string{"X-API-Key", "k"}},
		{"GET", "/api/v1/stats?tag=spec&bots=only", "", []string{"X-API-Key", "k"}},
		{"GET", "/api/v1/stats?domain=" + strings.TrimPrefix(s.URL, "http://"), "", []string{"X-API-Key", "k"}},
		{"GET", "/api/v1/stats", "", nil},
		{"GET", "/api/v1/stats.csv?top=100", "", []string{"X-API-Key", "k"}},
		{"GET", "/api/v1/stats?top=0", "", []string{"X-API-Key", "k"}},
		{"GET", "/api/v1/links/" + id + "/qr", "", nil},
		{"GET", "/api/v1/links/" + id + "/qr?format=svg&size=128", "", nil},
		{"GET", "/api/v1/links/" + id + "/qr?format=gif", "", nil},
		{"GET", "/api/v1/links/nope000000/qr", "", nil},
		{"GET", "/", "", nil},
		{"GET", "/?created=" + id, "", nil},
		{"GET", "/?created=" + id + "&domain=evil.example", "", nil},
		{"POST", "/", "url=https%3A%2F%2Fspec.example%2Fform", []string{"Content-Type", "application/x-www-form-urlencoded"}},
		{"POST", "/", "url=nope", []string{"Content-Type", "application/x-www-form-urlencoded", "Accept", "text/html"}},
		{"POST", "/", "{}", []string{"Content-Type", "application/json"}},
		{"POST", "/api/v1/keys", `{"name":"spec","scopes":["links:create"]}`, []string{"X-API-Key", "k", "Content-Type", "application/json"}},
		{"POST", "/api/v1/keys", `{"name":"spec","scopes":["nope"]}`, []string{"X-API-Key", "k", "Content-Type", "application/json"}},
		{"POST", "/api/v1/keys", `{"name":"spec","scopes":["admin"]}`, []string{"Content-Type", "application/json"}},
		{"GET", "/api/v1/keys", "", []string{"X-API-Key", "k"}},
		{"GET", "/api/v1/keys", "", []string{"X-API-Key", "lgk_AAAAAAAAAAAA_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"}},
		{"DELETE", "/api/v1/keys/AAAAAAAAAAAA", "", []string{"X-API-Key", "k"}},
		{"POST", "/api/v1/links", `{"url":"https://spec.example/k"}`, []string{"Content-Type", "application/json", "X-API-Key", "lgk_AAAAAAAAAAAA_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"}},
		{"GET", "/api/v1/session", "", nil},
		{"POST", "/api/v1/session", `{"key":"k"}`, []string{"Content-Type", "application/json"}},
		{"POST", "/api/v1/session", `{"key":"wrong"}`, []string{"Content-Type", "application/json"}},
		{"DELETE", "/api/v1/session", "", nil},
		{"GET", "/api/v1/export", "", []string{"X-API-Key", "k"}},
		{"GET", "/api/v1/export?format=csv", "", []string{"X-API-Key", "k"}},
		{"GET", "/api/v1/export?format=xml", "", []string{"X-API-Key", "k"}},
		{"GET", "/api/v1/export", "", nil},
		{"POST", "/api/v1/import", `{"id":"spec-import","url":"https://spec.example/i"}` + "\nnope\n", []string{"X-API-Key", "k", "Content-Type", "application/x-ndjson"}},
		{"POST", "/api/v1/import", "", []string{"Content-Type", "application/x-ndjson"}},
		{"GET", "/api/v1/backup", "", []string{"X-API-Key", "k"}},
		{"GET", "/static/app.js", "", nil},
		{"GET", "/static/app.css", "", nil},
		{"GET", "/healthz", "", nil},
		{"GET", "/readyz", "", nil},
		{"GET", "/metrics", "", nil},
	}
	// Past the create rate limit: 429.
	for range 40 {
		tests = append(tests, struct {
			method, path, body string
			hdr                []string
		}{"POST", "/shortenURL", `{"OriginalURL":"https://spec.example/r"}`, nil})
	}
	// With --domain, an unknown Host is answered 421 (the request is
	// routed through the document at its server's address).
	s421 := start(t, setup{cfg: httpapi.Config{Domains: []string{"sho.rt"}}})
	for _, path := range []string{"/" + id, "/api/v1/links/" + id, "/getFullURL/" + id} {
		r := s421.do(t, "GET", path, "", "Host", "evil.example")
		if r.Status != http.StatusMisdirectedRequest {
			t.Errorf("GET %s with an unknown Host: %d, want 421", path, r.Status)
		}
		validate(t, router, "GET", s.URL+path, "", nil, r)
	}
	for _, tt := range tests {
		r := s.do(t, tt.method, tt.path, tt.body, tt.hdr...)
		validate(t, router, tt.method, s.URL+tt.path, tt.body, tt.hdr, r)
	}
	// The domain registry, on a server with a --domain (requests on its
	// Host, routed through the document at s's address).
	sd := start(t, setup{cfg: httpapi.Config{AdminKey: "k", Domains: []string{"sho.rt"}}, registry: true})
	admin := []string{"X-API-Key", "k", "Content-Type", "application/json"}
	for _, tt := range []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/api/v1/domains", "", 200},
		{"POST", "/api/v1/domains", `{"domain":"Go.Example.com"}`, 201},
		{"POST", "/api/v1/domains", `{"domain":"go.example.com"}`, 409},
		{"POST", "/api/v1/domains", `{"domain":"sho.rt"}`, 409},
		{"POST", "/api/v1/domains", `{"domain":"10.0.0.1"}`, 400},
		{"POST", "/api/v1/domains", `{"name":"x.example"}`, 400},
		{"POST", "/api/v1/links", `{"url":"https://spec.example/g","domain":"go.example.com"}`, 201},
		{"GET", "/api/v1/domains", "", 200},
		{"DELETE", "/api/v1/domains/go.example.com", "", 409},
		{"DELETE", "/api/v1/domains/sho.rt", "", 409},
		{"DELETE", "/api/v1/domains/none.example", "", 404},
	} {
		r := sd.do(t, tt.method, tt.path, tt.body, append([]string{"Host", "sho.rt"}, admin...)...)
		if r.Status != tt.status {
			t.Errorf("%s %s %s: %d %s, want %d", tt.method, tt.path, tt.body, r.Status, r.Body, tt.status)
		}
		validate(t, router, tt.method, s.URL+tt.path, tt.body, admin, r)
	}
}

// validate checks that the answer r to a request matches the document.
func validate(t *testing.T, router routers.Router, method, url, body string, hdr []string, r response) {
	t.Helper()
	{
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Errorf("%s %s: not in the document: %v", method, url, err)
			return
		}
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, ExcludeRequestBody: true}}
		out := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: in, Status: r.Status, Header: r.Header,
			Body:    io.NopCloser(bytes.NewReader([]byte(r.Body))),
			Options: &openapi3filter.Options{IncludeResponseStatus: true},
		}
		if err := openapi3filter.ValidateResponse(t.Context(), out); err != nil {
			t.Errorf("%s %s → %d %q: does not match the document: %v", method, url, r.Status, r.Body, err)
		}
	}
}
