package admin_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/admin"
	"github.com/linkgate/linkgate/gateway/bolt"
	"github.com/linkgate/linkgate/gateway/plugin/keyauth"
	"github.com/linkgate/linkgate/gateway/plugin/limitcount"
	"github.com/linkgate/linkgate/gateway/plugin/prometheus"
	"github.com/linkgate/linkgate/gateway/plugin/proxyrewrite"
	"github.com/linkgate/linkgate/gateway/plugin/redis"
)

var update = flag.Bool("update", false, "rewrite golden files")

const (
	adminKey  = "edd1c9f034335f136f87ad84b625c8f1"
	viewerKey = "4054f7cf07e344346cd3f287985e76a2"
)

// The seed article's route registrations, byte for byte (the -d bodies of
// its curl commands). cmd/linkgate's e2e test and make bench-gateway send
// the same files.
var (
	seedAnything     = readSeed("route_anything.json")
	seedHello        = readSeed("route_hello.json")
	seedHelloPlugins = readSeed("route_hello_plugins.json")
)

func readSeed(name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", "seed", name))
	if err != nil {
		panic(err)
	}
	return string(b)
}

func registry() *gateway.Registry {
	return gateway.NewRegistry(limitcount.New(slog.New(slog.DiscardHandler), redis.NewPool()), prometheus.New(), keyauth.New(), proxyrewrite.New())
}

func newAPI(t *testing.T, v3 bool) http.Handler {
	t.Helper()
	store, err := bolt.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return admin.NewHandler(slog.New(slog.DiscardHandler), store, registry(), admin.Options{
		AdminKeys:  []string{adminKey},
		ViewerKeys: []string{viewerKey},
		AllowAdmin: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/24")},
		V3:         v3,
		Now:        func() time.Time { return time.Unix(1654560000, 0) },
	})
}

type call struct {
	name, method, path, body string
	key                      string // X-API-KEY; "-" sends none
	remote                   string
	header                   map[string]string
}

// run sends the calls in order to one API and compares each answer with
// testdata/<dir>/<name>.golden.
func run(t *testing.T, dir string, h http.Handler, calls []call) {
	t.Helper()
	for _, c := range calls {
		req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		req.RemoteAddr = "127.0.0.1:40000"
		if c.remote != "" {
			req.RemoteAddr = c.remote
		}
		switch c.key {
		case "":
			req.Header.Set("X-API-KEY", adminKey)
		case "-":
		default:
			req.Header.Set("X-API-KEY", c.key)
		}
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var got bytes.Buffer
		fmt.Fprintf(&got, "%s %s\n%d\n", c.method, c.path, rec.Code)
		for _, k := range []string{"Content-Type", "X-Api-Version"} {
			if v := rec.Header().Get(k); v != "" {
				fmt.Fprintf(&got, "%s: %s\n", k, v)
			}
		}
		got.WriteString("\n")
		body, _ := io.ReadAll(rec.Body)
		got.Write(body)
		golden := filepath.Join("testdata", dir, c.name+".golden")
		if *update {
			if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%s: %v (run go test -update)", c.name, err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%s: got\n%s\nwant\n%s", c.name, got.Bytes(), want)
		}
	}
}

