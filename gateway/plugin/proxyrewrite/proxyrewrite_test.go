package proxyrewrite

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
)

func TestSchema(t *testing.T) {
	pre := "failed to check the configuration of plugin proxy-rewrite err: "
	for conf, want := range map[string]string{
		`{"uri":"/x","headers":{"X-Api":"v2","X-N":1}}`:                            "",
		`{"headers":{"add":{"a":"1","b":["x",2]},"set":{"c":"3"},"remove":["d"]}}`: "",
		`{"headers":{"X-Api:Version":"v2"}}`:                                       pre + "invalid field character in header",
		`{"headers":{"X-Api":"v2\r\n"}}`:                                           pre + "invalid value character in header",
		`{"headers":{"X-Api":["v2"]}}`:                                             pre + `property "headers" validation failed: value should match only one schema, but matches none`,
		`{"headers":{"add":{"a":{}}}}`:                                             pre + `property "headers" validation failed: value should match only one schema, but matches none`,
		`{"headers":{"add":{"a":"1"},"other":"x"}}`:                                pre + `property "headers" validation failed: value should match only one schema, but matches none`,
		`{"headers":{"remove":[]}}`:                                                pre + `property "headers" validation failed: value should match only one schema, but matches none`,
		`{"regex_uri":["^/a/(.*)","/b/$1","^/c","/d"]}`:                            "",
		`{"regex_uri":["^/a/(.*)","/b/$1","^/c"]}`:                                 pre + "The length of regex_uri should be an even number",
		`{"regex_uri":["^/a/(.*","/b"]}`:                                           pre + "invalid regex_uri(^/a/(.*, /b): error parsing regexp: missing closing ): `^/a/(.*`",
	} {
		if got := plugintest.Check(t, New(), conf, false); got != want {
			t.Errorf("%s:\n got %q\nwant %q", conf, got, want)
		}
	}
}

// TestRewrite follows APISIX 3.x's t/plugin/proxy-rewrite.t and
// proxy-rewrite3.t: what goes upstream.
func TestRewrite(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		vars       map[string]string
		uri        string   // upstream URI, "" = unchanged
		set, added []string // "name=value" in order
	}{
		{"2.14 form sets", `{"uri":"/x","headers":{"X-B":"2","X-A":"$host"}}`, nil, "/x", []string{"X-A=localhost", "X-B=2"}, nil},
		{"add, set, remove in that order", `{"headers":{"add":{"test":"123"},"set":{"test2":"2233"},"remove":["hello"]}}`, nil, "/",
			[]string{"test2=2233", "hello="}, []string{"test=123"}},
		{"array values: one line each", `{"headers":{"set":{"x-multi":["v1",2]},"add":{"x-add":["a","b"]}}}`, nil, "/",
			[]string{"x-multi=v1"}, []string{"x-add=a", "x-add=b", "x-multi=2"}},
		{"captures in headers", `{"regex_uri":["^/test/(.*)/(.*)/(.*)","/echo"],"headers":{"add":{"X-Request-ID":"$1/${2}/$3"}}}`,
			map[string]string{"uri": "/test/plugin/proxy/rewrite"}, "/echo", nil, []string{"X-Request-ID=plugin/proxy/rewrite"}},
		{"a group that took no part is empty", `{"regex_uri":["^/test/(not_matched)?.*","/echo"],"headers":{"add":{"X-Request-ID":"test1/$1/$2/test2"}}}`,
			map[string]string{"uri": "/test/x"}, "/echo", nil, []string{"X-Request-ID=test1///test2"}},
		{"no match: captures are empty, the path escaped again", `{"regex_uri":["^/test/(.*)","/echo"],"headers":{"set":{"X":"[$1]\\$1"}}}`,
			map[string]string{"uri": "/echo a"}, "/echo%20a", []string{`X=[]\$1`}, nil},
		{"the second pair matches", `{"regex_uri":["^/test/(.*)/hello","/hello/$1","^/test/(.*)/world","/world/$1"]}`,
			map[string]string{"uri": "/test/a/world"}, "/world/a", nil, nil},
		{"only the match is replaced", `{"regex_uri":["^/aaa","/bbb"]}`, map[string]string{"uri": "/aaa/c"}, "/bbb/c", nil, nil},
		{"uri with args", `{"uri":"/plugin_proxy_rewrite_args?q=apisix"}`, map[string]string{"query_string": "a=c", "is_args": "?"},
			"/plugin_proxy_rewrite_args?q=apisix&a=c", nil, nil},
		{"headers only: the matched path, escaped", `{"headers":{"X":"1"}}`, map[string]string{"uri": "/print_uri detailed", "request_uri": "/print%5Furi%20detailed?a=1", "query_string": "a=1", "is_args": "?"},
			"/print_uri%20detailed?a=1", []string{"X=1"}, nil},
		{"unsafe: the request line's uri", `{"use_real_request_uri_unsafe":true}`, map[string]string{"uri": "/print_uri_detailed", "request_uri": "/print%5Furi%5Fdetailed?a=1?b=2", "query_string": "a=1?b=2", "is_args": "?"},
			"/print%5Furi%5Fdetailed?a=1?b=2", nil, nil},
		{"unsafe with uri: the client's query as sent", `{"uri":"/print_uri_detailed","use_real_request_uri_unsafe":true}`, map[string]string{"uri": "/hello", "request_uri": "/hello?name=a%20b&x=%E4%B8%AD", "query_string": "name=a%20b&x=%E4%B8%AD", "is_args": "?"},
			"/print_uri_detailed?name=a%20b&x=%E4%B8%AD", nil, nil},
	} {
		in := plugintest.New(t, NewWithOptions(Options{V3: true}), tc.conf).(gateway.Rewriter)
		c := plugintest.NewCtx(tc.vars)
		in.Rewrite(c)
		var set, added []string
		for _, h := range c.UpstreamHeaders {
			set = append(set, h.Name+"="+h.Value)
		}
		for _, h := range c.UpstreamAdded {
			added = append(added, h.Name+"="+h.Value)
		}
		if c.UpstreamURI != tc.uri || !slices.Equal(set, tc.set) || !slices.Equal(added, tc.added) {
			t.Errorf("%s: uri %q set %q added %q, want %q %q %q", tc.name, c.UpstreamURI, set, added, tc.uri, tc.set, tc.added)
		}
	}
}

