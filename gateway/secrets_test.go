package gateway_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/linkgate/linkgate/gateway"
)

func TestEnvSecrets(t *testing.T) {
	env := map[string]string{"KEY": "k1", "JSON": `{"user":"u","port":6379}`}
	s := gateway.EnvSecrets(func(k string) string { return env[k] })
	tests := []struct {
		ref  string
		want any
		err  bool
	}{
		{"$env://KEY", "k1", false},
		{"$ENV://KEY", "k1", false}, // the prefix is case-insensitive, as APISIX's
		{"$env://JSON/user", "u", false},
		{"$env://JSON/port", float64(6379), false},
		{"$env://JSON/none", nil, true},
		{"$env://KEY/user", nil, true}, // not JSON
		{"$env://UNSET", nil, true},
		{"$secret://vault/1/key", nil, true},
	}
	for _, tt := range tests {
		got, ok, err := s.Resolve(tt.ref)
		if tt.err {
			if err == nil || !errors.Is(err, gateway.ErrSecretUnresolved) || ok {
				t.Errorf("%s: %v %v %v, want ErrSecretUnresolved", tt.ref, got, ok, err)
			}
			continue
		}
		if err != nil || !ok || got != tt.want {
			t.Errorf("%s: %v %v %v, want %v", tt.ref, got, ok, err, tt.want)
		}
	}
}

// recorder is a plugin factory that keeps the configuration it was built with.
type recorder struct{ got *json.RawMessage }

func (recorder) Name() string            { return "rec" }
func (recorder) Priority() int           { return 1 }
func (recorder) Schema() *gateway.Schema { return &gateway.Schema{Type: "object"} }
func (r recorder) New(conf json.RawMessage, _ gateway.Scope) (any, error) {
	*r.got = conf
	return struct{}{}, nil
}

// A reference is resolved when the plugin is built, at any depth; an
// unresolved one fails the build instead of becoming the value.
func TestRegistryResolvesSecrets(t *testing.T) {
	var got json.RawMessage
	env := map[string]string{"KEY": "k1"}
	reg := gateway.NewRegistryWithOptions(gateway.RegistryOptions{Secrets: gateway.EnvSecrets(func(k string) string { return env[k] })}, recorder{&got})
	tests := []struct {
		conf, want string
		err        bool
	}{
		{`{"key":"$env://KEY","n":1}`, `{"key":"k1","n":1}`, false},
		{`{"a":{"b":["$env://KEY","x"]}}`, `{"a":{"b":["k1","x"]}}`, false},
		{`{"key":"$5 not a ref"}`, `{"key":"$5 not a ref"}`, false},
		{`{"key":"$env://UNSET"}`, "", true},
	}
	for _, tt := range tests {
		got = nil
		_, err := reg.Build(gateway.Plugins{"rec": json.RawMessage(tt.conf)}, gateway.Scope{})
		if tt.err {
			if err == nil || !errors.Is(err, gateway.ErrSecretUnresolved) {
				t.Errorf("%s: built (%s), want ErrSecretUnresolved", tt.conf, got)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.conf, err)
		}
		var a, b any
		_ = json.Unmarshal(got, &a)
		_ = json.Unmarshal([]byte(tt.want), &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: built with %s, want %s", tt.conf, got, tt.want)
		}
	}
}

// TestBuildSkipsDisabled: 2.14's "disable" and 3.x's "_meta.disable"
// leave a plugin out of the chain (3.x t/node/merge-route.t TEST 7, 8).
func TestBuildSkipsDisabled(t *testing.T) {
	var got json.RawMessage
	reg := gateway.NewRegistry(recorder{&got})
	for conf, want := range map[string]int{
		`{}`:                          1,
		`{"disable":true}`:            0,
		`{"_meta":{"disable":true}}`:  0,
		`{"_meta":{"disable":false}}`: 1,
	} {
		c, err := reg.Build(gateway.Plugins{"rec": json.RawMessage(conf)}, gateway.Scope{})
		if err != nil || len(c) != want {
			t.Errorf("%s: %d instances (%v), want %d", conf, len(c), err, want)
		}
	}
}