func TestAdminV2(t *testing.T) {
	h := newAPI(t, false)
	big := `{"uri":"/x","desc":"` + strings.Repeat("a", admin.MaxBody) + `"}`
	run(t, "v2", h, []call{
		// The seed's commands, verbatim.
		{name: "01_seed_put_anything", method: "PUT", path: "/apisix/admin/routes/1", body: seedAnything},
		{name: "02_seed_put_hello_replaces", method: "PUT", path: "/apisix/admin/routes/1", body: seedHello},
		{name: "03_seed_put_hello_plugins", method: "PUT", path: "/apisix/admin/routes/1", body: seedHelloPlugins},
		{name: "04_get_route", method: "GET", path: "/apisix/admin/routes/1"},
		{name: "05_put_upstream", method: "PUT", path: "/apisix/admin/upstreams/1", body: `{"type":"roundrobin","nodes":[{"host":"127.0.0.1","port":1980,"weight":1}]}`},
		{name: "06_put_route_by_upstream_id", method: "PUT", path: "/apisix/admin/routes/2", body: `{"uri":"/two","upstream_id":1}`},
		{name: "07_list_routes", method: "GET", path: "/apisix/admin/routes"},
		{name: "08_post_route", method: "POST", path: "/apisix/admin/routes", body: `{"uri":"/posted","upstream_id":"1"}`},
		{name: "09_put_id_in_body", method: "PUT", path: "/apisix/admin/routes", body: `{"id":"3","uri":"/three","plugins":{}}`},
		{name: "10_delete_upstream_in_use", method: "DELETE", path: "/apisix/admin/upstreams/1"},
		{name: "11_patch_route", method: "PATCH", path: "/apisix/admin/routes/1", body: `{"desc":"patched","plugins":{"prometheus":null}}`},
		{name: "12_patch_sub_path", method: "PATCH", path: "/apisix/admin/routes/1/upstream/nodes", body: `{"127.0.0.1:1981":2}`},
		{name: "13_delete_route", method: "DELETE", path: "/apisix/admin/routes/2"},
		{name: "14_delete_missing", method: "DELETE", path: "/apisix/admin/routes/2"},
		{name: "15_get_missing", method: "GET", path: "/apisix/admin/routes/404"},
		{name: "16_service", method: "PUT", path: "/apisix/admin/services/s1", body: `{"upstream_id":"1","hosts":["api.example.com"],"plugins":{"limit-count":{"count":10,"time_window":1}}}`},
		{name: "17_route_on_service", method: "PUT", path: "/apisix/admin/routes/4", body: `{"uri":"/svc/*","service_id":"s1"}`},
		{name: "18_delete_service_in_use", method: "DELETE", path: "/apisix/admin/services/s1"},
		{name: "19_consumer", method: "PUT", path: "/apisix/admin/consumers", body: `{"username":"jack","plugins":{"key-auth":{"key":"auth-one"}}}`},
		{name: "20_global_rule", method: "PUT", path: "/apisix/admin/global_rules/1", body: `{"plugins":{"prometheus":{}}}`},
		{name: "21_plugin_config", method: "PUT", path: "/apisix/admin/plugin_configs/1", body: `{"plugins":{"proxy-rewrite":{"uri":"/rewritten"}}}`},
		{name: "22_plugins_list", method: "GET", path: "/apisix/admin/plugins/list"},
		{name: "23_viewer_get", method: "GET", path: "/apisix/admin/routes/1", key: viewerKey},
		// Errors.
		{name: "30_no_key", method: "GET", path: "/apisix/admin/routes", key: "-"},
		{name: "31_wrong_key", method: "GET", path: "/apisix/admin/routes", key: "nope"},
		{name: "32_viewer_put", method: "PUT", path: "/apisix/admin/routes/9", body: seedHello, key: viewerKey},
		{name: "33_key_in_query", method: "GET", path: "/apisix/admin/routes/1?api_key=" + adminKey, key: "-"},
		{name: "34_key_in_cookie", method: "GET", path: "/apisix/admin/routes/1", key: "-", header: map[string]string{"Cookie": "x_api_key=" + adminKey}},
		{name: "35_not_allowed_ip", method: "GET", path: "/apisix/admin/routes", remote: "10.1.2.3:5555"},
		{name: "36_unknown_resource", method: "GET", path: "/apisix/admin/nothing"},
		{name: "37_bad_json", method: "PUT", path: "/apisix/admin/routes/9", body: `{"uri":`},
		{name: "38_invalid_method", method: "PUT", path: "/apisix/admin/routes/9", body: `{"methods":["invalid_method"],"uri":"/index.html"}`},
		{name: "39_host_and_hosts", method: "PUT", path: "/apisix/admin/routes/9", body: `{"uri":"/x","host":"a.com","hosts":["b.com"]}`},
		{name: "40_unknown_plugin", method: "PUT", path: "/apisix/admin/routes/9", body: `{"uri":"/x","plugins":{"nope":{}}}`},
		{name: "41_plugin_schema", method: "PUT", path: "/apisix/admin/routes/9", body: `{"uri":"/x","plugins":{"limit-count":{"time_window":60}}}`},
		{name: "42_wrong_id", method: "PUT", path: "/apisix/admin/routes/9", body: `{"id":3,"uri":"/index.html"}`},
		{name: "43_missing_id", method: "PUT", path: "/apisix/admin/routes", body: `{"uri":"/index.html"}`},
		{name: "44_post_with_id", method: "POST", path: "/apisix/admin/routes", body: `{"id":"5","uri":"/index.html"}`},
		{name: "45_missing_upstream", method: "PUT", path: "/apisix/admin/routes/9", body: `{"uri":"/x","upstream_id":"99"}`},
		{name: "46_missing_uri", method: "PUT", path: "/apisix/admin/routes/9", body: `{"upstream_id":"1"}`},
		{name: "47_unknown_field_kept", method: "PUT", path: "/apisix/admin/routes/10", body: `{"uri":"/x","invalid_property":1,"plugins":{}}`},
		{name: "48_bad_node_weight", method: "PUT", path: "/apisix/admin/upstreams/9", body: `{"type":"roundrobin","nodes":{"127.0.0.1:80":-1}}`},
		{name: "49_chash_without_key", method: "PUT", path: "/apisix/admin/upstreams/9", body: `{"type":"chash","nodes":{"127.0.0.1:80":1}}`},
		{name: "50_body_too_large", method: "PUT", path: "/apisix/admin/routes/9", body: big},
		{name: "51_invalid_id", method: "PUT", path: "/apisix/admin/routes/bad$id", body: `{"uri":"/x"}`},
		{name: "52_patch_missing", method: "PATCH", path: "/apisix/admin/routes/404", body: `{"desc":"x"}`},
		{name: "53_count_too_small", method: "PUT", path: "/apisix/admin/routes/9", body: `{"uri":"/x","plugins":{"limit-count":{"count":0,"time_window":60}}}`},
		{name: "54_consumer_post", method: "POST", path: "/apisix/admin/consumers", body: `{"username":"x"}`},
		{name: "55_redis_needs_host", method: "PUT", path: "/apisix/admin/routes/9", body: `{"uri":"/x","plugins":{"limit-count":{"count":1,"time_window":60,"policy":"redis"}}}`},
		{name: "56_bad_vars", method: "PUT", path: "/apisix/admin/routes/9", body: `{"uri":"/x","plugins":{},"vars":[["arg_a","<>","b"]]}`},
		{name: "57_route_without_upstream", method: "PUT", path: "/apisix/admin/routes/9", body: `{"uri":"/x"}`},
		{name: "58_global_rule_post", method: "POST", path: "/apisix/admin/global_rules", body: `{"plugins":{}}`},
		{name: "59_schema_route", method: "GET", path: "/apisix/admin/schema/global_rule"},
		{name: "60_plugin_schema", method: "GET", path: "/apisix/admin/plugins/key-auth"},
		{name: "61_reload", method: "PUT", path: "/apisix/admin/plugins/reload"},
		// APISIX 3.x's credentials, with 2.14's envelopes.
		{name: "62_credential_put", method: "PUT", path: "/apisix/admin/consumers/jack/credentials/a", body: `{"plugins":{"key-auth":{"key":"cred-a"}}}`},
		{name: "63_credential_list", method: "GET", path: "/apisix/admin/consumers/jack/credentials"},
		{name: "64_consumers_list_leaves_credentials_out", method: "GET", path: "/apisix/admin/consumers"},
		{name: "65_credential_no_consumer", method: "PUT", path: "/apisix/admin/consumers/nobody/credentials/a", body: `{"plugins":{"key-auth":{"key":"cred-x"}}}`},
		{name: "66_credential_duplicate_of_consumer", method: "PUT", path: "/apisix/admin/consumers/jack/credentials/b", body: `{"plugins":{"key-auth":{"key":"auth-one"}}}`},
		{name: "67_credential_not_auth", method: "PUT", path: "/apisix/admin/consumers/jack/credentials/b", body: `{"plugins":{"prometheus":{}}}`},
		{name: "68_consumer_delete", method: "DELETE", path: "/apisix/admin/consumers/jack"},
		{name: "69_credential_gone", method: "GET", path: "/apisix/admin/consumers/jack/credentials/a"},
		{name: "70_configs_validate_credentials", method: "POST", path: "/apisix/admin/configs/validate",
			body: `{"consumers":[{"username":"jack"},{"id":"jack/credentials/a","plugins":{"key-auth":{"key":"k"}}},{"id":"jack/credentials/b","plugins":{"prometheus":{}}}]}`},
		{name: "71_consumer_needs_auth_plugin", method: "PUT", path: "/apisix/admin/consumers", body: `{"username":"jim","plugins":{"prometheus":{}}}`},
	})
}

