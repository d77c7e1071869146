package gateway_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/gateway"
)

func check(t *testing.T, k gateway.Kind, src string) (map[string]any, error) {
	t.Helper()
	v, err := gateway.DecodeJSON([]byte(src))
	if err != nil {
		t.Fatalf("bad test JSON %s: %v", src, err)
	}
	doc := v.(map[string]any)
	return doc, gateway.Check(k, doc, gateway.NewRegistry(), nil)
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		kind gateway.Kind
		src  string
		err  string // "" = valid
	}{
		{"route minimal", gateway.KindRoute, `{"uri":"/a","upstream_id":"1"}`, ""},
		{"route without upstream or plugins", gateway.KindRoute, `{"uri":"/a"}`, `invalid configuration: object matches none of the required: ["plugins","uri"] or ["upstream","uri"]`},
		{"route uris", gateway.KindRoute, `{"uris":["/a","/b/*"],"methods":["GET","POST"],"plugins":{}}`, ""},
		{"route no uri", gateway.KindRoute, `{"methods":["GET"]}`, "invalid configuration: allOf 1 failed: value should match only one schema, but matches none"},
		{"route uri and uris", gateway.KindRoute, `{"uri":"/a","uris":["/b"],"plugins":{}}`, "invalid configuration: allOf 1 failed: value should match only one schema, but matches both schemas 1 and 2"},
		{"route host and hosts", gateway.KindRoute, `{"uri":"/a","host":"a","hosts":["b"]}`, "only one of host or hosts is allowed"},
		{"route bad method", gateway.KindRoute, `{"uri":"/a","methods":["GOT"]}`, `invalid configuration: property "methods" validation failed: failed to validate item 1: matches none of the enum values`},
		{"route duplicate method", gateway.KindRoute, `{"uri":"/a","methods":["GET","GET"]}`, `invalid configuration: property "methods" validation failed: expected unique items but items 1 and 2 are equal`},
		{"route long uri", gateway.KindRoute, `{"uri":"/` + strings.Repeat("a", 4096) + `"}`, `invalid configuration: property "uri" validation failed: string too long, expected at most 4096, got 4097`},
		{"route bad host", gateway.KindRoute, `{"uri":"/a","host":"a b"}`, `invalid configuration: property "host" validation failed: failed to match pattern`},
		{"route wildcard host", gateway.KindRoute, `{"uri":"/a","hosts":["*.example.com","a.example.com"],"plugins":{}}`, ""},
		{"route cidr", gateway.KindRoute, `{"uri":"/a","remote_addrs":["10.0.0.0/8","::1","192.168.1.1"],"plugins":{}}`, ""},
		{"route bad cidr", gateway.KindRoute, `{"uri":"/a","remote_addr":"10.0.0.0/99"}`, `invalid configuration: property "remote_addr" validation failed: object matches none of the required`},
		{"route status", gateway.KindRoute, `{"uri":"/a","status":2}`, `invalid configuration: property "status" validation failed: matches none of the enum values`},
		{"route timeout", gateway.KindRoute, `{"uri":"/a","timeout":{"connect":0,"send":1,"read":1}}`, `invalid configuration: property "timeout" validation failed: property "connect" validation failed: expected 0 to be greater than 0`},
		{"route filter_func", gateway.KindRoute, `{"uri":"/a","filter_func":"function(vars) return true end","plugins":{}}`, "filter_func (Lua) is not supported"},
		{"route unknown field is kept", gateway.KindRoute, `{"uri":"/a","x":1,"plugins":{}}`, ""},
		{"route id int", gateway.KindRoute, `{"uri":"/a","id":1,"plugins":{}}`, ""},
		{"route id negative", gateway.KindRoute, `{"uri":"/a","id":-100}`, `invalid configuration: property "id" validation failed: object matches none of the required`},
		{"route plugins type", gateway.KindRoute, `{"uri":"/a","plugins":"x"}`, `invalid configuration: property "plugins" validation failed: wrong type: expected object, got string`},
		{"upstream array nodes", gateway.KindUpstream, `{"type":"roundrobin","nodes":[{"host":"127.0.0.1","port":80,"weight":1}]}`, ""},
		{"upstream array node without port (3.x)", gateway.KindUpstream, `{"nodes":[{"host":"127.0.0.1:1980","weight":1}]}`, ""},
		{"upstream array node without weight", gateway.KindUpstream, `{"nodes":[{"host":"127.0.0.1","port":80}]}`, `invalid configuration: property "nodes" validation failed: object matches none of the required`},
		{"upstream array node port out of range", gateway.KindUpstream, `{"nodes":[{"host":"127.0.0.1","port":65536,"weight":1}]}`, `invalid configuration: property "nodes" validation failed: object matches none of the required`},
		{"upstream no type is roundrobin (3.x)", gateway.KindUpstream, `{"nodes":{"127.0.0.1:80":1}}`, ""},
		{"upstream no nodes", gateway.KindUpstream, `{"type":"roundrobin"}`, "invalid configuration: value should match only one schema, but matches none"},
		{"upstream bare IPv6 host", gateway.KindUpstream, `{"nodes":[{"host":"::1","port":80,"weight":1}]}`, "IPv6 address must be enclosed with '[' and ']'"},
		{"upstream bracketed IPv6 host", gateway.KindUpstream, `{"nodes":[{"host":"[::1]","port":80,"weight":1}]}`, ""},
		{"upstream unknown type", gateway.KindUpstream, `{"type":"random","nodes":{"a:1":1}}`, `invalid configuration: unknown upstream type "random"`},
		{"upstream chash vars key", gateway.KindUpstream, `{"type":"chash","key":"remote_addr","nodes":{"a:1":1}}`, ""},
		{"upstream chash bad var", gateway.KindUpstream, `{"type":"chash","key":"nope","nodes":{"a:1":1}}`, "failed to match pattern"},
		{"upstream chash consumer", gateway.KindUpstream, `{"type":"chash","hash_on":"consumer","nodes":{"a:1":1}}`, ""},
		{"upstream rewrite needs host", gateway.KindUpstream, `{"type":"roundrobin","pass_host":"rewrite","nodes":{"a:1":1}}`, "`upstream_host` can't be empty when `pass_host` is `rewrite`"},
		{"upstream node mode, several nodes", gateway.KindUpstream, `{"type":"roundrobin","pass_host":"node","nodes":{"a:1":1,"b:1":1}}`, ""},
		{"upstream bad port", gateway.KindUpstream, `{"type":"roundrobin","nodes":{"a:99999":1}}`, "invalid port"},
		{"upstream checks passive alone", gateway.KindUpstream, `{"type":"roundrobin","nodes":{"a:1":1},"checks":{"passive":{}}}`, `property "checks" validation failed: object matches none of the required: ["active"] or ["active","passive"]`},
		{"upstream retries", gateway.KindUpstream, `{"type":"roundrobin","nodes":{"a:1":1},"retries":-1}`, `property "retries" validation failed: expected -1 to be at least 0`},
		{"consumer", gateway.KindConsumer, `{"username":"jack_1"}`, ""},
		{"consumer name with - (3.x)", gateway.KindConsumer, `{"username":"jack-1"}`, ""},
		{"consumer bad name", gateway.KindConsumer, `{"username":"jack.1"}`, `property "username" validation failed: failed to match pattern`},
		{"global rule needs plugins", gateway.KindGlobalRule, `{"id":"1"}`, `invalid configuration: property "plugins" is required`},
		{"plugin config", gateway.KindPluginConfig, `{"id":"1","plugins":{}}`, ""},
		{"service", gateway.KindService, `{"hosts":["a.com"],"upstream":{"type":"roundrobin","nodes":{"a:1":1}}}`, ""},
		{"vars", gateway.KindRoute, `{"uri":"/a","plugins":{},"vars":[["arg_a","==","1"],["OR",["http_x","~~","^a"],["cookie_c","in",["1","2"]]]]}`, ""},
		{"vars bad regex is accepted", gateway.KindRoute, `{"uri":"/a","plugins":{},"vars":[["arg_a","~~","("]]}`, ""},
		{"vars bad operator", gateway.KindRoute, `{"uri":"/a","plugins":{},"vars":[["arg_a","<>","b"]]}`, "failed to validate the 'vars' expression: invalid operator '<>'"},
		{"vars not wrapped", gateway.KindRoute, `{"uri":"/a","plugins":{},"vars":["arg_a","==","b"]}`, "failed to validate the 'vars' expression: rule should be wrapped inside brackets"},
		{"vars OR too short", gateway.KindRoute, `{"uri":"/a","plugins":{},"vars":[["OR",["arg_a","==","b"]]]}`, "failed to validate the 'vars' expression: rule too short"},
		{"vars bad not", gateway.KindRoute, `{"uri":"/a","plugins":{},"vars":[["arg_a","?","==","b"]]}`, "failed to validate the 'vars' expression: bad 'not' expression"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := check(t, tt.kind, tt.src)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.err != "" && err == nil:
				t.Fatalf("accepted; want error %q", tt.err)
			case tt.err != "" && !strings.Contains(err.Error(), tt.err):
				t.Fatalf("error %q, want it to contain %q", err, tt.err)
			}
		})
	}
}

