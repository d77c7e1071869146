package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/httpapi"
)

var adminJSON = []string{"X-API-Key", "k", "Content-Type", "application/json"}

func createLink(t *testing.T, s *testServer, body string) linkBody {
	t.Helper()
	r := s.do(t, "POST", "/api/v1/links", body, adminJSON...)
	if r.Status != 201 {
		t.Fatalf("create %s: %d %s", body, r.Status, r.Body)
	}
	return decodeLink(t, r)
}

func TestPatchLink(t *testing.T) {
	s := start(t, setup{cfg: httpapi.Config{AdminKey: "k"}})
	l := createLink(t, s, `{"url":"https://before.example/","slug":"editme","max_visits":10,"tags":["old"]}`)
	if !slices.Equal(l.Tags, []string{"old"}) || l.Forward != nil {
		t.Fatalf("created %+v", l)
	}
	if r := s.do(t, "GET", "/editme", ""); r.Header.Get("Location") != "https://before.example/" {
		t.Fatalf("redirect before the edit: %d %q", r.Status, r.Header.Get("Location"))
	}
	r := s.do(t, "PATCH", "/api/v1/links/editme", `{"url":"https://after.example/x","tags":["new","campaign:spring","new"],"max_visits":null,"forward_query":true}`, adminJSON...)
	if r.Status != 200 {
		t.Fatalf("PATCH: %d %s", r.Status, r.Body)
	}
	got := decodeLink(t, r)
	if got.URL != "https://after.example/x" || !slices.Equal(got.Tags, []string{"campaign:spring", "new"}) || got.MaxVisits != nil ||
		got.Forward == nil || !*got.Forward || got.ID != "editme" || *got.CreatedAt != *l.CreatedAt {
		t.Errorf("PATCH answered %+v", got)
	}
	// The redirect follows the edit at once, and the link view shows it.
	if r := s.do(t, "GET", "/editme", ""); r.Header.Get("Location") != "https://after.example/x" {
		t.Errorf("redirect after the edit: %d %q", r.Status, r.Header.Get("Location"))
	}
	if v := decodeLink(t, s.do(t, "GET", "/api/v1/links/editme", "")); v.URL != got.URL || !slices.Equal(v.Tags, got.Tags) {
		t.Errorf("GET after PATCH: %+v", v)
	}
	// An empty patch changes nothing and answers the link.
	if v := decodeLink(t, s.do(t, "PATCH", "/api/v1/links/editme", `{}`, adminJSON...)); v.URL != got.URL {
		t.Errorf("empty PATCH: %+v", v)
	}
	// Each field is validated as a create's.
	for _, tt := range []struct{ body, code string }{
		{`{"url":"javascript:alert(1)"}`, "scheme_not_allowed"},
		{`{"url":"` + s.URL + `/x"}`, "self_reference"},
		{`{"url":"not a url"}`, "invalid_url"},
		{`{"url":null}`, "invalid_url"},
		{`{"expires_at":"2001-01-01T00:00:00Z"}`, "invalid_parameter"},
		{`{"max_visits":0}`, "invalid_parameter"},
		{`{"tags":["has space"]}`, "invalid_parameter"},
		{`{"tags":["` + strings.Repeat("t", 65) + `"]}`, "invalid_parameter"},
		{`{"tags":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]}`, "invalid_parameter"},
		{`{"slug":"renamed"}`, "invalid_json"},
		{`{"url":1}`, "invalid_json"},
		{`not json`, "invalid_json"},
	} {
		wantError(t, s.do(t, "PATCH", "/api/v1/links/editme", tt.body, adminJSON...), 400, tt.code)
	}
	if v := decodeLink(t, s.do(t, "GET", "/api/v1/links/editme", "")); v.URL != got.URL {
		t.Errorf("a refused PATCH changed the link: %+v", v)
	}
	wantError(t, s.do(t, "PATCH", "/api/v1/links/nothere", `{"url":"https://x.example/"}`, adminJSON...), 404, "not_found")
	wantError(t, s.do(t, "PATCH", "/api/v1/links/editme", `{"url":"https://x.example/"}`, "Content-Type", "application/json"), 401, "unauthorized")
	wantError(t, s.do(t, "PATCH", "/api/v1/links/editme", `{"url":"https://x.example/"}`, "X-API-Key", "wrong"), 401, "unauthorized")
	wantError(t, s.do(t, "PATCH", "/api/v1/links/editme", `{"tags":["`+strings.Repeat("x", 9000)+`"]}`, adminJSON...), 413, "payload_too_large")
	// Deleted, it stays deleted.
	if r := s.do(t, "DELETE", "/api/v1/links/editme", "", adminJSON...); r.Status != 204 {
		t.Fatalf("DELETE: %d", r.Status)
	}
	wantError(t, s.do(t, "PATCH", "/api/v1/links/editme", `{"url":"https://x.example/"}`, adminJSON...), 404, "not_found")
	wantError(t, s.do(t, "GET", "/api/v1/links/editme", ""), 404, "not_found")
}

