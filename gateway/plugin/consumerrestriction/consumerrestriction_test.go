package consumerrestriction

import (
	"encoding/json"
	"testing"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
)

func TestSchema(t *testing.T) {
	const prefix = "failed to check the configuration of plugin consumer-restriction err: "
	for _, tc := range []struct{ conf, err, stored string }{
		{`{"title":"whitelist","whitelist":["jack1","jack2"]}`, "", `{"rejected_code":403,"title":"whitelist","type":"consumer_name","whitelist":["jack1","jack2"]}`},
		{`{"whitelist":["jack1"],"blacklist":["jack2"],"allowed_by_methods":[]}`, "", ""},
		{`{"allowed_by_methods":[{"user":"jack1","methods":["POST"]}]}`, "", ""},
		{`{"type":"consumer_group_id","blacklist":["g"],"rejected_code":401,"rejected_msg":"no"}`, "", ""},
		{`{}`, `object matches none of the required: ["blacklist"] or ["whitelist"] or ["allowed_by_methods"]`, ""},
		{`{"whitelist":[]}`, `property "whitelist" validation failed: expect array to have at least 1 items`, ""},
		{`{"whitelist":["a"],"type":"host"}`, `property "type" validation failed: matches none of the enum values`, ""},
		{`{"allowed_by_methods":[{"user":"a","methods":["FETCH"]}]}`, `property "allowed_by_methods" validation failed: failed to validate item 1: property "methods" validation failed: failed to validate item 1: matches none of the enum values`, ""},
		{`{"whitelist":["a"],"rejected_code":100}`, `property "rejected_code" validation failed: expected 100 to be at least 200`, ""},
	} {
		got := plugintest.Check(t, New(), tc.conf, false)
		want := tc.err
		if want != "" {
			want = prefix + want
		}
		if got != want {
			t.Errorf("%s: %q, want %q", tc.conf, got, want)
		}
		if tc.stored != "" {
			v, _ := gateway.DecodeJSON([]byte(tc.conf))
			plugins := map[string]any{Name: v}
			if err := gateway.NewRegistry(New()).Check(plugins, false); err != nil {
				t.Fatal(err)
			}
			if b, _ := json.Marshal(plugins[Name]); string(b) != tc.stored {
				t.Errorf("%s: stored %s, want %s", tc.conf, b, tc.stored)
			}
		}
	}
}

func TestAccess(t *testing.T) {
	jack1 := &gateway.ConsumerEntry{Username: "jack1", GroupID: "group1"}
	jack2 := &gateway.ConsumerEntry{Username: "jack2", GroupID: "group2"}
	jack3 := &gateway.ConsumerEntry{Username: "jack3"}
	const forbidden = `{"message":"The consumer_name is forbidden."}` + "\n"
	for _, tc := range []struct {
		name, conf string
		user       *gateway.ConsumerEntry
		method     string
		vars       map[string]string
		status     int
		body       string
	}{
		{"whitelisted", `{"whitelist":["jack1"]}`, jack1, "GET", nil, 0, ""},
		{"not whitelisted", `{"whitelist":["jack1"]}`, jack2, "GET", nil, 403, forbidden},
		{"blacklisted", `{"blacklist":["jack1"]}`, jack1, "GET", nil, 403, forbidden},
		{"not blacklisted", `{"blacklist":["jack1"]}`, jack2, "GET", nil, 0, ""},
		{"no consumer", `{"whitelist":["jack1"]}`, nil, "GET", nil, 401, `{"message":"The request is rejected, please check the consumer_name for this request"}` + "\n"},
		{"blacklist before whitelist", `{"whitelist":["jack1"],"blacklist":["jack1"]}`, jack1, "GET", nil, 403, forbidden},
		{"method allowed", `{"allowed_by_methods":[{"user":"jack1","methods":["POST","GET"]}]}`, jack1, "GET", nil, 0, ""},
		{"method not allowed", `{"allowed_by_methods":[{"user":"jack1","methods":["POST"]}]}`, jack1, "GET", nil, 403, forbidden},
		{"no entry for the user", `{"allowed_by_methods":[{"user":"jack1","methods":["POST"]}]}`, jack2, "GET", nil, 0, ""},
		{"whitelisted overrides methods", `{"whitelist":["jack1"],"allowed_by_methods":[{"user":"jack1","methods":["POST"]}]}`, jack1, "GET", nil, 0, ""},
		{"the first entry decides", `{"allowed_by_methods":[{"user":"jack1","methods":["POST"]},{"user":"jack1","methods":["GET"]}]}`, jack1, "GET", nil, 403, forbidden},
		{"rejected_code and msg", `{"blacklist":["jack1"],"rejected_code":401,"rejected_msg":"go away"}`, jack1, "GET", nil, 401, `{"message":"go away"}` + "\n"},
		{"group whitelisted", `{"type":"consumer_group_id","whitelist":["group1"]}`, jack1, "GET", nil, 0, ""},
		{"group not whitelisted", `{"type":"consumer_group_id","whitelist":["group1"]}`, jack2, "GET", nil, 403, `{"message":"The consumer_group_id is forbidden."}` + "\n"},
		{"no group", `{"type":"consumer_group_id","whitelist":["group1"]}`, jack3, "GET", nil, 401, `{"message":"The request is rejected, please check the consumer_group_id for this request"}` + "\n"},
		{"service blacklisted", `{"type":"service_id","blacklist":["1"]}`, nil, "GET", map[string]string{"service_id": "1"}, 403, `{"message":"The service_id is forbidden."}` + "\n"},
		{"no service", `{"type":"service_id","blacklist":["1"]}`, nil, "GET", nil, 401, `{"message":"The request is rejected, please check the service_id for this request"}` + "\n"},
		{"route whitelisted", `{"type":"route_id","whitelist":["1"]}`, nil, "GET", map[string]string{"route_id": "1"}, 0, ""},
	} {
		in := plugintest.New(t, New(), tc.conf).(gateway.Accessor)
		c := plugintest.NewCtx(tc.vars)
		c.Vars["request_method"] = tc.method
		c.User = tc.user
		rep := in.Access(c)
		if rep.Status != tc.status || string(rep.Body) != tc.body {
			t.Errorf("%s: %d %q, want %d %q", tc.name, rep.Status, rep.Body, tc.status, tc.body)
		}
	}
}

func FuzzConf(f *testing.F) {
	plugintest.FuzzConf(f, New(), `{"whitelist":["a"],"allowed_by_methods":[{"user":"a","methods":["GET"]}]}`, `{"type":"route_id","blacklist":["1"]}`)
}

func BenchmarkAccess(b *testing.B) {
	in := plugintest.New(b, New(), `{"whitelist":["jack0","jack1","jack2"],"allowed_by_methods":[{"user":"jack3","methods":["GET"]}]}`).(gateway.Accessor)
	c := plugintest.NewCtx(nil)
	c.User = &gateway.ConsumerEntry{Username: "jack2"}
	b.ReportAllocs()
	for b.Loop() {
		if in.Access(c).Status != 0 {
			b.Fatal("rejected")
		}
	}
}
