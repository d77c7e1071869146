package httpapi_test

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/linkgate/linkgate/shortener"
)

// Seed compatibility: the cases of research/shortener.md that linkgate
// keeps (C1, C2, C4, C9, C10, C12, C14, C16, C24), byte for byte where the
// seed's wire format is defined.

var seedID = regexp.MustCompile(`^[A-Za-z0-9_-]{10}$`)

// seedCreateBody matches the seed's 4-space-indented, no-trailing-newline
// create answer and returns the id.
var seedCreateBody = regexp.MustCompile(`^\{\n    "shortURL": "([A-Za-z0-9_-]{10})",\n    "originalURL": "(.*)"\n\}$`)

func wantSeedCreated(t *testing.T, r response, wantURLJSON string) string {
	t.Helper()
	if r.Status != 201 {
		t.Fatalf("status %d, want 201; body %q", r.Status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	m := seedCreateBody.FindStringSubmatch(r.Body)
	if m == nil {
		t.Fatalf("body %q does not have the seed's shape", r.Body)
	}
	if m[2] != wantURLJSON {
		t.Errorf("originalURL %q, want %q", m[2], wantURLJSON)
	}
	return m[1]
}

func TestSeedCompatibility(t *testing.T) {
	s := start(t, setup{})
	tests := []struct {
		name, body string
		hdr        []string
		wantURL    string // as it appears inside the JSON string
	}{
		{"C1", `{"OriginalURL":"https://aws.amazon.com/ec2/graviton/"}`, []string{"Content-Type", "application/json"}, "https://aws.amazon.com/ec2/graviton/"},
		{"C2 originalURL", `{"originalURL":"https://a.example/2"}`, nil, "https://a.example/2"},
		{"C2 originalurl", `{"originalurl":"https://a.example/3"}`, nil, "https://a.example/3"},
		{"C2 ORIGINALURL", `{"ORIGINALURL":"https://a.example/4"}`, nil, "https://a.example/4"},
		{"C3 last key wins", `{"OriginalURL":"https://a.example/a","originalURL":"https://b.example/b"}`, nil, "https://b.example/b"},
		{"C4 text/plain", `{"OriginalURL":"https://c4.example/"}`, []string{"Content-Type", "text/plain"}, "https://c4.example/"},
		{"C4 form", `{"OriginalURL":"https://c4.example/f"}`, []string{"Content-Type", "application/x-www-form-urlencoded"}, "https://c4.example/f"},
		{"C4 none", `{"OriginalURL":"https://c4.example/n"}`, nil, "https://c4.example/n"},
		{"C9 unknown fields and shortURL ignored", `{"OriginalURL":"https://c.example/","shortURL":"mine","foo":1}`, nil, "https://c.example/"},
		{"C10 two values", `{"OriginalURL":"https://x.example/"}{"OriginalURL":"https://y.example/"}`, nil, "https://x.example/"},
		{"C10 trailing junk", `{"OriginalURL":"https://x.example/t"} trailing`, nil, "https://x.example/t"},
		{"C10 whitespace", " \n\t{\"OriginalURL\":\"https://x.example/w\"}\n ", nil, "https://x.example/w"},
		{"C12 HTML escaping", `{"originalURL":"https://a.example/x?a=1&b=<2>"}`, nil, `https://a.example/x?a=1\u0026b=\u003c2\u003e`},
		{"C12 raw UTF-8", `{"originalURL":"https://a.example/über"}`, nil, "https://a.example/über"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.do(t, "POST", "/shortenURL", tt.body, tt.hdr...)
			id := wantSeedCreated(t, r, tt.wantURL)
			if seedID.FindString(id) == "" {
				t.Fatalf("id %q", id)
			}
			// C14/C16: the lookup answers the URL as a JSON string, same
			// escaping; a query string is ignored.
			for _, path := range []string{"/getFullURL/" + id, "/getFullURL/" + id + "?x=1"} {
				g := s.do(t, "GET", path, "")
				if g.Status != 200 || g.Body != `"`+tt.wantURL+`"` || g.Header.Get("Content-Type") != "application/json; charset=utf-8" {
					t.Errorf("GET %s = %d %q (%s), want 200 %q", path, g.Status, g.Body, g.Header.Get("Content-Type"), `"`+tt.wantURL+`"`)
				}
			}
		})
	}
}

func TestSeedC14ExactBody(t *testing.T) {
	s := start(t, setup{})
	r := s.do(t, "POST", "/shortenURL", `{"OriginalURL":"https://h.example/p?q=1&r=2"}`)
	id := wantSeedCreated(t, r, `https://h.example/p?q=1\u0026r=2`)
	g := s.do(t, "GET", "/getFullURL/"+id, "")
	if g.Status != 200 || g.Body != `"https://h.example/p?q=1\u0026r=2"` {
		t.Errorf("C14: %d %q", g.Status, g.Body)
	}
}

// The seed's bugs, fixed on purpose (README "Differences from the sample app").
func TestSeedDifferences(t *testing.T) {
	s := start(t, setup{})
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"C5 empty object: no URL", "POST", "/shortenURL", `{}`, 400, "invalid_url"},
		{"C5 null", "POST", "/shortenURL", `null`, 400, "invalid_url"},
		{"C6 empty body", "POST", "/shortenURL", ``, 400, "invalid_json"},
		{"C7 form body", "POST", "/shortenURL", `foo=bar&baz=quux`, 400, "invalid_json"},
		{"C8 string", "POST", "/shortenURL", `"https://x"`, 400, "invalid_json"},
		{"C8 array", "POST", "/shortenURL", `[]`, 400, "invalid_json"},
		{"C8 number URL", "POST", "/shortenURL", `{"OriginalURL":123}`, 400, "invalid_json"},
		{"C11 javascript", "POST", "/shortenURL", `{"OriginalURL":"javascript:alert(1)"}`, 400, "scheme_not_allowed"},
		{"relative URL", "POST", "/shortenURL", `{"OriginalURL":"x"}`, 400, "invalid_url"},
		{"C15 unknown id", "GET", "/getFullURL/doesNotExist", "", 404, "not_found"},
		{"C17 no id", "GET", "/getFullURL/", "", 404, "not_found"},
		{"C19 two segments", "GET", "/getFullURL/a/b", "", 404, "not_found"},
		{"C19 encoded slash", "GET", "/getFullURL/a%2Fb", "", 404, "not_found"},
		{"C20 POST getFullURL", "POST", "/getFullURL/x", "", 405, "method_not_allowed"},
		{"C20 GET shortenURL", "GET", "/shortenURL", "", 405, "method_not_allowed"},
		{"C23 URL over the limit", "POST", "/shortenURL", `{"OriginalURL":"https://x.example/` + strings.Repeat("a", 3000) + `"}`, 400, "url_too_long"},
		{"C23 body over 8 KiB", "POST", "/shortenURL", `{"OriginalURL":"https://x.example/` + strings.Repeat("a", 9000) + `"}`, 413, "payload_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, s.do(t, tt.method, tt.path, tt.body), tt.status, tt.code)
		})
	}
}

