package httplogger

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
	"github.com/linkgate/linkgate/internal/eventually"
)

func TestSchema(t *testing.T) {
	const prefix = "failed to check the configuration of plugin http-logger err: "
	for _, tc := range []struct{ conf, err string }{
		{`{"uri":"http://127.0.0.1:1980/log"}`, ""},
		{`{"uri":"http://127.0.0.1:1980/log","batch_max_size":1,"concat_method":"new_line","log_format":{"host":"$host"}}`, ""},
		{`{}`, `property "uri" is required`},
		{`{"uri":"127.0.0.1"}`, `property "uri" validation failed: failed to match pattern "^[^\\/]+:\\/\\/([\\da-zA-Z.-]+|\\[[\\da-fA-F:]+\\])(:\\d+)?" with "127.0.0.1"`},
		{`{"uri":"http://a","timeout":0}`, `property "timeout" validation failed: expected 0 to be at least 1`},
		{`{"uri":"http://a","concat_method":"xml"}`, `property "concat_method" validation failed: matches none of the enum values`},
		{`{"uri":"http://a","batch_max_size":0}`, `property "batch_max_size" validation failed: expected 0 to be at least 1`},
	} {
		got := plugintest.Check(t, New(Options{}), tc.conf, false)
		want := tc.err
		if want != "" {
			want = prefix + want
		}
		if got != want {
			t.Errorf("%s: %q, want %q", tc.conf, got, want)
		}
	}
}

// receiver is a real HTTP log server on 127.0.0.1: each POST's headers
// and body arrive on got.
type receiver struct {
	url    string
	got    chan received
	status int
}

type received struct {
	contentType, auth, body string
}

func newReceiver(t *testing.T, status int) *receiver {
	r := &receiver{got: make(chan received, 100), status: status}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.got <- received{req.Header.Get("Content-Type"), req.Header.Get("Authorization"), string(b)}
		w.WriteHeader(r.status)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL + "/log"
	return r
}

func (r *receiver) next(t *testing.T) received {
	t.Helper()
	select {
	case g := <-r.got:
		return g
	case <-time.After(10 * time.Second):
		t.Fatal("nothing logged")
	}
	return received{}
}

