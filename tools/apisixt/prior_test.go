package main

import (
	"encoding/json"
	"testing"
)

func TestV3Envelope(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"action":"set","node":{"key":"/apisix/routes/1","value":{"uri":"/a"}}}`, `{"key":"/apisix/routes/1","value":{"uri":"/a"}}`},
		{`{"action":"get","count":1,"node":{"dir":true,"key":"/apisix/routes","nodes":[]}}`, `{"key":"/apisix/routes","list":[],"total":1}`},
		{`{"action":"delete"}`, `{}`},
		{`[1]`, `[1]`},
	}
	for _, tt := range tests {
		var v any
		if err := json.Unmarshal([]byte(tt.in), &v); err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(v3Envelope(v))
		if string(got) != tt.want {
			t.Errorf("v3Envelope(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestV3Path(t *testing.T) {
	for in, want := range map[string]string{
		"node.value.create_time": "value.create_time",
		"node.key":               "key",
		"node.nodes.1.key":       "list.1.key",
		"action":                 "",
		"count":                  "total",
		"value.id":               "value.id",
	} {
		if got := v3Path(in); got != want {
			t.Errorf("v3Path(%q) = %q, want %q", in, got, want)
		}
	}
}

// Blocks that differ only in what 3.0 changed in every admin test
// normalize alike; a changed request or answer does not.
func TestNormalize(t *testing.T) {
	v2 := block{order: []string{"config", "no_error_log"}, secs: map[string]string{
		"config":       `local code, body = t('/apisix/admin/ssl/1', ngx.HTTP_DELETE, nil, [[{"action": "delete"}]])`,
		"no_error_log": "[error]",
	}}
	v3 := block{order: []string{"config"}, secs: map[string]string{
		"config": `local code, body = t('/apisix/admin/ssls/1', ngx.HTTP_DELETE)`,
	}}
	if normalize(v2) != normalize(v3) {
		t.Errorf("normalize differs:\n%s\n%s", normalize(v2), normalize(v3))
	}
	changed := block{order: []string{"config"}, secs: map[string]string{
		"config": `local code, body = t('/apisix/admin/ssls/2', ngx.HTTP_DELETE)`,
	}}
	if normalize(changed) == normalize(v3) {
		t.Error("a different id normalizes alike")
	}
}
