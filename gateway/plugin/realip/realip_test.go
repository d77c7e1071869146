package realip

import (
	"net/netip"
	"testing"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
)

func TestParseAddr(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ip   string
		port int
	}{
		{"1.1.1.1", "1.1.1.1", 0},
		{"1.1.1.1:80", "1.1.1.1", 80},
		{"1.1.1.1:65535", "1.1.1.1", 65535},
		{"1.1.1.1:abc", "1.1.1.1", 0}, // tonumber(port) is nil: no port
		{"::1", "::1", 0},
		{"2001:db8::68", "2001:db8::68", 0},
		{"::ffff:192.0.2.1", "::ffff:192.0.2.1", 0},
		{"[::1]", "::1", 0},
		{"[::1]:8080", "::1", 8080},
		{"1.1.1.1.1", "", 0},
		{"1.1.1.1:65536", "", 0},
		{"1.1.1.1:0", "", 0},
		{"[::1]:0", "", 0},
		{"[::1", "", 0},
		{"[::1]x80", "", 0},
		{"localhost", "", 0},
		{"", "", 0},
		{"fe80::1%eth0", "", 0},
	} {
		ip, port, ok := ParseAddr(tc.in)
		if tc.ip == "" {
			if ok {
				t.Errorf("ParseAddr(%q) = %v %d, want invalid", tc.in, ip, port)
			}
			continue
		}
		if !ok || ip.String() != tc.ip || port != tc.port {
			t.Errorf("ParseAddr(%q) = %v %d %v, want %s %d", tc.in, ip, port, ok, tc.ip, tc.port)
		}
	}
}

func FuzzParseAddr(f *testing.F) {
	for _, s := range []string{"1.1.1.1:80", "[::1]:8080", "::1", "[::1]", "a:b", ":"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ip, port, ok := ParseAddr(s)
		if !ok {
			return
		}
		if port < 0 || port > 65535 || !ip.IsValid() || ip.Zone() != "" {
			t.Fatalf("%q: %v %d", s, ip, port)
		}
		// What it accepts, written back as host:port, reads the same.
		again := ip.String()
		if port != 0 {
			again = netip.AddrPortFrom(ip, uint16(port)).String()
		}
		if ip2, port2, ok := ParseAddr(again); !ok || ip2 != ip || port2 != port {
			t.Fatalf("%q → %v %d → %q → %v %d %v", s, ip, port, again, ip2, port2, ok)
		}
	})
}

func TestRewrite(t *testing.T) {
	for _, tc := range []struct {
		conf   string
		vars   map[string]string
		remote string
		want   string
		port   int
	}{
		{`{"source":"http_xff"}`, map[string]string{"http_xff": "1.1.1.1"}, "127.0.0.1", "1.1.1.1", 40000},
		{`{"source":"http_xff"}`, map[string]string{"http_xff": "1.1.1.1:7090"}, "127.0.0.1", "1.1.1.1", 7090},
		{`{"source":"http_xff"}`, map[string]string{"http_xff": "1.1.1.1.1"}, "127.0.0.1", "127.0.0.1", 40000},
		{`{"source":"http_xff"}`, map[string]string{}, "127.0.0.1", "127.0.0.1", 40000},
		{`{"source":"arg_realip"}`, map[string]string{"arg_realip": "[::2]:81"}, "127.0.0.1", "::2", 81},
		{`{"source":"http_x_forwarded_for"}`, map[string]string{"http_x_forwarded_for": "::1, ::2"}, "127.0.0.1", "::2", 40000},
		{`{"source":"http_x_forwarded_for","trusted_addresses":["192.128.0.0/16"]}`, map[string]string{"http_x_forwarded_for": "1.1.1.1"}, "127.0.0.1", "127.0.0.1", 40000},
		{`{"source":"http_x_forwarded_for","trusted_addresses":["192.128.0.0/16","127.0.0.0/24"]}`, map[string]string{"http_x_forwarded_for": "1.1.1.1"}, "127.0.0.1", "1.1.1.1", 40000},
		// Recursive: the last untrusted address.
		{`{"source":"http_x_forwarded_for","trusted_addresses":["192.128.0.0/16","127.0.0.0/24"],"recursive":true}`,
			map[string]string{"http_x_forwarded_for": "1.1.1.1, 192.128.1.1, 127.0.0.1"}, "127.0.0.1", "1.1.1.1", 40000},
		{`{"source":"http_x_forwarded_for","trusted_addresses":["192.128.0.0/16","127.0.0.0/24"],"recursive":true}`,
			map[string]string{"http_x_forwarded_for": "2.2.2.2, 1.1.1.1, 192.128.1.1"}, "127.0.0.1", "1.1.1.1", 40000},
		{`{"source":"http_x_forwarded_for","trusted_addresses":["0.0.0.0/0"],"recursive":true}`,
			map[string]string{"http_x_forwarded_for": "3.3.3.3,1.1.1.1"}, "127.0.0.1", "3.3.3.3", 40000},
		// Not recursive: the last one, whatever it is.
		{`{"source":"http_x_forwarded_for","trusted_addresses":["0.0.0.0/0"]}`,
			map[string]string{"http_x_forwarded_for": "3.3.3.3,  1.1.1.1"}, "127.0.0.1", "1.1.1.1", 40000},
	} {
		in := plugintest.New(t, New(), tc.conf).(gateway.Rewriter)
		c := plugintest.NewCtx(tc.vars)
		c.Remote = netip.MustParseAddr(tc.remote)
		if rep := in.Rewrite(c); rep.Status != 0 {
			t.Errorf("%s: reply %d", tc.conf, rep.Status)
		}
		if c.Remote.String() != tc.want || c.RemotePort != tc.port {
			t.Errorf("%s %v: remote %v:%d, want %s:%d", tc.conf, tc.vars, c.Remote, c.RemotePort, tc.want, tc.port)
		}
	}
}

func TestSchema(t *testing.T) {
	pre := "failed to check the configuration of plugin real-ip err: "
	for conf, want := range map[string]string{
		`{"source":"http_xff"}`: "",
		`{}`:                    pre + `property "source" is required`,
		`{"source":"http_xff","trusted_addresses":["::1/129"]}`:      pre + "invalid ip address: ::1/129",
		`{"source":"http_xff","trusted_addresses":["127.0.0.1/33"]}`: pre + `property "trusted_addresses" validation failed: failed to validate item 1: object matches none of the required`,
	} {
		got := plugintest.Check(t, New(), conf, false)
		if got != want && got != want+"s" { // tolerate the schema's older anyOf wording
			t.Errorf("%s: %q, want %q", conf, got, want)
		}
	}
}

func BenchmarkRewrite(b *testing.B) {
	in := plugintest.New(b, New(), `{"source":"http_x_forwarded_for","trusted_addresses":["127.0.0.0/8"],"recursive":true}`).(gateway.Rewriter)
	c := plugintest.NewCtx(map[string]string{"http_x_forwarded_for": "1.1.1.1, 127.0.0.2"})
	orig := c.Remote
	b.ReportAllocs()
	for b.Loop() {
		c.Remote = orig
		in.Rewrite(c)
	}
}
