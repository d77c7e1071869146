package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/linkgate/linkgate/internal/etcdtest"
	"github.com/linkgate/linkgate/internal/eventually"
)

// The two production bugs of issue 11, as a user met them: admin calls in
// quick succession on one keep-alive connection (http.DefaultClient reuses
// it), against the real command on the bolt store.
//
//  1. PUT routes 1–4, then /hello and /hello1 answered 404 while the admin
//     API listed them, and after PUT routes/1 + GET routes/7 route 1's
//     metrics carried route="7": ids taken from fasthttp's reusable request
//     buffer ended up as keys of the live configuration.
//  2. DELETE routes/2 panicked in gateway.Compile and killed the process.
func TestGatewayAdminSequenceKeepsRoutes(t *testing.T) {
	g := startGatewayCmd(t, "--config-store", "bolt:"+filepath.Join(t.TempDir(), "gw.db"))
	up := helloUpstream(t)
	paths := []string{"/hello", "/hello1", "/server_port", "/status"}
	for i, p := range paths {
		body := fmt.Sprintf(`{"uri":%q,"plugins":{"prometheus":{}},"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, p, up)
		if code, resp := do(t, "PUT", fmt.Sprintf("%s/apisix/admin/routes/%d", g.url, i+1), body, "X-API-KEY", seedKey); code != 201 {
			t.Fatalf("PUT routes/%d: %d %s", i+1, code, resp)
		}
	}
	for _, p := range paths {
		eventually.True(t, 2*time.Second, p+" served", func() bool {
			code, _ := do(t, "GET", g.url+p, "")
			return code == 200
		})
	}
	// Every route keeps answering: none was lost to a later admin call.
	for _, p := range paths {
		if code, body := do(t, "GET", g.url+p, ""); code != 200 || body != "1234567890" {
			t.Errorf("GET %s after four PUTs: %d %q", p, code, body)
		}
	}

	// PUT route 1 again, then GET a route that does not exist: route 1's
	// metrics must still say route="1".
	body := fmt.Sprintf(`{"uri":"/hello","plugins":{"prometheus":{}},"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, up)
	if code, resp := do(t, "PUT", g.url+"/apisix/admin/routes/1", body, "X-API-KEY", seedKey); code != 200 {
		t.Fatalf("PUT routes/1 again: %d %s", code, resp)
	}
	if code, _ := do(t, "GET", g.url+"/apisix/admin/routes/7", "", "X-API-KEY", seedKey); code != 404 {
		t.Fatalf("GET routes/7: %d, want 404", code)
	}
	for range 3 {
		if code, _ := do(t, "GET", g.url+"/hello", ""); code != 200 {
			t.Fatalf("GET /hello: %d", code)
		}
	}
	_, metrics := do(t, "GET", g.promURL+"/apisix/prometheus/metrics", "")
	if !strings.Contains(metrics, `matched_uri="/hello",node="127.0.0.1",route="1"`) || strings.Contains(metrics, `route="7"`) {
		t.Errorf("route 1's metrics are not labelled route=\"1\":\n%s", grepLines(metrics, "apisix_http_status"))
	}

	// DELETE route 2: the process survives, route 2 is gone, the rest serves.
	if code, resp := do(t, "DELETE", g.url+"/apisix/admin/routes/2", "", "X-API-KEY", seedKey); code != 200 {
		t.Fatalf("DELETE routes/2: %d %s", code, resp)
	}
	eventually.True(t, 2*time.Second, "/hello1 gone after DELETE routes/2", func() bool {
		code, _ := do(t, "GET", g.url+"/hello1", "")
		return code == 404
	})
	for _, p := range []string{"/hello", "/server_port", "/status"} {
		if code, _ := do(t, "GET", g.url+p, ""); code != 200 {
			t.Errorf("GET %s after DELETE routes/2: %d", p, code)
		}
	}
	_, list := do(t, "GET", g.url+"/apisix/admin/routes", "", "X-API-KEY", seedKey)
	if !strings.Contains(list, `"count":3`) {
		t.Errorf("admin list after delete: %s", list)
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Resources written to etcd by someone else (APISIX, a script) that linkgate
// cannot serve are skipped with one log line each and counted by reason;
// the rest serves, and fixing one brings it back.
func TestGatewaySkipsBadEtcdEntries(t *testing.T) {
	srv := etcdtest.Start(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	up := helloUpstream(t)
	good := fmt.Sprintf(`{"uri":"/good","upstream":{"type":"roundrobin","nodes":{%q:1}}}`, up)
	for k, v := range map[string]string{
		"/apisix/routes/1": good,
		"/apisix/routes/2": fmt.Sprintf(`{"uri":"/ext","plugins":{"ext-plugin-pre-req":{"conf":[]}},"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, up),
		"/apisix/routes/3": `{"uri":"/bad","methods":["GOT"]}`,
		"/apisix/routes/4": `{"uri":"/svc","service_id":"nope"}`,
		"/apisix/routes/5": `{"uri":"/lua","filter_func":"function(vars) return true end","upstream_id":"1"}`,
		"/apisix/routes/6": `{not json`,
	} {
		if _, err := cli.Put(t.Context(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	g := startGatewayCmd(t, "--config-store", "etcd://"+srv.Endpoint())
	if code, body := do(t, "GET", g.url+"/good", ""); code != 200 || body != "1234567890" {
		t.Fatalf("good route next to bad ones: %d %q", code, body)
	}
	// More changes reload everything; the bad entries are not logged again.
	for i := range 3 {
		if _, err := cli.Put(t.Context(), fmt.Sprintf("/apisix/routes/1%d", i), strings.Replace(good, "/good", fmt.Sprintf("/good%d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	eventually.True(t, 2*time.Second, "new routes served", func() bool {
		code, _ := do(t, "GET", g.url+"/good2", "")
		return code == 200
	})
	_, metrics := do(t, "GET", g.promURL+"/apisix/prometheus/metrics", "")
	for _, want := range []string{
		`linkgate_gateway_skipped_resources{reason="unknown_plugin"} 1`,
		`linkgate_gateway_skipped_resources{reason="invalid"} 2`,
		`linkgate_gateway_skipped_resources{reason="missing_reference"} 1`,
		`linkgate_gateway_skipped_resources{reason="unsupported"} 1`,
		`linkgate_gateway_reload_panics_total 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(metrics, "linkgate_gateway"))
		}
	}
	logs := g.stderr.String()
	for _, key := range []string{"routes/2", "routes/3", "routes/4", "routes/5", "routes/6"} {
		if n := strings.Count(logs, `msg="resource skipped" key=`+key+" "); n != 1 {
			t.Errorf("%s logged %d times, want once:\n%s", key, n, logs)
		}
	}
	if _, err := cli.Put(t.Context(), "/apisix/routes/3", strings.Replace(good, "/good", "/bad", 1)); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 2*time.Second, "fixed route served", func() bool {
		code, _ := do(t, "GET", g.url+"/bad", "")
		return code == 200
	})
	_, metrics = do(t, "GET", g.promURL+"/apisix/prometheus/metrics", "")
	if !strings.Contains(metrics, `linkgate_gateway_skipped_resources{reason="invalid"} 1`) {
		t.Errorf("after the fix:\n%s", grepLines(metrics, "linkgate_gateway"))
	}
}

// Admin bodies over the limit (APISIX's 1.5 MiB) are refused with 413 and
// a JSON message through the real listener, whether their length is
// announced or they come chunked, and nothing is stored; the gateway goes
// on serving.
func TestGatewayAdminBodyLimit(t *testing.T) {
	g := startGatewayCmd(t, "--config-store", "bolt:"+filepath.Join(t.TempDir(), "gw.db"))
	big := `{"uri":"/big","desc":"` + strings.Repeat("a", 2<<20) + `","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`
	for _, chunked := range []bool{false, true} {
		var body io.Reader = strings.NewReader(big)
		if chunked {
			body = io.MultiReader(strings.NewReader(big)) // no length: sent chunked
		}
		req, err := http.NewRequest("PUT", g.url+"/apisix/admin/routes/1", body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-API-KEY", seedKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("chunked=%v: %v", chunked, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 || !strings.Contains(string(b), `"error_msg":"invalid request body: request size`) {
			t.Errorf("chunked=%v: %d %s, want 413 with APISIX's message", chunked, resp.StatusCode, b)
		}
	}
	if code, body := do(t, "GET", g.url+"/apisix/admin/routes/1", "", "X-API-KEY", seedKey); code != 404 {
		t.Errorf("GET routes/1 after the refused PUTs: %d %s", code, body)
	}
	if code, body := do(t, "PUT", g.url+"/apisix/admin/routes/1", `{"uri":"/small","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`, "X-API-KEY", seedKey); code != 201 {
		t.Errorf("a small PUT after them: %d %s", code, body)
	}
}

// apisix_etcd_modify_indexes as APISIX 2.14 exports it: per resource key
// the highest modifiedIndex served, their maximum, and the revision the
// watch reached as prev_index and x_etcd_index.
func TestGatewayModifyIndexes(t *testing.T) {
	g := startGatewayCmd(t, "--config-store", "bolt:"+filepath.Join(t.TempDir(), "gw.db"))
	up := helloUpstream(t)
	for _, w := range [][2]string{
		{"upstreams/1", fmt.Sprintf(`{"type":"roundrobin","nodes":{%q:1}}`, up)}, // revision 1
		{"routes/1", `{"uri":"/a","upstream_id":"1"}`},                           // 2
		{"routes/2", `{"uri":"/b","upstream_id":"1"}`},                           // 3
	} {
		if code, body := do(t, "PUT", g.url+"/apisix/admin/"+w[0], w[1], "X-API-KEY", seedKey); code != 201 {
			t.Fatalf("PUT %s: %d %s", w[0], code, body)
		}
	}
	want := []string{
		`apisix_etcd_modify_indexes{key="routes"} 3`, `apisix_etcd_modify_indexes{key="upstreams"} 1`,
		`apisix_etcd_modify_indexes{key="services"} 0`, `apisix_etcd_modify_indexes{key="max_modify_index"} 3`,
		`apisix_etcd_modify_indexes{key="prev_index"} 3`, `apisix_etcd_modify_indexes{key="x_etcd_index"} 3`,
	}
	var metrics string
	if !eventually.Within(5*time.Second, func() bool {
		_, metrics = do(t, "GET", g.promURL+"/apisix/prometheus/metrics", "")
		for _, w := range want {
			if !strings.Contains(metrics, w) {
				return false
			}
		}
		return true
	}) {
		t.Errorf("want %q in:\n%s", want, grepLines(metrics, "modify_indexes"))
	}
}