func TestLogs(t *testing.T) {
	rcv := newReceiver(t, 200)
	f := New(Options{Hostname: "gw1", Version: "test"})
	gw := plugintest.Start(t, gateway.NewRegistry(f), nil)
	route := func(conf string) string {
		return `{"uri":"/hello","upstream":{"type":"roundrobin","nodes":{"$UPSTREAM":1}},"plugins":{"http-logger":` +
			strings.ReplaceAll(conf, "$RECV", rcv.url) + `}}`
	}

	t.Run("full log, batch of one", func(t *testing.T) {
		gw.Load(t, map[string]string{"routes/1": route(`{"uri":"$RECV","batch_max_size":1,"auth_header":"Bearer x"}`)})
		if r := gw.Do(t, "GET", "/hello?a=1&a=2&b", "", "X-Test", "yes"); r.Status != 200 {
			t.Fatalf("status %d", r.Status)
		}
		g := rcv.next(t)
		if g.contentType != "application/json" || g.auth != "Bearer x" {
			t.Errorf("content type %q, authorization %q", g.contentType, g.auth)
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(g.body), &e); err != nil {
			t.Fatalf("a batch of one is one object: %v: %s", err, g.body)
		}
		req := e["request"].(map[string]any)
		resp := e["response"].(map[string]any)
		for _, c := range []struct {
			name string
			got  any
			want any
		}{
			{"route_id", e["route_id"], "1"},
			{"service_id", e["service_id"], ""},
			{"client_ip", e["client_ip"], "127.0.0.1"},
			{"request.method", req["method"], "GET"},
			{"request.uri", req["uri"], "/hello?a=1&a=2&b"},
			{"request.querystring", mustJSON(req["querystring"]), `{"a":["1","2"],"b":true}`},
			{"request.headers.x-test", req["headers"].(map[string]any)["x-test"], "yes"},
			{"response.status", resp["status"], 200.0},
			{"response.headers.content-type", resp["headers"].(map[string]any)["content-type"], "text/plain"},
			{"server", mustJSON(e["server"]), `{"hostname":"gw1","version":"test"}`},
			{"upstream", e["upstream"], gw.Upstream},
		} {
			if c.got != c.want {
				t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
			}
		}
		for _, k := range []string{"start_time", "latency", "upstream_latency", "apisix_latency"} {
			if _, ok := e[k].(float64); !ok {
				t.Errorf("%s missing: %s", k, g.body)
			}
		}
		if !strings.HasPrefix(req["url"].(string), "http://127.0.0.1:") || !strings.HasSuffix(req["url"].(string), "/hello?a=1&a=2&b") {
			t.Errorf("request.url %v", req["url"])
		}
	})

	t.Run("log_format, a batch as a JSON array", func(t *testing.T) {
		gw.Load(t, map[string]string{"routes/1": route(`{"uri":"$RECV","batch_max_size":2,"log_format":{"host":"$host","client":"$remote_addr","nested":{"m":"$request_method","lit":"x"},"none":"$http_missing"}}`)})
		gw.Do(t, "GET", "/hello", "")
		gw.Do(t, "POST", "/hello", "")
		g := rcv.next(t)
		want := `[{"client":"127.0.0.1","host":"127.0.0.1","nested":{"lit":"x","m":"GET"},"route_id":"1","service_id":""},` +
			`{"client":"127.0.0.1","host":"127.0.0.1","nested":{"lit":"x","m":"POST"},"route_id":"1","service_id":""}]`
		if g.body != want {
			t.Errorf("body\n%s\nwant\n%s", g.body, want)
		}
	})

	t.Run("new_line", func(t *testing.T) {
		gw.Load(t, map[string]string{"routes/1": route(`{"uri":"$RECV","batch_max_size":2,"concat_method":"new_line","log_format":{"m":"$request_method"}}`)})
		gw.Do(t, "GET", "/hello", "")
		gw.Do(t, "PUT", "/hello", "")
		g := rcv.next(t)
		if want := `{"m":"GET","route_id":"1","service_id":""}` + "\n" + `{"m":"PUT","route_id":"1","service_id":""}`; g.body != want || g.contentType != "text/plain" {
			t.Errorf("%q %q, want %q text/plain", g.body, g.contentType, want)
		}
	})

	t.Run("log_format_extra adds keys", func(t *testing.T) {
		gw.Load(t, map[string]string{"routes/1": route(`{"uri":"$RECV","batch_max_size":1,"log_format_extra":{"my_host":"$host","route_id":"$host"}}`)})
		gw.Do(t, "GET", "/hello", "")
		var e map[string]any
		_ = json.Unmarshal([]byte(rcv.next(t).body), &e)
		if e["my_host"] != "127.0.0.1" || e["route_id"] != "1" {
			t.Errorf("my_host %v route_id %v: extra keys add, never replace", e["my_host"], e["route_id"])
		}
	})
}

// TestRetries: a receiver answering 500 gets the batch max_retry_count + 1
// times, then it is dropped.
func TestRetries(t *testing.T) {
	rcv := newReceiver(t, 500)
	f := New(Options{})
	gw := plugintest.Start(t, gateway.NewRegistry(f), nil)
	gw.Load(t, map[string]string{"routes/1": `{"uri":"/hello","upstream":{"type":"roundrobin","nodes":{"$UPSTREAM":1}},"plugins":{"http-logger":` +
		`{"uri":"` + rcv.url + `","batch_max_size":1,"max_retry_count":2,"retry_delay":0}}}`})
	gw.Do(t, "GET", "/hello", "")
	for range 3 {
		rcv.next(t)
	}
	select {
	case g := <-rcv.got:
		t.Errorf("a fourth attempt: %s", g.body)
	case <-time.After(200 * time.Millisecond): // bounded wait for an attempt that must not come
	}
	eventually.True(t, 10*time.Second, "the dropped batch leaves the pending count", func() bool { return f.Batches().Pending() == 0 })
}

