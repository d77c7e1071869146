package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/admin"
	"github.com/linkgate/linkgate/gateway/bolt"
	"github.com/linkgate/linkgate/internal/eventually"
)

// Sequences of admin calls, decoded from fuzz input four bytes a call
// (method, resource, id, body), run against the API on a bolt store with
// a Reloader watching it. After every call: no 5xx; a written resource
// reads back as the write answered it; a deleted one is gone. At the end:
// the reloader has every change, its configuration equals a fresh load of
// the store, and no reload panicked.
func FuzzAdminSequence(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 4, 1, 0, 0, 4, 0, 0, 0})
	f.Add([]byte{1, 1, 0, 0, 1, 2, 0, 1, 1, 0, 0, 2, 3, 2, 0, 0, 4, 2, 0, 0, 4, 1, 0, 0})
	f.Add([]byte{2, 0, 3, 0, 3, 0, 0, 9, 1, 3, 0, 0, 1, 5, 1, 0, 1, 4, 2, 0, 4, 3, 0, 0})
	f.Add([]byte{1, 0, 1, 8, 3, 0, 1, 10, 0, 0, 1, 0, 255, 0, 1, 6, '{', '"', 'u', '"', ':', '1'})
	f.Fuzz(func(t *testing.T, data []byte) {
		runSequence(t, decodeSequence(data))
	})
}

// TestAdminSequenceSeeds runs the fuzz seeds' kind of sequence without
// the fuzz engine, so a plain go test covers the invariants too.
func TestAdminSequenceSeeds(t *testing.T) {
	runSequence(t, decodeSequence([]byte{
		1, 1, 0, 0, 1, 2, 0, 1, 1, 0, 0, 2, 3, 0, 0, 9, 3, 2, 0, 0, 1, 4, 2, 0, 1, 5, 1, 0,
		4, 1, 0, 0, 4, 2, 0, 0, 4, 0, 0, 0, 1, 3, 0, 0, 4, 3, 0, 0, 2, 0, 3, 0,
	}))
}

type adminCall struct{ method, path, body string }

var (
	seqMethods = []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete}
	seqKinds   = []string{"routes", "upstreams", "services", "consumers", "plugin_configs", "global_rules"}
	seqBodies  = map[string][]string{
		"routes": {
			`{"uri":"/a","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`,
			`{"uri":"/b","upstream_id":"1"}`,
			`{"uri":"/c","service_id":"1"}`,
			`{"uri":"/d","plugin_config_id":"1","upstream_id":"1"}`,
			`{"uri":"/e","plugins":{"limit-count":{"count":1,"time_window":60}},"upstream_id":"2"}`,
			`{"uri":1}`,
			`{not json`,
			`{"uri":"/f","plugins":{"nope":{}},"upstream_id":"1"}`,
			`{"desc":"patched"}`,
			`{"id":3,"uri":"/g","upstream_id":"1"}`,
			`{"plugins":{"proxy-rewrite":{"uri":"/x"}}}`,
			`{"status":0}`,
			`{"uri":"/h","service_id":"2","plugins":{"key-auth":{}}}`,
		},
		"upstreams": {
			`{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}`,
			`{"type":"chash","key":"remote_addr","nodes":[{"host":"127.0.0.1","port":1981,"weight":2}]}`,
			`{"type":"nope","nodes":{}}`,
			`{"retries":2}`,
		},
		"services": {
			`{"upstream_id":"1"}`,
			`{"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}},"plugins":{"prometheus":{}}}`,
			`{"upstream_id":"3","plugins":{"limit-count":{"count":2,"time_window":1}}}`,
			`{"desc":"s"}`,
		},
		"consumers": {
			`{"username":"jack","plugins":{"key-auth":{"key":"k1"}}}`,
			`{"username":"jill","plugins":{"key-auth":{"key":"k1"}}}`,
			`{"username":"j-1"}`,
			`{"username":"jack","plugins":{"limit-count":{"count":1,"time_window":60}}}`,
		},
		"plugin_configs": {
			`{"plugins":{"proxy-rewrite":{"uri":"/p"}}}`,
			`{"plugins":{}}`,
			`{"plugins":{"limit-count":{"count":0,"time_window":1}}}`,
			`{"desc":"p"}`,
		},
		"global_rules": {
			`{"plugins":{"prometheus":{}}}`,
			`{"plugins":{"limit-count":{"count":100,"time_window":60}}}`,
			`{"plugins":{"nope":{}}}`,
		},
	}
)

