package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/httpapi"
)

type keyBody struct {
	ID, Name, Token string
	Scopes          []string
	CreatedAt       string  `json:"created_at"`
	LastUsed        *string `json:"last_used"`
}

// newKey creates a key through the keys API with the admin key.
func newKey(t *testing.T, s *testServer, scopes ...string) keyBody {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"name": "test " + strings.Join(scopes, "+"), "scopes": scopes})
	r := s.do(t, "POST", "/api/v1/keys", string(b), "Authorization", "Bearer root")
	var k keyBody
	if r.Status != 201 || json.Unmarshal([]byte(r.Body), &k) != nil || !strings.HasPrefix(k.Token, "lgk_"+k.ID+"_") {
		t.Fatalf("create key: %d %q", r.Status, r.Body)
	}
	return k
}

// Each route takes the scope it needs: 401 without a valid key, 403 for
// a key without the scope.
func TestAPIKeysAndScopes(t *testing.T) {
	s := start(t, setup{cfg: httpapi.Config{AdminKey: "root", CreateAccess: httpapi.AccessKey}})
	creator := newKey(t, s, "links:create")
	reader := newKey(t, s, "links:read")
	writer := newKey(t, s, "links:write")
	stats := newKey(t, s, "stats:read")
	admin := newKey(t, s, "admin")
	bad := creator.Token[:len(creator.Token)-1] + "x"
	if bad == creator.Token { // the secret's last character was an x already
		bad = creator.Token[:len(creator.Token)-1] + "y"
	}
	body := `{"url":"https://example.com/scoped"}`

	// Creates need links:create.
	wantError(t, s.do(t, "POST", "/api/v1/links", body), 401, "unauthorized")
	wantError(t, s.do(t, "POST", "/shortenURL", `{"OriginalURL":"https://example.com/"}`), 401, "unauthorized")
	wantError(t, s.do(t, "POST", "/api/v1/links", body, "Authorization", "Bearer "+bad), 401, "unauthorized")
	wantError(t, s.do(t, "POST", "/api/v1/links", body, "X-API-Key", reader.Token), 403, "forbidden")
	r := s.do(t, "POST", "/api/v1/links", body, "X-API-Key", creator.Token)
	if r.Status != 201 {
		t.Fatalf("create with links:create: %d %q", r.Status, r.Body)
	}
	id := decodeLink(t, r).ID
	if r := s.do(t, "POST", "/api/v1/links", body, "Authorization", "Bearer "+admin.Token); r.Status != 201 {
		t.Errorf("create with admin: %d", r.Status)
	}
	// Following links needs nothing.
	if r := s.do(t, "GET", "/"+id, ""); r.Status != 302 {
		t.Errorf("redirect: %d", r.Status)
	}
	for _, tt := range []struct {
		method, path string
		ok           keyBody
	}{
		{"GET", "/api/v1/links", reader},
		{"GET", "/api/v1/links/" + id + "/stats", stats},
		{"GET", "/api/v1/keys", admin},
		{"DELETE", "/api/v1/links/" + id, writer},
	} {
		wantError(t, s.do(t, tt.method, tt.path, ""), 401, "unauthorized")
		for _, k := range []keyBody{creator, reader, writer, stats} {
			if k.ID == tt.ok.ID {
				continue
			}
			if r := s.do(t, tt.method, tt.path, "", "X-API-Key", k.Token); r.Status != 403 {
				t.Errorf("%s %s with %v: %d, want 403", tt.method, tt.path, k.Scopes, r.Status)
			}
		}
		if r := s.do(t, tt.method, tt.path, "", "X-API-Key", tt.ok.Token); r.Status/100 != 2 {
			t.Errorf("%s %s with %v: %d %q", tt.method, tt.path, tt.ok.Scopes, r.Status, r.Body)
		}
	}
	// The list shows no secrets.
	l := s.do(t, "GET", "/api/v1/keys", "", "X-API-Key", admin.Token)
	if strings.Contains(l.Body, "lgk_") || !strings.Contains(l.Body, `"id":"`+creator.ID+`"`) {
		t.Errorf("keys list: %q", l.Body)
	}
	for _, bad := range []string{`{"name":"x","scopes":["links:all"]}`, `{"name":"","scopes":["admin"]}`, `{"name":"x"}`, `{"name":"x","scopes":["admin"],"extra":1}`} {
		if r := s.do(t, "POST", "/api/v1/keys", bad, "X-API-Key", "root"); r.Status != 400 {
			t.Errorf("create key %s: %d", bad, r.Status)
		}
	}
	wantError(t, s.do(t, "POST", "/api/v1/keys", `{"name":"x","scopes":["admin"]}`, "X-API-Key", creator.Token), 403, "forbidden")
}

// A revoked key is refused at once by the instance that revoked it, and
// within KeyTTL by another instance over the same store; its last use is
// recorded.
func TestKeyRevocation(t *testing.T) {
	a := start(t, setup{cfg: httpapi.Config{AdminKey: "root", CreateAccess: httpapi.AccessKey}})
	// A second instance over the same store.
	reg := prometheus.NewRegistry()
	hb, err := httpapi.NewHandler(slog.New(slog.DiscardHandler), shortener.NewService(a.Store, shortener.Options{}),
		httpapi.NewMetrics(reg), reg, httpapi.Config{CreateAccess: httpapi.AccessKey, Keys: a.Store})
	if err != nil {
		t.Fatal(err)
	}
	b := &testServer{URL: "http://" + serve(t, hb, httpapi.ServerConfig{}), client: a.client}
	k := newKey(t, a, "links:create")
	body := `{"url":"https://example.com/revoked"}`
	for _, s := range []*testServer{a, b} {
		if r := s.do(t, "POST", "/api/v1/links", body, "X-API-Key", k.Token); r.Status != 201 {
			t.Fatalf("create before the revocation: %d %q", r.Status, r.Body)
		}
	}
	var listed string
	if !eventually.Within(10*time.Second, func() bool {
		r := a.do(t, "GET", "/api/v1/keys", "", "X-API-Key", "root")
		listed = r.Body
		var list struct{ Keys []keyBody }
		json.Unmarshal([]byte(r.Body), &list)
		return len(list.Keys) == 1 && list.Keys[0].LastUsed != nil
	}) {
		t.Fatalf("last_used never set: %q", listed)
	}
	if r := a.do(t, "DELETE", "/api/v1/keys/"+k.ID, "", "X-API-Key", "root"); r.Status != 204 {
		t.Fatalf("revoke: %d %q", r.Status, r.Body)
	}
	wantError(t, a.do(t, "POST", "/api/v1/links", body, "X-API-Key", k.Token), 401, "unauthorized")
	eventually.True(t, httpapi.KeyTTL+2*time.Second, "the other instance to refuse the revoked key", func() bool {
		return b.do(t, "POST", "/api/v1/links", body, "X-API-Key", k.Token).Status == 401
	})
	wantError(t, a.do(t, "DELETE", "/api/v1/keys/"+k.ID, "", "X-API-Key", "root"), 404, "not_found")
}
