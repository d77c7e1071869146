package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/eventually"
)

// --config-store file:apisix.yaml: APISIX's standalone file served as it
// changes, invalid resources skipped and counted, a broken file ignored
// with the reason logged, the admin API's writes of one resource refused.
func TestGatewayConfigFile(t *testing.T) {
	up := helloUpstream(t)
	path := filepath.Join(t.TempDir(), "apisix.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", []byte(strings.ReplaceAll(s, "UP", up)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write(`routes:
  - id: 1
    uri: /hello
    upstream_id: 1
  - id: 2
    uri: /nope
    plugins:
      no-such-plugin: {}
    upstream_id: 1
upstreams:
  - id: 1
    type: roundrobin
    nodes:
      "UP": 1
#END
`)
	g := startGatewayCmd(t, "--config-store", "file:"+path)
	if code, body := do(t, "GET", g.url+"/hello", ""); code != 200 || body != "1234567890" {
		t.Fatalf("GET /hello: %d %q", code, body)
	}
	if code, _ := do(t, "GET", g.url+"/nope", ""); code != 404 {
		t.Errorf("GET /nope (a route with an unknown plugin): %d, want 404", code)
	}
	_, metrics := do(t, "GET", g.promURL+"/apisix/prometheus/metrics", "")
	if !strings.Contains(metrics, `linkgate_gateway_skipped_resources{reason="unknown_plugin"} 1`) {
		t.Errorf("skipped route not counted:\n%s", grepLines(metrics, "linkgate_gateway"))
	}
	if code, body := do(t, "GET", g.url+"/apisix/admin/routes/1", "", "X-API-KEY", seedKey); code != 200 || !strings.Contains(body, `"uri":"/hello"`) {
		t.Errorf("admin GET routes/1: %d %s", code, body)
	}
	for _, m := range []string{"PUT", "POST", "PATCH", "DELETE"} {
		if code, body := do(t, m, g.url+"/apisix/admin/routes/1", `{"uri":"/x"}`, "X-API-KEY", seedKey); code != 405 || !strings.Contains(body, "only whole, by PUT /apisix/admin/configs") {
			t.Errorf("admin %s routes/1: %d %s, want 405", m, code, body)
		}
	}

	write(`routes:
  - id: 1
    uri: /hello
    upstream_id: 1
  - id: 3
    uri: /hello3
    upstream_id: 1
upstreams:
  - id: 1
    type: roundrobin
    nodes: {"UP": 1}
#END
`)
	eventually.True(t, 10*time.Second, "/hello3 served after the change", func() bool {
		code, _ := do(t, "GET", g.url+"/hello3", "")
		return code == 200
	})
	if code, _ := do(t, "GET", g.url+"/nope", ""); code != 404 {
		t.Errorf("GET /nope after the change: %d, want 404", code)
	}

	// Half written (no #END), then not YAML: neither loads; both say why.
	for i, broken := range []string{"routes:\n  - id: 4\n    uri: /hello4\n    upstream_id: 1\n", "routes: [\n#END\n"} {
		write(broken)
		eventually.True(t, 10*time.Second, "the broken file reported", func() bool {
			return strings.Count(g.stderr.String(), "config file not loaded") == i+1
		})
		for _, p := range []string{"/hello", "/hello3"} {
			if code, _ := do(t, "GET", g.url+p, ""); code != 200 {
				t.Errorf("GET %s with a broken file: %d, want the last good configuration", p, code)
			}
		}
	}
	logs := g.stderr.String()
	for _, why := range []string{"#END", "invalid YAML"} {
		if !strings.Contains(logs, why) {
			t.Errorf("the log does not say %q:\n%s", why, logs)
		}
	}
}

// APISIX 3.x's API-driven standalone mode on the file: PUT
// /apisix/admin/configs validates, writes the file and serves the new
// configuration before it answers; GET/HEAD show it; the answers of
// apisix/admin/standalone.lua (its cases are ported in
// gateway/conformance: standalone.t).
func TestGatewayConfigsPut(t *testing.T) {
	up := helloUpstream(t)
	path := filepath.Join(t.TempDir(), "apisix.yaml")
	if err := os.WriteFile(path, []byte("#END\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startGatewayCmd(t, "--config-store", "file:"+path)
	configs := g.url + "/apisix/admin/configs"
	call := func(method, body string, hdr ...string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(method, configs, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-API-KEY", seedKey)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	if code, h, body := call("GET", ""); code != 200 || !strings.Contains(body, `"routes_conf_version":0`) || h.Get("X-Digest") != "" {
		t.Fatalf("GET before any PUT: %d %v %s", code, h, body)
	}
	route := `{"routes":[{"id":"r1","uri":"/hello","upstream":{"type":"roundrobin","nodes":{"` + up + `":1}}}]}`
	for _, tc := range []struct {
		name, body string
		hdr        []string
		code       int
		msg        string
	}{
		{"no digest", route, nil, 400, `{"error_msg":"missing digest header"}`},
		{"empty", "", []string{"X-Digest", "a"}, 400, `{"error_msg":"invalid request body: empty request body"}`},
		{"not YAML", "routes: [", []string{"X-Digest", "a", "Content-Type", "application/yaml"}, 400, `{"error_msg":"invalid request body: invalid yaml request body"}`},
		{"not JSON", "{", []string{"X-Digest", "a"}, 400, `invalid request body: unexpected EOF`},
		{"too large", strings.Repeat(" ", 4<<20+1), []string{"X-Digest", "a"}, 413, `greater than the maximum size 4194304 allowed`},
		{"invalid route", `{"routes":[{"id":"r1","uri":"/x","plugins":{"no-such":{}}}]}`, []string{"X-Digest", "a"}, 400, `{"error_msg":"unknown plugin [no-such]"}`},
	} {
		if code, _, body := call("PUT", tc.body, tc.hdr...); code != tc.code || !strings.Contains(body, tc.msg) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, code, body, tc.code, tc.msg)
		}
	}
	if code, _ := do(t, "GET", g.url+"/hello", ""); code != 404 {
		t.Fatalf("GET /hello before the PUT: %d", code)
	}
	code, h, body := call("PUT", route, "X-Digest", "d1")
	if code != 202 || h.Get("X-Digest") != "d1" || h.Get("X-Last-Modified") == "" {
		t.Fatalf("PUT: %d %v %s", code, h, body)
	}
	// Served at once: the file is polled each second, this asks right away.
	if code, body := do(t, "GET", g.url+"/hello", ""); code != 200 || body != "1234567890" {
		t.Errorf("GET /hello right after the PUT: %d %q", code, body)
	}
	if b, err := os.ReadFile(path); err != nil || !strings.Contains(string(b), "id: r1") || !strings.HasSuffix(string(b), "#END\n") {
		t.Errorf("the file after the PUT: %v\n%s", err, b)
	}
	if code, _, _ := call("PUT", "{}", "X-Digest", "d1"); code != 204 {
		t.Errorf("PUT with the same digest: %d, want 204", code)
	}
	if code, h, _ := call("HEAD", ""); code != 200 || h.Get("X-Digest") != "d1" {
		t.Errorf("HEAD: %d %v", code, h)
	}
	if code, h, body := call("GET", "", "Accept", "application/yaml"); code != 200 || h.Get("Content-Type") != "application/yaml" || !strings.Contains(body, "routes_conf_version: 1") {
		t.Errorf("GET as YAML: %d %v\n%s", code, h, body)
	}
}

// The example in deploy/ loads with nothing skipped.
func TestGatewayConfigFileExample(t *testing.T) {
	g := startGatewayCmd(t, "--config-store", "file:"+filepath.Join("..", "..", "deploy", "standalone", "apisix.yaml"))
	code, body := do(t, "GET", g.url+"/apisix/admin/routes", "", "X-API-KEY", seedKey)
	if code != 200 || !strings.Contains(body, `"count":2`) {
		t.Fatalf("admin list: %d %s", code, body)
	}
	_, metrics := do(t, "GET", g.promURL+"/apisix/prometheus/metrics", "")
	if regexp.MustCompile(`linkgate_gateway_skipped_resources\{.*\} [1-9]`).MatchString(metrics) || strings.Contains(g.stderr.String(), "resource skipped") {
		t.Errorf("the example has skipped resources:\n%s\n%s", grepLines(metrics, "linkgate_gateway"), g.stderr)
	}
	if code, _ := do(t, "POST", g.url+"/shortenURL", `{}`); code != 401 {
		t.Errorf("POST /shortenURL without a key: %d, want 401 (key-auth)", code)
	}
}