func TestAdminV3(t *testing.T) {
	h := newAPI(t, true)
	calls := []call{
		{name: "01_put", method: "PUT", path: "/apisix/admin/routes/1", body: seedHello},
		{name: "02_get", method: "GET", path: "/apisix/admin/routes/1"},
	}
	for i := 2; i <= 12; i++ {
		calls = append(calls, call{name: fmt.Sprintf("03_put_%02d", i), method: "PUT", path: fmt.Sprintf("/apisix/admin/routes/%d", i),
			body: fmt.Sprintf(`{"uri":"/r%d","name":"route-%d","labels":{"team":"t%d"},"upstream_id":"u"}`, i, i, i%2)})
	}
	calls[2].method, calls[2].path, calls[2].body = "PUT", "/apisix/admin/upstreams/u", `{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}`
	calls = append(calls,
		call{name: "04_list_page2", method: "GET", path: "/apisix/admin/routes?page=2&page_size=10"},
		call{name: "05_list_label", method: "GET", path: "/apisix/admin/routes?label=team:t1&name=route-1"},
		call{name: "06_delete", method: "DELETE", path: "/apisix/admin/routes/1"},
		call{name: "07_missing", method: "GET", path: "/apisix/admin/routes/1"},
		call{name: "08_no_key", method: "GET", path: "/apisix/admin/routes", key: "-"},
	)
	run(t, "v3", h, calls)
}