// An edit keeps the link's visit statistics.
func TestPatchKeepsStats(t *testing.T) {
	s := start(t, setup{cfg: httpapi.Config{AdminKey: "k"}, visits: true})
	createLink(t, s, `{"url":"https://counted.example/","slug":"counted"}`)
	for range 3 {
		s.do(t, "GET", "/counted", "", "User-Agent", "Mozilla/5.0 Firefox/120.0")
	}
	total := func() int64 {
		var st struct{ Total int64 }
		r := s.do(t, "GET", "/api/v1/links/counted/stats", "", adminJSON...)
		if err := json.Unmarshal([]byte(r.Body), &st); err != nil {
			t.Fatalf("stats %d %s: %v", r.Status, r.Body, err)
		}
		return st.Total
	}
	eventually.True(t, 10*time.Second, "3 visits counted", func() bool { return total() == 3 })
	if r := s.do(t, "PATCH", "/api/v1/links/counted", `{"url":"https://moved.example/"}`, adminJSON...); r.Status != 200 {
		t.Fatalf("PATCH: %d %s", r.Status, r.Body)
	}
	if n := total(); n != 3 {
		t.Errorf("visits after the edit = %d, want 3", n)
	}
	s.do(t, "GET", "/counted", "", "User-Agent", "Mozilla/5.0 Firefox/120.0")
	eventually.True(t, 10*time.Second, "4 visits counted", func() bool { return total() == 4 })
}

func TestListFilters(t *testing.T) {
	s := start(t, setup{cfg: httpapi.Config{AdminKey: "k"}})
	ctx := context.Background()
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var all []shortener.Link
	for i := range 12 {
		l := shortener.Link{ID: fmt.Sprintf("link%02d", i), URL: fmt.Sprintf("https://site%d.example/Page", i%3),
			CreatedAt: base.Add(time.Duration(i/2) * time.Hour)} // two links per hour: ties broken by id
		if i%2 == 0 {
			l.Tags = []string{"even"}
		}
		if err := s.Store.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
		all = append(all, l)
	}
	newestFirst := func(match func(shortener.Link) bool) []string {
		var ids []string
		for i := len(all) - 1; i >= 0; i-- {
			if match(all[i]) {
				ids = append(ids, all[i].ID)
			}
		}
		return ids
	}
	list := func(query string, limit int) []string {
		var ids []string
		cursor := ""
		for pages := 0; ; pages++ {
			path := fmt.Sprintf("/api/v1/links?limit=%d&%s", limit, query)
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			r := s.do(t, "GET", path, "", adminJSON...)
			var p struct {
				Links []linkBody
				Next  *string `json:"next_cursor"`
			}
			if r.Status != 200 || json.Unmarshal([]byte(r.Body), &p) != nil {
				t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
			}
			if len(p.Links) > limit || pages > 20 {
				t.Fatalf("GET %s: %d links, or too many pages", path, len(p.Links))
			}
			for _, l := range p.Links {
				ids = append(ids, l.ID)
			}
			if p.Next == nil {
				return ids
			}
			cursor = *p.Next
		}
	}
	h := func(n int) time.Time { return base.Add(time.Duration(n) * time.Hour) }
	for _, tt := range []struct {
		query string
		match func(shortener.Link) bool
	}{
		{"order=newest", func(shortener.Link) bool { return true }},
		{"tag=even", func(l shortener.Link) bool { return len(l.Tags) > 0 }},
		{"q=SITE1", func(l shortener.Link) bool { return strings.Contains(l.URL, "site1") }},
		{"q=link1", func(l shortener.Link) bool { return strings.HasPrefix(l.ID, "link1") }},
		{"created_after=2030-01-01T02:00:00Z", func(l shortener.Link) bool { return !l.CreatedAt.Before(h(2)) }},
		{"created_before=2030-01-01T02:00:00Z", func(l shortener.Link) bool { return l.CreatedAt.Before(h(2)) }},
		{"created_after=2030-01-01T01:00:00Z&created_before=2030-01-01T04:00:00Z&tag=even&q=site",
			func(l shortener.Link) bool {
				return !l.CreatedAt.Before(h(1)) && l.CreatedAt.Before(h(4)) && len(l.Tags) > 0
			}},
		{"tag=none", func(shortener.Link) bool { return false }},
	} {
		want := newestFirst(tt.match)
		for _, limit := range []int{1, 3, 100} {
			if got := list(tt.query, limit); !slices.Equal(got, want) {
				t.Errorf("?%s at %d a page: %v, want %v", tt.query, limit, got, want)
			}
		}
	}
	// Without a filter the store's order stays, every link once.
	if got := list("", 5); len(got) != len(all) {
		t.Errorf("unfiltered listing: %v", got)
	}
	for _, q := range []string{"created_after=yesterday", "created_after=2030-01-02T00:00:00Z&created_before=2030-01-01T00:00:00Z",
		"tag=has%20space", "q=" + strings.Repeat("x", 257), "order=random", "state=gone", "tag=even&cursor=bogus"} {
		wantError(t, s.do(t, "GET", "/api/v1/links?"+q, "", adminJSON...), 400, "invalid_parameter")
	}
	wantError(t, s.do(t, "GET", "/api/v1/links?tag=even", ""), 401, "unauthorized")
}

