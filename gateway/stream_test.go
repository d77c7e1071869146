package gateway_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/gateway"
)

// Stream routes decode, validate and compile as the HTTP ones: an
// upstream resolved from the route, its upstream_id or its service; what
// the stream proxy cannot serve is skipped with the reason.
func TestStreamRoutesCompile(t *testing.T) {
	reg := gateway.NewRegistry()
	cfg := gateway.NewConfig()
	const up = `{"nodes":{"127.0.0.1:1995":1},"type":"roundrobin"}`
	errs := cfg.Apply(gateway.Update{Reset: true, Entries: []gateway.Entry{
		entry(gateway.KindUpstream, "1", `{"nodes":{"127.0.0.1:1995":1},"type":"roundrobin","scheme":"tcp"}`),
		entry(gateway.KindService, "s", `{"upstream_id":"1"}`),
		entry(gateway.KindStreamRoute, "inline", `{"remote_addr":"127.0.0.1","upstream":`+up+`}`),
		entry(gateway.KindStreamRoute, "byid", `{"server_port":9100,"upstream_id":"1"}`),
		entry(gateway.KindStreamRoute, "bysvc", `{"sni":"A.test","service_id":"s"}`),
		entry(gateway.KindStreamRoute, "missing", `{"upstream_id":"nope"}`),
		entry(gateway.KindStreamRoute, "badaddr", `{"remote_addr":":/8","upstream":`+up+`}`),
		entry(gateway.KindStreamRoute, "plugin", `{"plugins":{"mqtt-proxy":{}},"upstream":`+up+`}`),
		entry(gateway.KindStreamRoute, "extra", `{"uri":"/a","upstream":`+up+`}`),
		entry(gateway.KindRoute, "http-on-tcp", `{"uri":"/a","upstream_id":"1"}`),
	}}, reg)
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		"stream_routes/badaddr: invalid remote_addr: :/8",
		"stream_routes/plugin: stream plugin mqtt-proxy is not supported by linkgate",
		`stream_routes/extra: invalid configuration: additional properties forbidden, found uri`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("apply errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	c, cerrs := gateway.Compile(cfg, reg)
	got = got[:0]
	for _, e := range cerrs {
		got = append(got, e.Error())
	}
	want = []string{"routes/http-on-tcp: upstream scheme tcp is for stream routes, not HTTP ones", "stream_routes/missing: upstream nope not found"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("compile errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	keys := map[string]string{}
	for _, e := range c.StreamRoutes {
		keys[e.ID] = e.UpstreamKey
	}
	wantKeys := map[string]string{"inline": "stream_routes/inline", "byid": "upstreams/1", "bysvc": "upstreams/1"}
	if len(keys) != len(wantKeys) {
		t.Fatalf("stream routes %v, want %v", keys, wantKeys)
	}
	for id, k := range wantKeys {
		if keys[id] != k {
			t.Errorf("stream route %s: upstream %q, want %q", id, keys[id], k)
		}
	}
	if len(c.Routes) != 1 || c.Routes[0].Fail != 502 {
		t.Errorf("HTTP route on a tcp upstream: %+v, want it answering 502", c.Routes)
	}
}

func TestMatchStream(t *testing.T) {
	mk := func(id, remote, server string, port int, sni string) *gateway.StreamRouteEntry {
		e := &gateway.StreamRouteEntry{ID: id, ServerPort: port, SNI: sni}
		if remote != "" {
			e.RemoteAddr = netip.MustParsePrefix(remote)
		}
		if server != "" {
			e.ServerAddr = netip.MustParsePrefix(server)
		}
		return e
	}
	routes := []*gateway.StreamRouteEntry{
		mk("a", "10.0.0.0/8", "", 0, ""),
		mk("b", "", "127.0.0.2/32", 0, ""),
		mk("c", "", "", 9100, ""),
		mk("d", "", "", 0, "*.x.test"),
		mk("e", "", "", 0, "*.b.x.test"),
		mk("f", "", "", 0, "a.b.x.test"),
		mk("g", "192.168.0.0/16", "", 0, "*.y.test"),
	}
	ap := netip.MustParseAddrPort
	for _, tc := range []struct {
		name, remote, local, sni, want string
	}{
		{"remote CIDR", "10.1.2.3:5000", "127.0.0.1:9000", "", "a"},
		{"server addr", "127.0.0.1:5000", "127.0.0.2:9000", "", "b"},
		{"server port", "127.0.0.1:5000", "127.0.0.1:9100", "", "c"},
		{"IPv4-mapped remote", "[::ffff:10.0.0.1]:5000", "127.0.0.1:9000", "", "a"},
		{"no match", "127.0.0.1:5000", "127.0.0.1:9000", "", ""},
		{"wildcard sni", "127.0.0.1:5000", "127.0.0.1:9000", "q.x.test", "d"},
		{"deeper wildcard", "127.0.0.1:5000", "127.0.0.1:9000", "z.q.x.test", "d"},
		{"longer wildcard first", "127.0.0.1:5000", "127.0.0.1:9000", "q.b.x.test", "e"},
		{"exact sni first", "127.0.0.1:5000", "127.0.0.1:9000", "A.b.x.test", "f"},
		{"sni route whose addr misses, then the others", "10.0.0.1:5000", "127.0.0.1:9000", "a.y.test", "a"},
		{"sni route with addr", "192.168.1.1:5000", "127.0.0.1:9000", "a.y.test", "g"},
		{"unknown sni falls to plain routes", "127.0.0.1:5000", "127.0.0.1:9100", "other.test", "c"},
		{"plain TCP never meets sni routes", "127.0.0.1:5000", "127.0.0.1:9000", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if r := gateway.MatchStream(routes, ap(tc.remote), ap(tc.local), tc.sni); r != nil {
				got = r.ID
			}
			if got != tc.want {
				t.Errorf("matched %q, want %q", got, tc.want)
			}
		})
	}
}