// decodeSequence turns fuzz bytes into at most 24 admin calls. A call
// whose method byte is 255 sends the next byte's count of raw bytes as
// its body.
func decodeSequence(data []byte) []adminCall {
	var out []adminCall
	for len(data) >= 4 && len(out) < 24 {
		m, k, id, b := data[0], data[1], data[2], data[3]
		data = data[4:]
		kind := seqKinds[int(k)%len(seqKinds)]
		body := seqBodies[kind][int(b)%len(seqBodies[kind])]
		method := seqMethods[int(m)%len(seqMethods)]
		if m == 255 {
			n := min(int(b), len(data))
			body, data = string(data[:n]), data[n:]
			method = http.MethodPut
		}
		path := "/apisix/admin/" + kind
		switch {
		case kind == "consumers" && method != http.MethodPut:
			path += "/" + [...]string{"jack", "jill", "j-1"}[int(id)%3]
		case id%4 != 3: // 3: the collection
			path += fmt.Sprintf("/%d", 1+int(id)%4)
		}
		if id%8 >= 6 && method == http.MethodPatch {
			path += "/desc" // a sub-path PATCH sets one field
			body = `"via sub-path"`
		}
		out = append(out, adminCall{method, path, body})
	}
	return out
}

func runSequence(t *testing.T, calls []adminCall) {
	store, err := bolt.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	reg := registry()
	h := admin.NewHandler(slog.New(slog.DiscardHandler), store, reg, admin.Options{AdminKeys: []string{adminKey}})
	var mu sync.Mutex
	var live *gateway.Compiled
	rl := gateway.NewReloader(reg, nil, func(c *gateway.Compiled) { mu.Lock(); live = c; mu.Unlock() })
	ctx, cancel := context.WithCancel(context.Background())
	done, loaded := make(chan struct{}), make(chan struct{})
	var once sync.Once
	go func() { defer close(done); _ = rl.Run(ctx, store, func() { once.Do(func() { close(loaded) }) }) }()
	defer func() { cancel(); <-done }()
	<-loaded

	send := func(method, path, body string) (int, map[string]any) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set("X-API-KEY", adminKey)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var out map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &out)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", method, path, body, rec.Code, rec.Body)
		}
		return rec.Code, out
	}
	for i, c := range calls {
		code, resp := send(c.method, c.path, c.body)
		if code >= 300 || c.method == http.MethodGet {
			continue
		}
		key, _ := nodeOf(resp)["key"].(string)
		if c.method == http.MethodDelete {
			if code, _ := send(http.MethodGet, c.path, ""); code != http.StatusNotFound {
				t.Fatalf("call %d %s %s: GET after it answers %d, want 404", i, c.method, c.path, code)
			}
			continue
		}
		if !strings.HasPrefix(key, "/apisix/") {
			t.Fatalf("call %d %s %s %q: %d without node.key: %v", i, c.method, c.path, c.body, code, resp)
		}
		_, got := send(http.MethodGet, "/apisix/admin/"+strings.TrimPrefix(key, "/apisix/"), "")
		if want := nodeOf(resp)["value"]; !reflect.DeepEqual(nodeOf(got)["value"], want) {
			t.Fatalf("call %d %s %s %q: GET %s reads %v, the write answered %v", i, c.method, c.path, c.body, key, nodeOf(got)["value"], want)
		}
	}

	if !eventually.Within(5*time.Second, func() bool {
		ok, err := rl.InSync(context.Background(), store)
		return err == nil && ok
	}) {
		t.Fatalf("the reloader did not receive every change in 5s: mirror %v", rl.Mirror())
	}
	fresh, err := gateway.Fresh(context.Background(), store, registry())
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := live.Describe()
	mu.Unlock()
	want := fresh.Describe()
	got.Revision, want.Revision = 0, 0
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("live configuration differs from a fresh load of the store after %v:\nlive  %+v\nfresh %+v", calls, got, want)
	}
	if p := rl.Panics(); p != 0 {
		t.Fatalf("%d reloads panicked after %v", p, calls)
	}
}

func nodeOf(resp map[string]any) map[string]any {
	n, _ := resp["node"].(map[string]any)
	return n
}