// TestNeverBlocks: with the receiver stuck, requests keep being served;
// entries past the bound are dropped.
func TestNeverBlocks(t *testing.T) {
	stuck := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-stuck }))
	t.Cleanup(func() { close(stuck); srv.Close() })
	f := New(Options{MaxPending: 4})
	gw := plugintest.Start(t, gateway.NewRegistry(f), nil)
	gw.Load(t, map[string]string{"routes/1": `{"uri":"/hello","upstream":{"type":"roundrobin","nodes":{"$UPSTREAM":1}},"plugins":{"http-logger":` +
		`{"uri":"` + srv.URL + `","batch_max_size":1,"timeout":60}}}`})
	for i := range 20 {
		if r := gw.Do(t, "GET", "/hello", ""); r.Status != 200 {
			t.Fatalf("request %d: %d", i, r.Status)
		}
	}
	if p, d := f.Batches().Pending(), f.Batches().Dropped(); p != 4 || d != 16 {
		t.Errorf("pending %d dropped %d, want 4 and 16", p, d)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func BenchmarkLog(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	f := New(Options{MaxPending: 1 << 30})
	for _, bc := range []struct{ name, conf string }{
		{"full", `{"uri":"` + srv.URL + `","batch_max_size":1000}`},
		{"log_format", `{"uri":"` + srv.URL + `","batch_max_size":1000,"log_format":{"host":"$host","uri":"$uri","status":"$status"}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			in := plugintest.New(b, f, bc.conf).(gateway.Logger)
			c := plugintest.NewCtx(map[string]string{"host": "example.com", "uri": "/api", "args": "a=1", "http_user_agent": "bench"})
			e := &gateway.LogEntry{Status: 200, RouteID: "1", RequestTime: time.Millisecond, UpstreamTime: time.Millisecond / 2, UpstreamStatus: 200}
			b.ReportAllocs()
			for b.Loop() {
				in.Log(c, e)
			}
		})
	}
}

// TestMetadata: the plugin metadata's log_format applies where the route
// has none; its max_pending_entries bounds the processors.
func TestMetadata(t *testing.T) {
	rcv := newReceiver(t, 200)
	f := New(Options{})
	ctx := plugintest.NewCtx(map[string]string{"host": "example.com", "request_method": "GET"})
	for _, tc := range []struct{ conf, md, want string }{
		{`{"uri":"$RECV","batch_max_size":1}`, `{"log_format":{"h":"$host"}}`, `{"h":"example.com","route_id":"1","service_id":""}`},
		{`{"uri":"$RECV","batch_max_size":1,"log_format":{"m":"$request_method"}}`, `{"log_format":{"h":"$host"}}`, `{"m":"GET","route_id":"1","service_id":""}`},
	} {
		raw := json.RawMessage(strings.ReplaceAll(tc.conf, "$RECV", rcv.url))
		in, err := f.NewWithMetadata(raw, json.RawMessage(tc.md), gateway.Scope{Kind: gateway.KindRoute, ID: "1"})
		if err != nil {
			t.Fatal(err)
		}
		in.(gateway.Logger).Log(ctx, &gateway.LogEntry{RouteID: "1"})
		if got := rcv.next(t).body; got != tc.want {
			t.Errorf("%s with metadata %s: %s, want %s", tc.conf, tc.md, got, tc.want)
		}
	}
	eventually.True(t, 10*time.Second, "the logged entries leave the pending count", func() bool { return f.Batches().Pending() == 0 })
	stuck := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-stuck }))
	t.Cleanup(func() { close(stuck); srv.Close() })
	in, err := f.NewWithMetadata(json.RawMessage(`{"uri":"`+srv.URL+`","batch_max_size":1,"timeout":60}`), json.RawMessage(`{"max_pending_entries":2}`), gateway.Scope{Kind: gateway.KindRoute, ID: "2"})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		in.(gateway.Logger).Log(ctx, &gateway.LogEntry{RouteID: "2"})
	}
	if d := f.Batches().Dropped(); d != 3 {
		t.Errorf("dropped %d, want 3 (max_pending_entries 2)", d)
	}
}
