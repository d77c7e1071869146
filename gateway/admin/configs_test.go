package admin

import (
	"encoding/json"
	"testing"
)

// decodeConfig takes any body, JSON or YAML: an error or an object that
// encodes as JSON again (what the file store writes), never a panic.
func FuzzDecodeConfig(f *testing.F) {
	f.Add([]byte(`{"routes":[{"id":"r1","uri":"/r1"}],"routes_conf_version":3}`), false)
	f.Add([]byte("routes:\n  - id: r1\n    upstream: {nodes: {80: 1}}\nroutes_conf_version: 1.5\n"), true)
	f.Add([]byte("- a\n- b\n"), true)
	f.Add([]byte("{abcd"), false)
	f.Fuzz(func(t *testing.T, body []byte, yaml bool) {
		ct := "application/json"
		if yaml {
			ct = "application/yaml; charset=utf-8"
		}
		doc, err := decodeConfig(body, ct)
		if err != nil {
			return
		}
		if doc == nil {
			t.Fatal("nil document without an error")
		}
		if _, err := json.Marshal(doc); err != nil {
			t.Fatalf("decoded %q into %v, which does not encode: %v", body, doc, err)
		}
	})
}