// C24: 10⁵ creates, all ids well-formed and distinct, every one stored.
// The requests go straight into the handler (the wire format is covered
// above), so the test stays affordable under -race.
func TestSeedC24ManyCreates(t *testing.T) {
	h, store := newHandler(t, setup{})
	const n, workers = 100_000, 64
	ids := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				body := fmt.Sprintf(`{"OriginalURL":"https://c24.example/%d"}`, i)
				status, out := fuzzPost(h, "/shortenURL", []byte(body))
				m := seedCreateBody.FindSubmatch(out)
				if status != 201 || m == nil || string(m[2]) != fmt.Sprintf("https://c24.example/%d", i) {
					t.Errorf("create %d: %d %q", i, status, out)
					return
				}
				ids[w] = append(ids[w], string(m[1]))
			}
		})
	}
	wg.Wait()
	seen := make(map[string]bool, n)
	for _, list := range ids {
		for _, id := range list {
			if !seedID.MatchString(id) {
				t.Fatalf("id %q", id)
			}
			if seen[id] {
				t.Fatalf("duplicate id %q", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != n {
		t.Fatalf("%d ids, want %d", len(seen), n)
	}
	var total int
	for cursor := ""; ; {
		p, err := store.List(t.Context(), cursor, shortener.MaxPageSize)
		if err != nil {
			t.Fatal(err)
		}
		total += len(p.Links)
		if cursor = p.Next; cursor == "" {
			break
		}
	}
	if total != n {
		t.Fatalf("store holds %d links, want %d", total, n)
	}
}
