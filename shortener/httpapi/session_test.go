package httpapi_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener/httpapi"
)

type sessionBody struct {
	SignedIn     bool     `json:"signed_in"`
	Admin        bool     `json:"admin"`
	KeyID        string   `json:"key_id"`
	Scopes       []string `json:"scopes"`
	CSRFToken    string   `json:"csrf_token"`
	CreateAccess string   `json:"create_access"`
}

// signIn signs in with key and returns the session cookie (its value)
// and the session.
func signIn(t *testing.T, s *testServer, key string, hdr ...string) (cookie *http.Cookie, sb sessionBody) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"key": key})
	r := s.do(t, "POST", "/api/v1/session", string(b), append([]string{"Content-Type", "application/json"}, hdr...)...)
	if r.Status != 201 {
		t.Fatalf("sign in: %d %q", r.Status, r.Body)
	}
	if err := json.Unmarshal([]byte(r.Body), &sb); err != nil || !sb.SignedIn || sb.CSRFToken == "" {
		t.Fatalf("sign in: %q (%v)", r.Body, err)
	}
	cookies := (&http.Response{Header: r.Header}).Cookies()
	if len(cookies) != 1 || cookies[0].Name != "linkgate_session" || len(cookies[0].Value) < 40 {
		t.Fatalf("sign in: cookies %v", r.Header.Values("Set-Cookie"))
	}
	return cookies[0], sb
}

// The session cookie is HttpOnly, SameSite=Strict, Path=/, bounded, and
// Secure exactly when the page came over TLS (here: a trusted proxy
// says so); the answer is not cached.
func TestSessionCookie(t *testing.T) {
	loopback := httpapi.NewTrustedProxies([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})
	s := start(t, setup{cfg: httpapi.Config{AdminKey: "root", TrustedProxies: loopback, SessionTTL: 2 * time.Hour}})
	for _, tt := range []struct {
		name   string
		hdr    []string
		secure bool
	}{
		{"http", nil, false},
		{"https at a trusted proxy", []string{"X-Forwarded-Proto", "https"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := `{"key":"root"}`
			r := s.do(t, "POST", "/api/v1/session", b, append([]string{"Content-Type", "application/json"}, tt.hdr...)...)
			if r.Status != 201 {
				t.Fatalf("sign in: %d %q", r.Status, r.Body)
			}
			raw := r.Header.Get("Set-Cookie")
			c := (&http.Response{Header: r.Header}).Cookies()[0]
			if !c.HttpOnly {
				t.Errorf("cookie not HttpOnly: %q", raw)
			}
			if c.SameSite != http.SameSiteStrictMode {
				t.Errorf("cookie not SameSite=Strict: %q", raw)
			}
			if c.Secure != tt.secure {
				t.Errorf("cookie Secure=%v, want %v: %q", c.Secure, tt.secure, raw)
			}
			if c.Path != "/" || c.MaxAge != 7200 {
				t.Errorf("cookie path %q max-age %d, want / and 7200: %q", c.Path, c.MaxAge, raw)
			}
			if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control %q", cc)
			}
			if strings.Contains(r.Body, "root") {
				t.Errorf("the answer repeats the key: %q", r.Body)
			}
		})
	}
}

