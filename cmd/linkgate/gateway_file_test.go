package main

import (
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
// with the reason logged, the admin API read-only.
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
		if code, body := do(t, m, g.url+"/apisix/admin/routes/1", `{"uri":"/x"}`, "X-API-KEY", seedKey); code != 405 || !strings.Contains(body, "read-only") {
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
