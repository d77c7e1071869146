package gateway_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/linkgate/linkgate/gateway"
)

// The hosts of routes labelled acme: "true" are the names the gateway
// orders certificates for: exact names, enabled routes that serve, the
// service's hosts when the route has none.
func TestACMEHosts(t *testing.T) {
	tests := []struct {
		name  string
		route string
		want  []string
	}{
		{"labelled", `{"uri":"/a","host":"Sho.Example","labels":{"acme":"true"},"upstream_id":"u"}`, []string{"sho.example"}},
		{"hosts", `{"uri":"/a","hosts":["a.example","b.example."],"labels":{"acme":"true"},"upstream_id":"u"}`, []string{"a.example", "b.example"}},
		{"wildcard left out", `{"uri":"/a","hosts":["*.w.example","x.example"],"labels":{"acme":"true"},"upstream_id":"u"}`, []string{"x.example"}},
		{"service's hosts", `{"uri":"/a","service_id":"s","labels":{"acme":"true"}}`, []string{"svc.example"}},
		{"not labelled", `{"uri":"/a","host":"n.example","upstream_id":"u"}`, nil},
		{"label not true", `{"uri":"/a","host":"n.example","labels":{"acme":"false"},"upstream_id":"u"}`, nil},
		{"another label", `{"uri":"/a","host":"n.example","labels":{"version":"v2"},"upstream_id":"u"}`, nil},
		{"disabled", `{"uri":"/a","host":"d.example","status":0,"labels":{"acme":"true"},"upstream_id":"u"}`, nil},
		{"missing service", `{"uri":"/a","host":"m.example","service_id":"none","labels":{"acme":"true"}}`, nil},
		{"no host", `{"uri":"/a","labels":{"acme":"true"},"upstream_id":"u"}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := check(t, gateway.KindRoute, tt.route); err != nil && tt.want != nil {
				t.Fatalf("the route does not pass APISIX's schema: %v", err)
			}
			reg := gateway.NewRegistry()
			cfg := gateway.NewConfig()
			cfg.Apply(gateway.Update{Reset: true, Entries: []gateway.Entry{
				{Kind: gateway.KindUpstream, ID: "u", Value: []byte(`{"type":"roundrobin","nodes":{"a:1":1}}`)},
				{Kind: gateway.KindService, ID: "s", Value: []byte(`{"upstream_id":"u","hosts":["svc.example"]}`)},
				{Kind: gateway.KindRoute, ID: "1", Value: []byte(tt.route)},
			}}, reg)
			c, _ := gateway.Compile(cfg, reg)
			got := slices.Sorted(maps.Keys(c.ACMEHosts()))
			if !slices.Equal(got, tt.want) {
				t.Errorf("ACMEHosts = %q, want %q", got, tt.want)
			}
		})
	}
}
