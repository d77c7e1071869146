package iprestriction

import (
	"net/netip"
	"testing"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
)

func TestSchema(t *testing.T) {
	for _, tc := range []struct{ conf, err string }{
		{`{"whitelist":["10.0.0.0/8","::1"]}`, ""},
		{`{"blacklist":["127.0.0.1"],"message":"go away"}`, ""},
		{`{"whitelist":["10.0.0.0/8"],"blacklist":["10.0.0.1"]}`, "value should match only one schema, but matches both schemas 1 and 2"},
		{`{}`, "value should match only one schema, but matches none"},
		{`{"whitelist":[]}`, `property "whitelist" validation failed: expect array to have at least 1 items`},
		{`{"whitelist":["1.2.3.4/33"]}`, `property "whitelist" validation failed: failed to validate item 1: object matches none of the required`},
		{`{"whitelist":["::1/129"]}`, "invalid ip address: ::1/129"},
		{`{"blacklist":["1.2.3.4"],"message":""}`, `property "message" validation failed: string too short, expected at least 1, got 0`},
	} {
		got := plugintest.Check(t, New(), tc.conf, false)
		if want := tc.err; want != "" {
			want = "failed to check the configuration of plugin ip-restriction err: " + want
			// The anyOf wording is the schema's; tolerate its older form.
			if got != want && !(tc.err[len(tc.err)-8:] == "required" && got == want+"s") {
				t.Errorf("%s: %q, want %q", tc.conf, got, want)
			}
		} else if got != "" {
			t.Errorf("%s: %q", tc.conf, got)
		}
	}
}

func TestAccess(t *testing.T) {
	for _, tc := range []struct {
		conf, addr string
		status     int
		body       string
	}{
		{`{"whitelist":["10.0.0.0/8"]}`, "10.1.2.3", 0, ""},
		{`{"whitelist":["10.0.0.0/8"]}`, "11.1.2.3", 403, `{"message":"Your IP address is not allowed"}` + "\n"},
		{`{"blacklist":["10.0.0.0/8","::1"]}`, "::1", 403, `{"message":"Your IP address is not allowed"}` + "\n"},
		{`{"blacklist":["10.0.0.0/8"]}`, "127.0.0.1", 0, ""},
		{`{"blacklist":["127.0.0.1"],"message":"Do you want to <do> something bad?"}`, "127.0.0.1", 403, `{"message":"Do you want to <do> something bad?"}` + "\n"},
	} {
		in := plugintest.New(t, New(), tc.conf).(gateway.Accessor)
		c := plugintest.NewCtx(nil)
		c.Remote = netip.MustParseAddr(tc.addr)
		rep := in.Access(c)
		if rep.Status != tc.status || string(rep.Body) != tc.body {
			t.Errorf("%s from %s: %d %q, want %d %q", tc.conf, tc.addr, rep.Status, rep.Body, tc.status, tc.body)
		}
	}
}

func BenchmarkAccess(b *testing.B) {
	in := plugintest.New(b, New(), `{"whitelist":["10.0.0.0/8","192.168.0.0/16","127.0.0.1"]}`).(gateway.Accessor)
	c := plugintest.NewCtx(nil)
	b.ReportAllocs()
	for b.Loop() {
		if in.Access(c).Status != 0 {
			b.Fatal("rejected")
		}
	}
}