// Without Options.V3 no default 2.14 lacked is stored.
func TestDefaults(t *testing.T) {
	for _, tc := range []struct {
		f    *Factory
		want bool
	}{{New(), false}, {NewWithOptions(Options{V3: true}), true}} {
		v, _ := gateway.DecodeJSON([]byte(`{"uri":"/x"}`))
		plugins := map[string]any{Name: v}
		if err := gateway.NewRegistry(tc.f).Check(plugins, false); err != nil {
			t.Fatal(err)
		}
		_, has := plugins[Name].(map[string]any)["use_real_request_uri_unsafe"]
		if has != tc.want {
			t.Errorf("v3 %v: default stored %v", tc.f.v3, has)
		}
	}
}

func TestCaptures(t *testing.T) {
	caps := []string{"/test/a/b", "a", "b"}
	for in, want := range map[string]string{
		"$1/${2}/$3":    "a/b/",
		`\$1-$1`:        `\$1-a`,
		"$x$":           "$x$",
		"${1}x${2":      "axb",
		"$$1":           "$a",
		"no references": "no references",
	} {
		if got := withCaptures(in, caps); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// FuzzCaptures checks withCaptures against APISIX's pattern, as a regexp
// tried at each '$' not preceded by '\\' (Go's regexp has no lookbehind).
func FuzzCaptures(f *testing.F) {
	for _, s := range []string{"$1/${2}/$3", `\$1`, "${", "$99999999999999999999", "$", "$$7{0"} {
		f.Add(s)
	}
	ref := regexp.MustCompile(`^\$\{?(\d+)\}?`)
	caps := []string{"whole", "a", "$1"}
	f.Fuzz(func(t *testing.T, v string) {
		var want strings.Builder
		for i := 0; i < len(v); i++ {
			if m := ref.FindStringSubmatch(v[i:]); m != nil && (i == 0 || v[i-1] != '\\') {
				if n, err := strconv.Atoi(m[1]); err == nil && n < len(caps) {
					want.WriteString(caps[n])
				}
				i += len(m[0]) - 1
				continue
			}
			want.WriteByte(v[i])
		}
		if got := withCaptures(v, caps); got != want.String() {
			t.Fatalf("%q: %q, want %q", v, got, want.String())
		}
	})
}

func FuzzConf(f *testing.F) {
	plugintest.FuzzConf(f, NewWithOptions(Options{V3: true}), `{"uri":"/x"}`, `{"headers":{"add":{"a":["1",2]},"remove":["b"]}}`,
		`{"regex_uri":["^/(.*)","/$1","^/b","/c"],"headers":{"X":"$1"}}`)
}

func BenchmarkRewrite(b *testing.B) {
	for name, conf := range map[string]string{
		"uri and header": `{"uri":"/x","headers":{"X-A":"b"}}`,
		"headers only":   `{"headers":{"set":{"X-A":"b"},"add":{"X-B":"c"},"remove":["X-C"]}}`,
	} {
		b.Run(name, func(b *testing.B) {
			in := plugintest.New(b, NewWithOptions(Options{V3: true}), conf).(gateway.Rewriter)
			c := plugintest.NewCtx(map[string]string{"uri": "/hello", "query_string": "a=1", "is_args": "?"})
			b.ReportAllocs()
			for b.Loop() {
				c.Reset()
				in.Rewrite(c)
			}
		})
	}
}
