package trafficsplit

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
)

func TestPickerCycles(t *testing.T) {
	a, b, c := &gateway.UpstreamRef{Key: "a"}, &gateway.UpstreamRef{Key: "b"}, &gateway.UpstreamRef{Key: "c"}
	for _, tc := range []struct {
		choices []*gateway.UpstreamRef
		weights []int
		want    string // one cycle
	}{
		{[]*gateway.UpstreamRef{a, nil}, []int{2, 1}, "a a route"},
		{[]*gateway.UpstreamRef{a, b, nil}, []int{2, 2, 1}, "a a b b route"},
		{[]*gateway.UpstreamRef{a, b, c}, []int{5, 1, 1}, "a a a a a b c"},
		{[]*gateway.UpstreamRef{a, nil}, []int{1, 0}, "a"},
		{[]*gateway.UpstreamRef{a, b}, []int{200, 100}, "a a b"}, // gcd 100: a cycle of 3
		{[]*gateway.UpstreamRef{a, b}, []int{9000, 1}, ""},       // too long to precompute
	} {
		p := newPicker(tc.choices, tc.weights)
		cycle := 0
		for _, w := range tc.weights {
			cycle += w
		}
		if len(p.schedule) > 0 {
			cycle = len(p.schedule)
		}
		var got []string
		for range 3 * cycle {
			name := "route"
			if r := p.next(); r != nil {
				name = r.Key
			}
			got = append(got, name)
		}
		slices.Sort(got)
		counts := map[string]int{}
		for _, g := range got {
			counts[g]++
		}
		for i, ch := range tc.choices {
			name := "route"
			if ch != nil {
				name = ch.Key
			}
			if want := 3 * cycle * tc.weights[i] / sum(tc.weights); counts[name] != want {
				t.Errorf("weights %v: %s picked %d times in 3 cycles, want %d", tc.weights, name, counts[name], want)
			}
		}
		if tc.want != "" {
			var one []string
			for _, i := range p.schedule {
				name := "route"
				if r := tc.choices[i]; r != nil {
					name = r.Key
				}
				one = append(one, name)
			}
			slices.Sort(one)
			if strings.Join(one, " ") != tc.want {
				t.Errorf("weights %v: cycle %v, want %s", tc.weights, one, tc.want)
			}
		}
	}
	if r := newPicker([]*gateway.UpstreamRef{a}, []int{0}).next(); r != nil {
		t.Errorf("all weights 0: %v, want the route's", r)
	}
}

func sum(ws []int) int {
	n := 0
	for _, w := range ws {
		n += w
	}
	return n
}

func TestSchema(t *testing.T) {
	pre := "failed to check the configuration of plugin traffic-split err: "
	for conf, want := range map[string]string{
		`{"rules":[{"match":[{"vars":[["arg_name","==","jack"],["arg_age","!","<","16"]]}],"weighted_upstreams":[{"upstream":{"name":"upstream_A","type":"roundrobin","nodes":{"127.0.0.1:1981":2},"timeout":{"connect":15,"send":15,"read":15}},"weight":2},{"weight":1}]}]}`: "",
		`{"rules":[{"weighted_upstreams":[{"upstream_id":1,"weight":2}]}]}`:       "",
		`{"rules":[{"match":[{"vars":[["arg_name","<>","jack"]]}]}]}`:             pre + "failed to validate the 'vars' expression: invalid operator '<>'", // > compares at run time (lua-resty-expr)
		`{"rules":[{"weighted_upstreams":[{"weight":-1}]}]}`:                      pre + `property "rules" validation failed: failed to validate item 1: property "weighted_upstreams" validation failed: failed to validate item 1: property "weight" validation failed: expected -1 to be at least 0`,
		`{"rules":[{"weighted_upstreams":[{"upstream":{"type":"roundrobin"}}]}]}`: "*",
		`{}`: "",
	} {
		got := plugintest.Check(t, New(), conf, false)
		if got != want && !(want == "*" && strings.HasPrefix(got, pre)) {
			t.Errorf("%s:\n got %q\nwant %q", conf, got, want)
		}
	}
}

func FuzzConf(f *testing.F) {
	plugintest.FuzzConf(f, New(),
		`{"rules":[{"match":[{"vars":[["arg_name","==","jack"]]}],"weighted_upstreams":[{"upstream_id":"1","weight":2},{"weight":1}]}]}`,
		`{"rules":[{"weighted_upstreams":[{"upstream":{"type":"roundrobin","nodes":[{"host":"a","port":80,"weight":1}]}}]}]}`)
}

// server answers with its name.
func server(t *testing.T, name string) string {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, name) }))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// Through the real engine: rules, weights, upstream ids, inline upstreams
// and the route's own (traffic-split.t TEST 8-15, traffic-split4.t).
func TestProxy(t *testing.T) {
	a, b, r := server(t, "A"), server(t, "B"), server(t, "route")
	w := plugintest.Start(t, gateway.NewRegistry(New()), nil)
	w.Load(t, map[string]string{
		"upstreams/2": `{"type":"roundrobin","nodes":{"` + b + `":1}}`,
		"routes/1": `{"uri":"/server_port","upstream":{"type":"roundrobin","nodes":{"` + r + `":1}},"plugins":{"traffic-split":{"rules":[
			{"match":[{"vars":[["arg_name","==","jack"],["arg_age","!","<","16"]]}],
			 "weighted_upstreams":[{"upstream":{"type":"roundrobin","nodes":{"` + a + `":1}},"weight":2},{"weight":1}]},
			{"match":[{"vars":[["http_release","==","blue"]]},{"vars":[["arg_x","==","1"]]}],
			 "weighted_upstreams":[{"upstream_id":2}]},
			{"match":[{"vars":[["arg_missing","==","1"]]}],"weighted_upstreams":[{"upstream_id":"nope"}]}
		]}}}`,
	})
	hits := func(path string, n int, hdr ...string) string {
		var got []string
		for range n {
			resp := w.Do(t, "GET", path, "", hdr...)
			got = append(got, fmt.Sprint(resp.Status, " ", resp.Body))
		}
		slices.Sort(got)
		return strings.Join(got, ", ")
	}
	for _, tc := range []struct {
		path string
		hdr  []string
		n    int
		want string
	}{
		{"/server_port?name=jack&age=14", nil, 1, "200 route"},
		{"/server_port?name=jack&age=16", nil, 6, "200 A, 200 A, 200 A, 200 A, 200 route, 200 route"},
		{"/server_port", []string{"release", "blue"}, 2, "200 B, 200 B"},
		{"/server_port?x=1", nil, 1, "200 B"},
		{"/server_port?missing=1", nil, 1, "502 " + errorPage502},
	} {
		if got := hits(tc.path, tc.n, tc.hdr...); got != tc.want {
			t.Errorf("%s %v: %s, want %s", tc.path, tc.hdr, got, tc.want)
		}
	}
}

var errorPage502 = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>linkgate</center>\r\n</body>\r\n</html>\r\n"

func BenchmarkAccess(b *testing.B) {
	in := plugintest.New(b, New(), `{"rules":[{"match":[{"vars":[["arg_name","==","jack"]]}],"weighted_upstreams":[{"upstream_id":"1","weight":2},{"weight":1}]}]}`).(gateway.Accessor)
	c := plugintest.NewCtx(map[string]string{"arg_name": "jack"})
	b.ReportAllocs()
	for b.Loop() {
		in.Access(c)
	}
}
