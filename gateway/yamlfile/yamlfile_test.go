package yamlfile_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/yamlfile"
	"github.com/linkgate/linkgate/internal/eventually"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]string // "kind/id" → JSON value
		err      string
	}{
		{name: "APISIX's conf/apisix.yaml example", in: "routes:\n  -\n    uri: /hello\n    upstream:\n      nodes:\n        \"127.0.0.1:1980\": 1\n      type: roundrobin\n#END\n",
			want: map[string]string{"routes/routes#1": `{"upstream":{"nodes":{"127.0.0.1:1980":1},"type":"roundrobin"},"uri":"/hello"}`}},
		{name: "ids: integer, string, consumer username", in: "routes:\n  - id: 1\n    uri: /a\n  - id: x\n    uri: /b\nconsumers:\n  - username: jack\n#END",
			want: map[string]string{"routes/1": `{"id":1,"uri":"/a"}`, "routes/x": `{"id":"x","uri":"/b"}`, "consumers/jack": `{"username":"jack"}`}},
		{name: "a consumer's credential (APISIX 3.x)", in: "consumers:\n  - username: jack\n  - id: jack/credentials/a\n    plugins: {key-auth: {key: k}}\n#END",
			want: map[string]string{"consumers/jack": `{"username":"jack"}`, "consumers/jack/credentials/a": `{"id":"jack/credentials/a","plugins":{"key-auth":{"key":"k"}}}`}},
		{name: "every kind", in: "upstreams:\n  - id: 1\n    nodes: {\"a:1\": 1}\nservices:\n  - id: 1\nplugin_configs:\n  - id: 1\n    plugins: {}\nglobal_rules:\n  - id: 1\n    plugins: {}\nssl: []\nroutes:\n#END\n",
			want: map[string]string{"upstreams/1": `{"id":1,"nodes":{"a:1":1}}`, "services/1": `{"id":1}`, "plugin_configs/1": `{"id":1,"plugins":{}}`, "global_rules/1": `{"id":1,"plugins":{}}`}},
		{name: "plugin metadata, by plugin name", in: "plugin_metadata:\n  - id: cors\n    allow_origins: {k: \"http://a.test\"}\n#END",
			want: map[string]string{"plugin_metadata/cors": `{"allow_origins":{"k":"http://a.test"},"id":"cors"}`}},
		{name: "stream routes", in: "stream_routes:\n  - id: s1\n    server_port: 9100\n    upstream_id: 1\n#END",
			want: map[string]string{"stream_routes/s1": `{"id":"s1","server_port":9100,"upstream_id":1}`}},
		{name: "non-string keys", in: "upstreams:\n  - nodes: {80: 1}\n#END", want: map[string]string{"upstreams/upstreams#1": `{"nodes":{"80":1}}`}},
		{name: "empty", in: "#END", want: map[string]string{}},
		{name: "3.x: ssls, conf versions, PUT's metadata, modifiedIndex dropped", in: "X-Digest: abc\nX-Last-Modified: 17\nroutes_conf_version: 3\nprotos: []\nssls:\n  - id: s1\n    modifiedIndex: 2\n    snis: [a.test]\n#END",
			want: map[string]string{"ssl/s1": `{"id":"s1","snis":["a.test"]}`}},
		{name: "conf version not a number", in: "routes_conf_version: x\n#END", err: "routes_conf_version must be a number"},
		{name: "ssl and ssls", in: "ssl: []\nssls: [{id: 1}]\n#END", err: "both ssl"},
		{name: "protos", in: "protos:\n  - id: 1\n#END", err: "protos are not supported"},
		{name: "no end flag", in: "routes:\n  - uri: /a\n", err: "#END"},
		{name: "end flag not last", in: "routes:\n#END\n  - uri: /a\n", err: "#END"},
		{name: "invalid YAML", in: "routes: [\n#END", err: "invalid YAML"},
		{name: "unknown key", in: "route:\n  - uri: /a\n#END", err: `unknown top-level key "route"`},
		{name: "not a list", in: "routes:\n  uri: /a\n#END", err: "want a list"},
		{name: "not a mapping", in: "routes:\n  - /a\n#END", err: "routes[1]: want a resource"},
		{name: "duplicate id", in: "routes:\n  - id: 1\n  - id: \"1\"\n#END", err: `a second resource with id "1"`},
		{name: "bad id", in: "routes:\n  - id: [1]\n#END", err: "id must be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := yamlfile.Parse([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d entries %v, want %v", len(got), got, tc.want)
			}
			for k, v := range tc.want {
				if e, ok := got[k]; !ok || string(e.Value) != v || e.Key() != "/"+k {
					t.Errorf("%s: %+v (value %s), want %s", k, e, e.Value, v)
				}
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("routes:\n  - id: 1\n    uri: /a\n#END\n"))
	f.Add([]byte("upstreams:\n  - nodes: {80: 1, [1]: 2}\n#END"))
	f.Add([]byte("X-Digest: a\nroutes_conf_version: 1\nssls:\n  - id: 1\n    modifiedIndex: 3\nprotos: []\n#END\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := yamlfile.Parse(b)
		if err != nil {
			return
		}
		for k, e := range entries {
			if "/"+k != e.Key() || len(e.Value) == 0 || e.Value[0] != '{' {
				t.Fatalf("%s: %+v", k, e)
			}
		}
	})
}

