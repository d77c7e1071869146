package control_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/bolt"
	"github.com/linkgate/linkgate/gateway/control"
)

func getJSON(t *testing.T, h http.Handler, path string, v any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
		t.Fatalf("%s: %v: %s", path, err, rec.Body)
	}
	return rec.Code
}

// The control API shows what the node serves, and whether it has received
// every change in its store.
func TestControlAPI(t *testing.T) {
	ctx := context.Background()
	store, err := bolt.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	reg := gateway.NewRegistry()
	r := gateway.NewReloader(reg, nil, func(*gateway.Compiled) {})
	h := control.NewHandler(r, store, "/apisix")
	put := func(kind gateway.Kind, id, v string) gateway.Entry {
		e, _, err := store.Put(ctx, kind, id, []byte(v), 0)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	good := put(gateway.KindRoute, "1", `{"uri":"/a","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1":1}}}`)
	put(gateway.KindRoute, "2", `{"uri":"/b","methods":["NOPE"],"plugins":{}}`)
	var cfg struct {
		InSync  bool         `json:"in_sync"`
		View    gateway.View `json:"view"`
		Skipped []struct{ Key, Reason string }
	}
	getJSON(t, h, "/v1/config", &cfg)
	if cfg.InSync {
		t.Fatal("in_sync before the reloader saw the store")
	}
	u := gateway.Update{Reset: true}
	for _, k := range gateway.Kinds {
		es, _ := store.List(ctx, k)
		u.Entries = append(u.Entries, es...)
	}
	r.Update(u)
	getJSON(t, h, "/v1/config", &cfg)
	if !cfg.InSync || len(cfg.View.Routes) != 1 || cfg.View.Routes[0].ID != "1" || len(cfg.Skipped) != 1 || cfg.Skipped[0].Key != "routes/2" {
		t.Fatalf("after the update: %+v", cfg)
	}
	var routes []struct {
		Key           string          `json:"key"`
		Value         json.RawMessage `json:"value"`
		ModifiedIndex int64           `json:"modifiedIndex"`
	}
	getJSON(t, h, "/v1/routes", &routes)
	if len(routes) != 1 || routes[0].Key != "/apisix/routes/1" || routes[0].ModifiedIndex != good.ModifiedIndex {
		t.Errorf("/v1/routes: %+v", routes)
	}
	var one map[string]any
	if code := getJSON(t, h, "/v1/route/2", &one); code != 404 {
		t.Errorf("/v1/route/2 (skipped): %d %v", code, one)
	}
	put(gateway.KindUpstream, "u", `{"type":"roundrobin","nodes":{"127.0.0.1:1":1}}`)
	getJSON(t, h, "/v1/config", &cfg)
	if cfg.InSync {
		t.Error("in_sync with a change the reloader has not seen")
	}
}