// Defaults are filled in as APISIX stores them.
func TestCheckDefaults(t *testing.T) {
	doc, err := check(t, gateway.KindRoute, `{"uri":"/a","upstream":{"type":"roundrobin","nodes":{"a:1":1},"checks":{"active":{"http_path":"/h"}}}}`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(doc)
	for _, want := range []string{`"priority":0`, `"status":1`, `"hash_on":"vars"`, `"pass_host":"pass"`, `"scheme":"http"`,
		`"concurrency":10`, `"passive":{"healthy":{"http_statuses":[200,201,`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	// What APISIX leaves out, the decoded configuration still has (as
	// lua-resty-healthcheck assumes it).
	u, err := gateway.Decode[gateway.Upstream](doc["upstream"])
	if err != nil {
		t.Fatal(err)
	}
	if a := u.Checks.Active; a.Healthy.Successes != 2 || a.Healthy.Interval != 1 || len(a.Unhealthy.HTTPStatuses) != 8 || a.HTTPPath != "/h" {
		t.Errorf("decoded active check: %+v", a)
	}
}

type vars map[string]string

func (v vars) Var(n string) string { return v[n] }

func TestVars(t *testing.T) {
	tests := []struct {
		expr string
		v    vars
		want bool
	}{
		{`[["arg_a","==","1"]]`, vars{"arg_a": "1"}, true},
		{`[["arg_a","~=","1"]]`, vars{"arg_a": "1"}, false},
		{`[["arg_a","!","==","1"]]`, vars{"arg_a": "2"}, true},
		{`[["http_n",">",10]]`, vars{"http_n": "11"}, true},
		{`[["http_n","<=",10]]`, vars{"http_n": "x"}, false},
		{`[["uri","~~","^/api/v[0-9]+"]]`, vars{"uri": "/api/v2/x"}, true},
		{`[["host","~*","EXAMPLE"]]`, vars{"host": "example.com"}, true},
		{`[["arg_a","in",["x","y"]]]`, vars{"arg_a": "y"}, true},
		{`[["arg_a","has","ell"]]`, vars{"arg_a": "hello"}, false}, // has is for tables only
		{`[["!OR",["arg_a","==","1"],["arg_b","==","2"]]]`, vars{"arg_b": "2"}, false},
		{`[["!OR",["arg_a","==","1"],["arg_b","==","2"]]]`, vars{"arg_c": "2"}, true},
		{`[["!AND",["arg_a","==","1"],["arg_b","==","2"]]]`, vars{"arg_a": "1"}, true},
		{`[["arg_a","1"]]`, vars{"arg_a": "1"}, true}, // [var, value] is ==
		{`[["arg_a","==",1]]`, vars{"arg_a": "1.0"}, true},
		{`[["arg_a","~=","1"]]`, vars{}, true},
		{`[["arg_a","==",null]]`, vars{}, true},
		{`[["arg_a","in",[1,2]]]`, vars{"arg_a": "1"}, false}, // numbers never equal a string
		{`[[["arg_a","==","1"]]]`, vars{"arg_a": "1"}, true},
		{`[["OR",["arg_a","==","1"],["arg_b","==","2"]]]`, vars{"arg_b": "2"}, true},
		{`[["arg_a","==","1"],["arg_b","==","2"]]`, vars{"arg_b": "2"}, false},
	}
	for _, tt := range tests {
		v, _ := gateway.DecodeJSON([]byte(tt.expr))
		e, err := gateway.ParseVars(v.([]any))
		if err != nil {
			t.Fatalf("%s: %v", tt.expr, err)
		}
		if got := e.Eval(tt.v); got != tt.want {
			t.Errorf("%s on %v = %v, want %v", tt.expr, tt.v, got, tt.want)
		}
	}
}

func TestCompileInheritance(t *testing.T) {
	reg := gateway.NewRegistry()
	cfg := gateway.NewConfig()
	errs := cfg.Apply(gateway.Update{Reset: true, Entries: []gateway.Entry{
		{Kind: gateway.KindUpstream, ID: "u", Value: []byte(`{"type":"roundrobin","nodes":{"a:1":1}}`)},
		{Kind: gateway.KindService, ID: "s", Value: []byte(`{"upstream_id":"u","hosts":["svc.example"]}`)},
		{Kind: gateway.KindRoute, ID: "1", Value: []byte(`{"uri":"/a","service_id":"s"}`)},
		{Kind: gateway.KindRoute, ID: "2", Value: []byte(`{"uri":"/b","service_id":"s","hosts":["own.example"],"upstream":{"type":"roundrobin","nodes":{"b:1":1}}}`)},
		{Kind: gateway.KindRoute, ID: "3", Value: []byte(`{"uri":"/c","status":0,"upstream_id":"u"}`)},
		{Kind: gateway.KindRoute, ID: "4", Value: []byte(`{"uri":"/d","service_id":"missing"}`)},
		{Kind: gateway.KindRoute, ID: "5", Value: []byte(`not json`)},
	}}, reg)
	if len(errs) != 1 {
		t.Errorf("Apply errors %v, want one (routes/5)", errs)
	}
	c, errs := gateway.Compile(cfg, reg)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "service missing not found") {
		t.Errorf("Compile errors %v", errs)
	}
	if len(c.Routes) != 3 || c.Routes[2].ID != "4" || c.Routes[2].Fail != 404 {
		t.Fatalf("routes %d, want 1, 2 and 4 answering 404 (status 0 and invalid ones left out)", len(c.Routes))
	}
	r1, r2 := c.Routes[0], c.Routes[1]
	if r1.UpstreamKey != "upstreams/u" || r1.Hosts[0] != "svc.example" || r1.ServiceID != "s" {
		t.Errorf("route 1 inherits: %+v", r1)
	}
	if r2.UpstreamKey != "routes/2" || r2.Hosts[0] != "own.example" {
		t.Errorf("route 2 overrides: %+v", r2)
	}
}

// The domain imports only the standard library.
func TestDomainImportsStdOnly(t *testing.T) {
	for _, pkg := range []string{".", "./router"} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
		if err != nil {
			t.Skipf("go list: %v", err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if !strings.HasPrefix(dep, "github.com/linkgate/linkgate/gateway") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}

func FuzzCheck(f *testing.F) {
	f.Add(uint8(0), []byte(`{"uri":"/a","upstream":{"type":"roundrobin","nodes":{"a:1":1}}}`))
	f.Add(uint8(1), []byte(`{"type":"chash","key":"arg_x","nodes":[{"host":"a","port":1,"weight":1}],"checks":{"active":{}}}`))
	f.Add(uint8(0), []byte(`{"uris":["/a"],"vars":[["OR",["arg_a","~~","x"]]],"remote_addrs":["::1/128"]}`))
	f.Fuzz(func(t *testing.T, k uint8, data []byte) {
		kind := gateway.Kinds[int(k)%len(gateway.Kinds)]
		v, err := gateway.DecodeJSON(data)
		if err != nil {
			return
		}
		doc, ok := v.(map[string]any)
		if !ok {
			return
		}
		if gateway.Check(kind, doc, gateway.NewRegistry(), nil) != nil {
			return
		}
		// A valid document compiles without panicking.
		b, _ := json.Marshal(doc)
		cfg := gateway.NewConfig()
		cfg.Apply(gateway.Update{Entries: []gateway.Entry{{Kind: kind, ID: "1", Value: b}}}, gateway.NewRegistry())
		gateway.Compile(cfg, gateway.NewRegistry())
	})
}