// A session authorises what its key may do; a state-changing request by
// cookie needs the session's CSRF token; sign-out revokes the session on
// the server (the old cookie, sent again, is nobody); a revoked API key
// ends its sessions.
func TestSessionScopesCSRFAndSignOut(t *testing.T) {
	s := start(t, setup{cfg: httpapi.Config{AdminKey: "root", CreateAccess: httpapi.AccessKey}})
	creator := newKey(t, s, "links:create")
	writer := newKey(t, s, "links:read", "links:write")
	create := func(t *testing.T, hdr ...string) response {
		return s.do(t, "POST", "/api/v1/links", `{"url":"https://example.com/session"}`, append([]string{"Content-Type", "application/json"}, hdr...)...)
	}
	linkID := decodeLink(t, create(t, "X-API-Key", "root")).ID

	tests := []struct {
		name       string
		key        string
		admin      bool
		scopes     string
		create     int // status of a create with the token
		list       int // of GET /api/v1/links
		deleteLink int // of DELETE with the token
		keys       int // of GET /api/v1/keys
	}{
		{"admin key", "root", true, "links:create,links:read,links:write,stats:read,admin", 201, 200, 204, 200},
		{"links:create key", creator.Token, false, "links:create", 201, 403, 403, 403},
		{"links:read+write key", writer.Token, false, "links:read,links:write", 403, 200, 404, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, sb := signIn(t, s, tt.key)
			cookie := "Cookie"
			cv := c.Name + "=" + c.Value
			if sb.Admin != tt.admin || strings.Join(sb.Scopes, ",") != tt.scopes {
				t.Errorf("session admin=%v scopes %v, want %v %s", sb.Admin, sb.Scopes, tt.admin, tt.scopes)
			}
			// GET /api/v1/session tells the page the same, with the token.
			var got sessionBody
			if r := s.do(t, "GET", "/api/v1/session", "", cookie, cv); r.Status != 200 || json.Unmarshal([]byte(r.Body), &got) != nil || got.CSRFToken != sb.CSRFToken {
				t.Errorf("GET session: %d %q", r.Status, r.Body)
			}
			// Without the CSRF token (or with another), no state change.
			wantError(t, create(t, cookie, cv), 403, "csrf_token_invalid")
			wantError(t, create(t, cookie, cv, "X-CSRF-Token", sb.CSRFToken+"x"), 403, "csrf_token_invalid")
			wantError(t, s.do(t, "DELETE", "/api/v1/links/"+linkID, "", cookie, cv), 403, "csrf_token_invalid")
			if r := create(t, cookie, cv, "X-CSRF-Token", sb.CSRFToken); r.Status != tt.create {
				t.Errorf("create with the token: %d %q, want %d", r.Status, r.Body, tt.create)
			}
			if r := s.do(t, "GET", "/api/v1/links", "", cookie, cv); r.Status != tt.list {
				t.Errorf("list: %d %q, want %d", r.Status, r.Body, tt.list)
			}
			if r := s.do(t, "GET", "/api/v1/keys", "", cookie, cv); r.Status != tt.keys {
				t.Errorf("keys: %d %q, want %d", r.Status, r.Body, tt.keys)
			}
			if r := s.do(t, "DELETE", "/api/v1/links/"+linkID, "", cookie, cv, "X-CSRF-Token", sb.CSRFToken); r.Status != tt.deleteLink {
				t.Errorf("delete with the token: %d %q, want %d", r.Status, r.Body, tt.deleteLink)
			}
			// A key in the header needs no token, cookie or not.
			if r := s.do(t, "GET", "/api/v1/links", "", cookie, cv, "X-API-Key", "root"); r.Status != 200 {
				t.Errorf("list by key: %d", r.Status)
			}

			// Sign-out needs the token, clears the cookie and revokes the
			// session: the same cookie, sent again, is nobody.
			wantError(t, s.do(t, "DELETE", "/api/v1/session", "", cookie, cv), 403, "csrf_token_invalid")
			r := s.do(t, "DELETE", "/api/v1/session", "", cookie, cv, "X-CSRF-Token", sb.CSRFToken)
			if r.Status != 204 || !strings.Contains(r.Header.Get("Set-Cookie"), "linkgate_session=;") {
				t.Errorf("sign out: %d, Set-Cookie %q", r.Status, r.Header.Get("Set-Cookie"))
			}
			wantError(t, create(t, cookie, cv, "X-CSRF-Token", sb.CSRFToken), 401, "unauthorized")
			wantError(t, s.do(t, "GET", "/api/v1/links", "", cookie, cv), 401, "unauthorized")
			if r := s.do(t, "GET", "/api/v1/session", "", cookie, cv); r.Status != 200 || !strings.Contains(r.Body, `"signed_in":false`) {
				t.Errorf("session after sign-out: %d %q", r.Status, r.Body)
			}
		})
	}

	t.Run("revoked key", func(t *testing.T) {
		k := newKey(t, s, "links:read")
		c, _ := signIn(t, s, k.Token)
		cv := c.Name + "=" + c.Value
		if r := s.do(t, "GET", "/api/v1/links", "", "Cookie", cv); r.Status != 200 {
			t.Fatalf("list: %d", r.Status)
		}
		if r := s.do(t, "DELETE", "/api/v1/keys/"+k.ID, "", "X-API-Key", "root"); r.Status != 204 {
			t.Fatalf("revoke: %d", r.Status)
		}
		wantError(t, s.do(t, "GET", "/api/v1/links", "", "Cookie", cv), 401, "unauthorized")
	})
	t.Run("wrong key", func(t *testing.T) {
		wantError(t, s.do(t, "POST", "/api/v1/session", `{"key":"nope"}`), 401, "unauthorized")
		wantError(t, s.do(t, "POST", "/api/v1/session", `{"key":""}`), 400, "invalid_parameter")
		wantError(t, s.do(t, "POST", "/api/v1/session", `{"token":"root"}`), 400, "invalid_json")
	})
}

// A session ends by itself after Config.SessionTTL.
func TestSessionExpires(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	s := start(t, setup{cfg: httpapi.Config{AdminKey: "root", SessionTTL: time.Hour, Now: clock}})
	c, _ := signIn(t, s, "root")
	cv := c.Name + "=" + c.Value
	now.Add(int64(59 * time.Minute))
	if r := s.do(t, "GET", "/api/v1/links", "", "Cookie", cv); r.Status != 200 {
		t.Fatalf("list within the hour: %d", r.Status)
	}
	now.Add(int64(time.Minute))
	wantError(t, s.do(t, "GET", "/api/v1/links", "", "Cookie", cv), 401, "unauthorized")
}

// Sign-ins are limited per client address (429 with Retry-After), right
// or wrong, and every failed one is logged with the client's address.
func TestSignInRateLimitAndLog(t *testing.T) {
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	h, _ := newHandlerLogger(t, setup{cfg: httpapi.Config{AdminKey: "root", SignInRate: httpapi.Rate{N: 3, Per: time.Hour}}}, logger)
	s := &testServer{URL: "http://" + serve(t, h, httpapi.ServerConfig{}), client: http.DefaultClient}
	wantError(t, s.do(t, "POST", "/api/v1/session", `{"key":"guess1"}`), 401, "unauthorized")
	wantError(t, s.do(t, "POST", "/api/v1/session", `{"key":"guess2"}`), 401, "unauthorized")
	signIn(t, s, "root")
	r := s.do(t, "POST", "/api/v1/session", `{"key":"root"}`)
	wantError(t, r, 429, "rate_limited")
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After")
	}
	if n := strings.Count(logs.String(), `"msg":"sign-in failed"`); n != 2 || !strings.Contains(logs.String(), `"client":"127.0.0.1"`) {
		t.Errorf("%d failed sign-ins logged, want 2 with the client:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "guess") {
		t.Errorf("a tried key was logged:\n%s", logs.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
