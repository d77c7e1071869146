package admin_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/admin"
	"github.com/linkgate/linkgate/gateway/bolt"
	"github.com/linkgate/linkgate/internal/testcert"
)

// TestSSLResource: /apisix/admin/ssl stores checked certificates with the
// key encrypted as APISIX does, never shows a private key, derives the
// validity from the certificate, and refuses bad input with a 400 that
// says what is wrong.
func TestSSLResource(t *testing.T) {
	store, err := bolt.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	keys, _ := gateway.NewKeyCipher(gateway.DefaultKeySalt)
	reg := gateway.NewRegistryWithKeys(keys) // ssl resources need no plugin
	api := admin.NewHandler(slog.New(slog.DiscardHandler), store, reg, admin.Options{
		AdminKeys: []string{adminKey}, AllowAdmin: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/24")},
	})
	do := func(method, path string, body any) (int, map[string]any) {
		t.Helper()
		var r io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			r = strings.NewReader(string(b))
		}
		req := httptest.NewRequest(method, path, r)
		req.RemoteAddr = "127.0.0.1:5000"
		req.Header.Set("X-API-KEY", adminKey)
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %s: %d %q", method, path, rec.Code, rec.Body)
		}
		if strings.Contains(rec.Body.String(), "PRIVATE KEY") {
			t.Errorf("%s %s answered a private key: %s", method, path, rec.Body)
		}
		return rec.Code, out
	}
	ca := testcert.NewCA(t, "admin test CA")
	now := time.Now()
	good := ca.Issue(t, testcert.Options{DNS: []string{"test.com"}})
	other := ca.Issue(t, testcert.Options{DNS: []string{"other.com"}})
	expired := ca.Issue(t, testcert.Options{DNS: []string{"test.com"}, NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-time.Hour)})
	future := ca.Issue(t, testcert.Options{DNS: []string{"test.com"}, NotBefore: now.Add(time.Hour), NotAfter: now.Add(48 * time.Hour)})

	code, out := do("PUT", "/apisix/admin/ssl/1", map[string]any{"cert": good.CertPEM, "key": good.KeyPEM, "snis": []string{"test.com", "*.test.com"}})
	if code != http.StatusCreated {
		t.Fatalf("PUT: %d %v", code, out)
	}
	stored, err := store.Get(t.Context(), gateway.KindSSL, "1")
	if err != nil {
		t.Fatal(err)
	}
	var value map[string]any
	json.Unmarshal(stored.Value, &value)
	if k, _ := value["key"].(string); k == "" || strings.HasPrefix(k, "---") {
		t.Errorf("stored key %.40q, want it encrypted", k)
	}
	if got := int64(value["validity_end"].(float64)); got != good.Leaf.NotAfter.Unix() {
		t.Errorf("validity_end %d, want the certificate's %d", got, good.Leaf.NotAfter.Unix())
	}
	code, out = do("GET", "/apisix/admin/ssl/1", nil)
	node, _ := out["node"].(map[string]any)
	v, _ := node["value"].(map[string]any)
	if code != 200 || v["cert"] != good.CertPEM || v["key"] != nil || v["validity_start"] == nil {
		t.Errorf("GET: %d %v", code, out)
	}
	if code, out = do("GET", "/apisix/admin/ssl", nil); code != 200 {
		t.Errorf("list: %d %v", code, out)
	}
	// PATCH keeps the encrypted key and checks the result.
	if code, out = do("PATCH", "/apisix/admin/ssl/1", map[string]any{"snis": []string{"test.com"}}); code != http.StatusCreated {
		t.Errorf("PATCH: %d %v", code, out)
	}
	if code, out = do("PATCH", "/apisix/admin/ssl/1", map[string]any{"key": other.KeyPEM}); code != 400 {
		t.Errorf("PATCH with another certificate's key: %d %v", code, out)
	}
	if code, out = do("POST", "/apisix/admin/ssl", map[string]any{"cert": good.CertPEM, "key": good.KeyPEM, "sni": "test.com"}); code != http.StatusCreated {
		t.Errorf("POST: %d %v", code, out)
	}

	for _, tc := range []struct {
		name string
		body map[string]any
		msg  string
	}{
		{"mismatched pair", map[string]any{"cert": good.CertPEM, "key": other.KeyPEM, "sni": "test.com"}, "the private key does not match the certificate"},
		{"expired", map[string]any{"cert": expired.CertPEM, "key": expired.KeyPEM, "sni": "test.com"}, "the certificate expired at "},
		{"not yet valid", map[string]any{"cert": future.CertPEM, "key": future.KeyPEM, "sni": "test.com"}, "the certificate is not valid yet"},
		{"malformed cert", map[string]any{"cert": strings.Repeat("A", 200), "key": good.KeyPEM, "sni": "test.com"}, "failed to parse cert: "},
		{"malformed key", map[string]any{"cert": good.CertPEM, "key": "-----BEGIN PRIVATE KEY-----\n" + strings.Repeat("A", 200) + "\n-----END PRIVATE KEY-----\n", "sni": "test.com"}, "failed to parse key: "},
		{"sni not a host name", map[string]any{"cert": good.CertPEM, "key": good.KeyPEM, "sni": "a..b"}, `invalid sni "a..b": not a host name`},
		{"sni pattern", map[string]any{"cert": good.CertPEM, "key": good.KeyPEM, "sni": "a b"}, `invalid configuration: property "sni" validation failed`},
		{"no sni", map[string]any{"cert": good.CertPEM, "key": good.KeyPEM}, "invalid configuration: value should match only one schema, but matches none"},
		{"keys without certs", map[string]any{"cert": good.CertPEM, "key": good.KeyPEM, "sni": "test.com", "keys": []string{good.KeyPEM}}, "mismatched number of certs and keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := do("PUT", "/apisix/admin/ssl/9", tc.body)
			msg, _ := out["error_msg"].(string)
			if code != 400 || !strings.Contains(msg, tc.msg) {
				t.Errorf("%d %q, want 400 with %q", code, msg, tc.msg)
			}
		})
	}
	if _, err := store.Get(t.Context(), gateway.KindSSL, "9"); err == nil {
		t.Error("a refused ssl object was stored")
	}
	if code, _ := do("DELETE", "/apisix/admin/ssl/1", nil); code != 200 {
		t.Errorf("DELETE: %d", code)
	}
}
