package router_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/router"
)

type vars map[string]string

func (v vars) Var(name string) string { return v[name] }

func entry(id string, paths ...string) *gateway.RouteEntry {
	return &gateway.RouteEntry{ID: id, Paths: paths}
}

func mustExpr(t testing.TB, src string) *gateway.Expr {
	t.Helper()
	v, err := gateway.DecodeJSON([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	e, err := gateway.ParseVars(v.([]any))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestMatch(t *testing.T) {
	withPrio := func(e *gateway.RouteEntry, p int) *gateway.RouteEntry { e.Priority = p; return e }
	withMethods := func(e *gateway.RouteEntry, m ...string) *gateway.RouteEntry { e.Methods = m; return e }
	withHosts := func(e *gateway.RouteEntry, h ...string) *gateway.RouteEntry { e.Hosts = h; return e }
	withAddrs := func(e *gateway.RouteEntry, a ...string) *gateway.RouteEntry {
		for _, s := range a {
			p, err := gateway.ParseAddrOrPrefix(s)
			if err != nil {
				t.Fatal(err)
			}
			e.RemoteAddrs = append(e.RemoteAddrs, p)
		}
		return e
	}
	withVars := func(e *gateway.RouteEntry, src string) *gateway.RouteEntry { e.Vars = mustExpr(t, src); return e }

	routes := []*gateway.RouteEntry{
		entry("exact", "/hello"),
		entry("anything", "/anything/*"),
		entry("foo", "/foo*"),
		entry("deep", "/anything/deep/*"),
		withPrio(entry("low", "/prio"), 0),
		withPrio(entry("high", "/prio"), 10),
		withMethods(entry("post-only", "/m"), "POST"),
		withMethods(entry("get-any", "/m"), "GET", "HEAD"),
		withHosts(entry("host-exact", "/h"), "api.example.com"),
		withHosts(entry("host-wild", "/h"), "*.example.com"),
		entry("host-fallback", "/h*"),
		withAddrs(entry("cidr", "/ip"), "10.0.0.0/8", "::1"),
		withVars(entry("vars", "/v"), `[["arg_name","==","json"],["http_x_test","~~","^a.c$"]]`),
		entry("multi", "/a", "/b/*"),
		entry("root", "/*"),
		withPrio(entry("prefix-low", "/pp/*"), 1),
		withPrio(entry("prefix-high", "/pp/*"), 5),
	}
	r := router.Build(routes)
	local := netip.MustParseAddr("127.0.0.1")
	tests := []struct {
		name, method, host, path string
		addr                     netip.Addr
		vars                     vars
		want, wantPath           string
	}{
		{"exact", "GET", "", "/hello", local, nil, "exact", "/hello"},
		{"exact beats prefix", "GET", "", "/hello", local, nil, "exact", "/hello"},
		{"prefix with slash", "GET", "", "/anything/das", local, nil, "anything", "/anything/*"},
		{"prefix root of it", "GET", "", "/anything/", local, nil, "anything", "/anything/*"},
		{"prefix needs the slash", "GET", "", "/anything", local, nil, "root", "/*"},
		{"longest prefix wins", "GET", "", "/anything/deep/x", local, nil, "deep", "/anything/deep/*"},
		{"foo* matches /foo", "GET", "", "/foo", local, nil, "foo", "/foo*"},
		{"foo* matches /foobar", "GET", "", "/foobar/x", local, nil, "foo", "/foo*"},
		{"priority", "GET", "", "/prio", local, nil, "high", "/prio"},
		{"method POST", "POST", "", "/m", local, nil, "post-only", "/m"},
		{"method GET", "GET", "", "/m", local, nil, "get-any", "/m"},
		{"method none", "DELETE", "", "/m", local, nil, "root", "/*"},
		{"host exact", "GET", "api.example.com", "/h", local, nil, "host-exact", "/h"},
		{"host case", "GET", "API.Example.com", "/h", local, nil, "host-exact", "/h"},
		{"host wildcard", "GET", "www.example.com", "/h", local, nil, "host-wild", "/h"},
		{"wildcard needs a label", "GET", "example.com", "/h", local, nil, "host-fallback", "/h*"},
		{"host other", "GET", "other.org", "/h", local, nil, "host-fallback", "/h*"},
		{"cidr in", "GET", "", "/ip", netip.MustParseAddr("10.1.2.3"), nil, "cidr", "/ip"},
		{"cidr v6", "GET", "", "/ip", netip.MustParseAddr("::1"), nil, "cidr", "/ip"},
		{"cidr out", "GET", "", "/ip", local, nil, "root", "/*"},
		{"vars hold", "GET", "", "/v", local, vars{"arg_name": "json", "http_x_test": "abc"}, "vars", "/v"},
		{"vars fail", "GET", "", "/v", local, vars{"arg_name": "json", "http_x_test": "abcd"}, "root", "/*"},
		{"uris first", "GET", "", "/a", local, nil, "multi", "/a"},
		{"uris second", "GET", "", "/b/c", local, nil, "multi", "/b/*"},
		{"prefix priority", "GET", "", "/pp/x", local, nil, "prefix-high", "/pp/*"},
		{"root catches", "GET", "", "/zzz", local, nil, "root", "/*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := r.Match(tt.method, tt.host, tt.path, tt.addr, tt.vars)
			if m.Route == nil || m.Route.ID != tt.want || m.Path != tt.wantPath {
				got := "<nil>"
				if m.Route != nil {
					got = m.Route.ID
				}
				t.Fatalf("Match(%s %s%s) = %s %q, want %s %q", tt.method, tt.host, tt.path, got, m.Path, tt.want, tt.wantPath)
			}
		})
	}
}

func TestNoMatch(t *testing.T) {
	r := router.Build([]*gateway.RouteEntry{entry("a", "/a"), entry("b", "/b/*")})
	for _, p := range []string{"/", "/ab", "/b", "/c/b/"} {
		if m := r.Match("GET", "", p, netip.Addr{}, vars{}); m.Route != nil {
			t.Errorf("Match(%q) = %s, want none", p, m.Route.ID)
		}
	}
	if m := router.Build(nil).Match("GET", "", "/", netip.Addr{}, vars{}); m.Route != nil {
		t.Error("empty router matched")
	}
}

// reference is the obvious O(routes) matcher the router must agree with.
func reference(routes []*gateway.RouteEntry, method, path string) string {
	best, bestLen, bestPrio, bestExact := "", -1, 0, false
	for _, e := range routes {
		if len(e.Methods) > 0 && !contains(e.Methods, method) {
			continue
		}
		for _, p := range e.Paths {
			prefix, isPrefix := strings.CutSuffix(p, "*")
			exact := !isPrefix && p == path
			if !exact && !(isPrefix && strings.HasPrefix(path, prefix)) {
				continue
			}
			l := len(prefix)
			better := false
			switch {
			case best == "":
				better = true
			case exact != bestExact:
				better = exact
			case l != bestLen:
				better = l > bestLen
			default:
				better = e.Priority > bestPrio
			}
			if better {
				best, bestLen, bestPrio, bestExact = e.ID, l, e.Priority, exact
			}
		}
	}
	return best
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

func FuzzMatch(f *testing.F) {
	f.Add("/a/b", "/a/*", "/a/b", "/a*", "/a/b/c", byte(3))
	f.Add("/", "/*", "/x", "/", "/", byte(0))
	f.Add("/hello", "/hello", "/hell*", "/he*", "/hello/", byte(5))
	f.Fuzz(func(t *testing.T, p1, p2, p3, p4, path string, bits byte) {
		var routes []*gateway.RouteEntry
		for i, p := range []string{p1, p2, p3, p4} {
			if p == "" {
				continue
			}
			e := entry(fmt.Sprint(i), p)
			e.Priority = int(bits>>uint(i)) & 1
			if bits&(1<<uint(4+i)) != 0 {
				e.Methods = []string{"POST"}
			}
			routes = append(routes, e)
		}
		r := router.Build(routes)
		for _, method := range []string{"GET", "POST"} {
			m := r.Match(method, "", path, netip.Addr{}, vars{})
			got := ""
			if m.Route != nil {
				got = m.Route.ID
			}
			if want := reference(routes, method, path); got != want {
				// Equal paths with equal priority may legitimately pick either; compare their paths.
				if !samePath(routes, got, want) {
					t.Fatalf("routes %q %q %q %q, %s %q: router %q, reference %q", p1, p2, p3, p4, method, path, got, want)
				}
			}
		}
	})
}

func samePath(routes []*gateway.RouteEntry, a, b string) bool {
	var pa, pb *gateway.RouteEntry
	for _, e := range routes {
		if e.ID == a {
			pa = e
		}
		if e.ID == b {
			pb = e
		}
	}
	return pa != nil && pb != nil && pa.Paths[0] == pb.Paths[0] && pa.Priority == pb.Priority
}

// BenchmarkMatch matches against 10,000 routes: the cost follows the path's
// length, not the number of routes, and allocates nothing.
func BenchmarkMatch(b *testing.B) {
	for _, n := range []int{10, 10000} {
		var routes []*gateway.RouteEntry
		for i := range n {
			routes = append(routes, entry(fmt.Sprint("e", i), fmt.Sprintf("/api/v1/service%d/items", i)))
			routes = append(routes, entry(fmt.Sprint("p", i), fmt.Sprintf("/static/%d/*", i)))
		}
		r := router.Build(routes)
		addr := netip.MustParseAddr("127.0.0.1")
		v := vars{}
		b.Run(fmt.Sprintf("exact/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			path := fmt.Sprintf("/api/v1/service%d/items", n/2)
			for b.Loop() {
				if r.Match("GET", "example.com", path, addr, v).Route == nil {
					b.Fatal("no match")
				}
			}
		})
		b.Run(fmt.Sprintf("prefix/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			path := fmt.Sprintf("/static/%d/css/site/main.css", n/2)
			for b.Loop() {
				if r.Match("GET", "example.com", path, addr, v).Route == nil {
					b.Fatal("no match")
				}
			}
		})
	}
}

func TestModes(t *testing.T) {
	withHosts := func(e *gateway.RouteEntry, h ...string) *gateway.RouteEntry { e.Hosts = h; return e }
	withPrio := func(e *gateway.RouteEntry, p int) *gateway.RouteEntry { e.Priority = p; return e }
	routes := []*gateway.RouteEntry{
		withPrio(entry("nohost-exact", "/hello"), 10),
		withHosts(entry("host-prefix", "/*"), "foo.com"),
		withHosts(entry("wild", "/hello"), "*.foo.com"),
		withHosts(entry("wild-long", "/hello"), "*.a.foo.com"),
		entry("param", "/name/:name/bar"),
		entry("param-root", "/:name/foo"),
		entry("star", "/files/*path"),
	}
	tests := []struct {
		mode       router.Mode
		host, path string
		want       string
	}{
		// radixtree_uri: an exact path beats a prefix, the host only filters.
		{router.ModeURI, "foo.com", "/hello", "nohost-exact"},
		{router.ModeURI, "foo.com", "/name/json/bar", "host-prefix"}, // no parameters: "/name/:name/bar" is literal
		// radixtree_host_uri: routes of the request's host first, exact hosts
		// before wildcards, the longest wildcard first.
		{router.ModeHostURI, "foo.com", "/hello", "host-prefix"},
		{router.ModeHostURI, "FOO.com", "/x", "host-prefix"},
		{router.ModeHostURI, "x.foo.com", "/hello", "wild"},
		{router.ModeHostURI, "x.a.foo.com", "/hello", "wild-long"},
		{router.ModeHostURI, "x.a.foo.com", "/other", ""},
		{router.ModeHostURI, "bar.com", "/hello", "nohost-exact"},
		// radixtree_uri_with_parameter
		{router.ModeURIWithParams, "", "/name/json/bar", "param"},
		{router.ModeURIWithParams, "", "/name//bar", ""},
		{router.ModeURIWithParams, "", "/name/json/", ""},
		{router.ModeURIWithParams, "", "/name/json/bar/x", ""},
		{router.ModeURIWithParams, "", "/json/foo", "param-root"},
		{router.ModeURIWithParams, "", "/json/bbb/foo", ""},
		{router.ModeURIWithParams, "", "/files/a/b/c", "star"},
	}
	for _, tt := range tests {
		r := router.BuildMode(routes, tt.mode)
		got := r.Match("GET", tt.host, tt.path, netip.MustParseAddr("127.0.0.1"), vars{}).Route
		id := ""
		if got != nil {
			id = got.ID
		}
		if id != tt.want {
			t.Errorf("%s %s%s: %q, want %q", tt.mode, tt.host, tt.path, id, tt.want)
		}
	}
}