// With no admin key configured the API refuses every call.
func TestNoAdminKeyRefusesAll(t *testing.T) {
	store, err := bolt.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	h := admin.NewHandler(slog.New(slog.DiscardHandler), store, registry(), admin.Options{})
	for _, key := range []string{"", adminKey} {
		req := httptest.NewRequest("GET", "/apisix/admin/routes", nil)
		req.Header.Set("X-API-KEY", key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("key %q: status %d, want 401", key, rec.Code)
		}
	}
}

// TestPatchNull: a null in a PATCH body removes its key at any depth,
// under v2 and v3, whether or not the stored value has the object the
// null is in (APISIX's core.table.merge; t/admin/routes3.t TEST 7 is the
// upstream nodes case).
func TestPatchNull(t *testing.T) {
	const up = `"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:8080":1}}`
	tests := []struct {
		name, stored, patch, want string
	}{
		{"plugin removed, another kept",
			`{"uri":"/a",` + up + `,"plugins":{"proxy-rewrite":{"uri":"/x"},"prometheus":{}}}`,
			`{"plugins":{"proxy-rewrite":null}}`,
			`{"uri":"/a",` + up + `,"plugins":{"prometheus":{}}}`},
		{"last plugin removed",
			`{"uri":"/a",` + up + `,"plugins":{"proxy-rewrite":{"uri":"/x"}}}`,
			`{"plugins":{"proxy-rewrite":null}}`,
			`{"uri":"/a",` + up + `,"plugins":{}}`},
		{"no plugins stored",
			`{"uri":"/a",` + up + `}`,
			`{"plugins":{"proxy-rewrite":null}}`,
			`{"uri":"/a",` + up + `,"plugins":{}}`},
		{"empty plugins stored, one added one removed",
			`{"uri":"/a",` + up + `,"plugins":{}}`,
			`{"plugins":{"proxy-rewrite":null,"prometheus":{}}}`,
			`{"uri":"/a",` + up + `,"plugins":{"prometheus":{}}}`},
		{"nested field removed",
			`{"uri":"/a",` + up + `,"plugins":{"proxy-rewrite":{"uri":"/x","headers":{"X-A":"1"}}}}`,
			`{"plugins":{"proxy-rewrite":{"headers":null}}}`,
			`{"uri":"/a",` + up + `,"plugins":{"proxy-rewrite":{"uri":"/x"}}}`},
		{"top-level field removed",
			`{"uri":"/a","desc":"d",` + up + `}`,
			`{"desc":null}`,
			`{"uri":"/a",` + up + `}`},
		{"routes3.t TEST 7: node removed, node added",
			`{"uri":"/a",` + up + `}`,
			`{"methods":["GET"],"upstream":{"nodes":{"127.0.0.1:8080":null,"127.0.0.2:8080":1}},"desc":"new route"}`,
			`{"uri":"/a","methods":["GET"],"desc":"new route","upstream":{"type":"roundrobin","nodes":{"127.0.0.2:8080":1}}}`},
	}
	for _, v3 := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("v3=%v/%s", v3, tt.name), func(t *testing.T) {
				h := newAPI(t, v3)
				do := func(method, body string) (int, []byte) {
					req := httptest.NewRequest(method, "/apisix/admin/routes/1", strings.NewReader(body))
					req.RemoteAddr = "127.0.0.1:40000"
					req.Header.Set("X-API-KEY", adminKey)
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					return rec.Code, rec.Body.Bytes()
				}
				if code, b := do("PUT", tt.stored); code/100 != 2 {
					t.Fatalf("PUT: %d %s", code, b)
				}
				if code, b := do("PATCH", tt.patch); code/100 != 2 {
					t.Fatalf("PATCH: %d %s", code, b)
				}
				_, b := do("GET", "")
				var got struct {
					Value map[string]any `json:"value"`
					Node  struct {
						Value map[string]any `json:"value"`
					} `json:"node"`
				}
				if err := json.Unmarshal(b, &got); err != nil {
					t.Fatalf("GET: %v: %s", err, b)
				}
				value := got.Value
				if !v3 {
					value = got.Node.Value
				}
				for _, k := range []string{"create_time", "update_time", "id", "priority", "status"} {
					delete(value, k) // stamps and the defaults the schema fills in
				}
				if p, ok := value["plugins"].(map[string]any); ok {
					if pm, ok := p["prometheus"].(map[string]any); ok {
						delete(pm, "prefer_name") // a default (v2 stores it)
					}
				}
				if u, ok := value["upstream"].(map[string]any); ok {
					for _, k := range []string{"hash_on", "pass_host", "scheme"} {
						delete(u, k)
					}
				}
				var want map[string]any
				if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(value, want) {
					gb, _ := json.Marshal(value)
					t.Errorf("stored after PATCH:\n%s\nwant\n%s", gb, tt.want)
				}
			})
		}
	}
}