// The file is served as last loaded: a change is one Reset update, a
// broken file none (and Err says why), unchanged resources keep their
// index, writes are refused.
func TestWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "apisix.yaml")
	write := func(s string) {
		t.Helper()
		// As a deploy tool does: a new file renamed over the old one.
		if err := os.WriteFile(path+".tmp", []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := yamlfile.Open(path, nil, 0); err == nil {
		t.Fatal("Open of a missing file: no error")
	}
	write("routes:\n  - id: 1\n    uri: /a\n#END\n")
	s, err := yamlfile.Open(path, nil, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []gateway.Update
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Watch(ctx, func(u gateway.Update) { mu.Lock(); got = append(got, u); mu.Unlock() })
	}()
	defer func() { cancel(); <-done }()
	updates := func() []gateway.Update { mu.Lock(); defer mu.Unlock(); return append([]gateway.Update(nil), got...) }
	eventually.True(t, 5*time.Second, "the first update", func() bool { return len(updates()) == 1 })
	first := updates()[0]
	if !first.Reset || len(first.Entries) != 1 || first.Entries[0].ID != "1" {
		t.Fatalf("first update: %+v", first)
	}

	write("routes:\n  - id: 1\n    uri: /a\n  - id: 2\n    uri: /b\n#END\n")
	eventually.True(t, 5*time.Second, "the change", func() bool { return len(updates()) == 2 })
	second := updates()[1]
	if !second.Reset || len(second.Entries) != 2 || second.Revision <= first.Revision {
		t.Fatalf("second update: %+v", second)
	}
	if second.Entries[0].ModifiedIndex != first.Entries[0].ModifiedIndex || second.Entries[1].ModifiedIndex != second.Revision {
		t.Errorf("indexes: unchanged route %d (was %d), new one %d at revision %d",
			second.Entries[0].ModifiedIndex, first.Entries[0].ModifiedIndex, second.Entries[1].ModifiedIndex, second.Revision)
	}

	write("routes:\n  - id: 3\n    uri: /c\n") // no #END: still being written
	eventually.True(t, 5*time.Second, "the broken file noticed", func() bool { return s.Err() != nil })
	if !strings.Contains(s.Err().Error(), "#END") {
		t.Errorf("Err: %v", s.Err())
	}
	if e, err := s.Get(ctx, gateway.KindRoute, "2"); err != nil || string(e.Value) != `{"id":2,"uri":"/b"}` {
		t.Errorf("after a broken file, Get routes/2: %+v %v", e, err)
	}
	write("routes:\n  - id: 3\n    uri: /c\n#END\n")
	eventually.True(t, 5*time.Second, "the fixed file", func() bool { return len(updates()) == 3 })
	if n := len(updates()); n != 3 || s.Err() != nil {
		t.Errorf("%d updates, Err %v", n, s.Err())
	}
	if es, _ := s.List(ctx, gateway.KindRoute); len(es) != 1 || es[0].ID != "3" {
		t.Errorf("List: %+v", es)
	}

	if _, _, err := s.Put(ctx, gateway.KindRoute, "1", []byte(`{}`), 0); err != yamlfile.ErrReadOnly {
		t.Errorf("Put: %v", err)
	}
	if err := s.Delete(ctx, gateway.KindRoute, "3"); err != yamlfile.ErrReadOnly {
		t.Errorf("Delete: %v", err)
	}
}