func TestForwardQuery(t *testing.T) {
	for _, def := range []bool{false, true} {
		t.Run(fmt.Sprint("default=", def), func(t *testing.T) {
			s := start(t, setup{cfg: httpapi.Config{AdminKey: "k", ForwardQuery: def}})
			createLink(t, s, `{"url":"https://shop.example/p?ref=owner#top","slug":"fwd-on","forward_query":true}`)
			createLink(t, s, `{"url":"https://shop.example/p","slug":"fwd-off","forward_query":false}`)
			createLink(t, s, `{"url":"https://shop.example/p","slug":"fwd-default"}`)
			loc := func(path string) string {
				r := s.do(t, "GET", path, "")
				if r.Status != 302 {
					t.Fatalf("GET %s: %d", path, r.Status)
				}
				return r.Header.Get("Location")
			}
			// The visitor's parameters are appended before the fragment; the
			// target's ref wins over the visitor's.
			if got, want := loc("/fwd-on?utm_source=mail&ref=visitor&utm_medium=email"), "https://shop.example/p?ref=owner&utm_source=mail&utm_medium=email#top"; got != want {
				t.Errorf("forwarding link: Location %q, want %q", got, want)
			}
			if got := loc("/fwd-on"); got != "https://shop.example/p?ref=owner#top" {
				t.Errorf("forwarding link without a query: %q", got)
			}
			if got := loc("/fwd-off?utm_source=mail"); got != "https://shop.example/p" {
				t.Errorf("non-forwarding link: %q", got)
			}
			want := "https://shop.example/p"
			if def {
				want += "?utm_source=mail"
			}
			if got := loc("/fwd-default?utm_source=mail"); got != want {
				t.Errorf("link following the server's default (%v): %q, want %q", def, got, want)
			}
			// Turned on by an edit, at once.
			s.do(t, "PATCH", "/api/v1/links/fwd-off", `{"forward_query":true}`, adminJSON...)
			if got := loc("/fwd-off?utm_source=mail"); got != "https://shop.example/p?utm_source=mail" {
				t.Errorf("after turning forwarding on: %q", got)
			}
		})
	}
}

func TestNotFoundAndExpiredURLs(t *testing.T) {
	s := start(t, setup{cfg: httpapi.Config{AdminKey: "k", NotFoundURL: "https://help.example/missing", ExpiredURL: "https://help.example/expired?x=1"}})
	past := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	if err := s.Store.Create(context.Background(), shortener.Link{ID: "oldlink", URL: "https://old.example/", CreatedAt: past.Add(-time.Hour), ExpiresAt: past}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want string }{{"/nothere", "https://help.example/missing"}, {"/oldlink", "https://help.example/expired?x=1"}} {
		r := s.do(t, "GET", tt.path, "")
		if r.Status != 302 || r.Header.Get("Location") != tt.want || r.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: %d Location %q Cache-Control %q, want 302 to %q", tt.path, r.Status, r.Header.Get("Location"), r.Header.Get("Cache-Control"), tt.want)
		}
	}
	// API clients still get the error.
	wantError(t, s.do(t, "GET", "/nothere", "", "Accept", "application/json"), 404, "not_found")
	wantError(t, s.do(t, "GET", "/oldlink", "", "Accept", "application/json"), 410, "expired")

	for _, cfg := range []httpapi.Config{
		{NotFoundURL: "/relative"},
		{NotFoundURL: "ftp://files.example/"},
		{ExpiredURL: "https://"},
		{ExpiredURL: "https://help.example/a b"},
		{PublicURL: "https://sho.rt", NotFoundURL: "https://sho.rt/missing"}, // itself a short link: a loop
		{Domains: []string{"sho.rt", "go.example"}, ExpiredURL: "https://GO.example/gone"},
	} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", cfg)
		}
	}
	for _, cfg := range []httpapi.Config{
		{PublicURL: "https://sho.rt", NotFoundURL: "https://sho.rt/"},
		{PublicURL: "https://sho.rt", NotFoundURL: "https://sho.rt/static/missing.html"},
		{NotFoundURL: "http://help.example:8080/p?q=1"},
	} {
		if err := cfg.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", cfg, err)
		}
	}
}
