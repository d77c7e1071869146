package redirect

import (
	"testing"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
)

// Cases from APISIX 2.14's t/plugin/redirect.t and redirect2.t.
func TestRedirect(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		port       int
		vars       map[string]string
		code       int
		location   string
	}{
		{"TEST 4", `{"uri":"/test/add","ret_code":301}`, 0, nil, 301, "/test/add"},
		{"TEST 6", `{"uri":"$uri/test/add","ret_code":301}`, 0, map[string]string{"uri": "/hello"}, 301, "/hello/test/add"},
		{"TEST 8", `{"uri":"$uri/test/a${arg_name}c"}`, 0, map[string]string{"uri": "/hello", "arg_name": "json"}, 302, "/hello/test/ajsonc"},
		{"TEST 10", `{"uri":"/foo$$uri"}`, 0, map[string]string{"uri": "/hello"}, 302, "/foo$/hello"},
		{"TEST 12", `{"uri":"\\$uri/foo$uri\\$uri/bar","ret_code":301}`, 0, map[string]string{"uri": "/hello"}, 301, `\$uri/foo/hello\$uri/bar`},
		{"TEST 14", `{"uri":"$uri/$bad_var/bar","ret_code":301}`, 0, map[string]string{"uri": "/hello"}, 301, "/hello//bar"},
		{"TEST 16", `{"uri":"https://$host$request_uri","ret_code":301}`, 0, map[string]string{"host": "foo.com", "request_uri": "/hello"}, 301, "https://foo.com/hello"},
		{"TEST 18", `{"http_to_https":true}`, 8443, map[string]string{"host": "foo.com", "request_uri": "/hello"}, 301, "https://foo.com:8443/hello"},
		{"TEST 22", `{"http_to_https":true}`, 443, map[string]string{"host": "foo.com", "request_uri": "/hello"}, 301, "https://foo.com/hello"},
		{"TEST 24 ret_code ignored", `{"http_to_https":true,"ret_code":302}`, 9443, map[string]string{"host": "foo.com", "request_uri": "/hello"}, 301, "https://foo.com:9443/hello"},
		{"TEST 31 POST", `{"http_to_https":true,"ret_code":307}`, 9443, map[string]string{"host": "test.com", "request_uri": "/hello-https", "request_method": "POST"}, 308, "https://test.com:9443/hello-https"},
		{"TEST 33 HEAD", `{"http_to_https":true}`, 9443, map[string]string{"host": "test.com", "request_uri": "/hello-https", "request_method": "HEAD"}, 301, "https://test.com:9443/hello-https"},
		{"already https", `{"http_to_https":true}`, 0, map[string]string{"scheme": "https"}, 0, ""},
		{"TEST 46 X-Forwarded-Proto http", `{"http_to_https":true}`, 9443, map[string]string{"scheme": "https", "http_x_forwarded_proto": "http", "host": "foo.com", "request_uri": "/hello"}, 301, "https://foo.com:9443/hello"},
		{"X-Forwarded-Proto https", `{"http_to_https":true}`, 0, map[string]string{"http_x_forwarded_proto": "https"}, 0, ""},
		{"TEST 35", `{"regex_uri":["^/test/(.*)","http://test.com/${1}"],"ret_code":301}`, 0, map[string]string{"uri": "/test/1"}, 301, "http://test.com/1"},
		{"TEST 36 no match", `{"regex_uri":["^/test/(.*)","http://test.com/${1}"],"ret_code":301}`, 0, map[string]string{"uri": "/hello"}, 0, ""},
		{"TEST 38", `{"regex_uri":["^/test/(.*)","http://test.com/${1}"],"ret_code":301,"encode_uri":true}`, 0, map[string]string{"uri": "/test/with space"}, 301, "http://test.com/with%20space"},
		{"TEST 40", `{"uri":"$uri","ret_code":301,"encode_uri":true}`, 0, map[string]string{"uri": "/hello/with space"}, 301, "/hello/with%20space"},
		{"encode up to the query", `{"uri":"$uri?a=b c","encode_uri":true}`, 0, map[string]string{"uri": "/h é#"}, 302, "/h%20%C3%A9%23?a=b c"},
		{"TEST 42", `{"uri":"$uri","append_query_string":true}`, 0, map[string]string{"uri": "/hello", "is_args": "?", "args": "name=json"}, 302, "/hello?name=json"},
		{"TEST 44", `{"uri":"$uri?type=string","append_query_string":true}`, 0, map[string]string{"uri": "/hello", "is_args": "?", "args": "name=json"}, 302, "/hello?type=string&name=json"},
		{"redirect2 TEST 2", `{"regex_uri":["^/test/(.*)","http://test.com/${1}?q=apisix"],"append_query_string":true}`, 0,
			map[string]string{"uri": "/test/hello", "is_args": "?", "args": "o=apache"}, 302, "http://test.com/hello?q=apisix&o=apache"},
		{"$1 then text", `{"regex_uri":["^/(a)(b)","/$1x$2"]}`, 0, map[string]string{"uri": "/ab"}, 302, "/axb"},
	} {
		in := plugintest.New(t, New(tc.port), tc.conf).(gateway.Rewriter)
		c := plugintest.NewCtx(tc.vars)
		rep := in.Rewrite(c)
		if rep.Status != tc.code || c.ResponseHeader("Location") != tc.location {
			t.Errorf("%s: %d %q, want %d %q", tc.name, rep.Status, c.ResponseHeader("Location"), tc.code, tc.location)
		}
	}
}

func TestSchema(t *testing.T) {
	pre := "failed to check the configuration of plugin redirect err: "
	for conf, want := range map[string]string{
		`{"uri":"/foo","ret_code":302}`:         "",
		`{"uri":"/foo","ret_code":100}`:         pre + `property "ret_code" validation failed: expected 100 to be at least 200`,
		`{"http_to_https":true,"uri":"/hello"}`: pre + "value should match only one schema, but matches both schemas 1 and 3",
		`{}`:                                    pre + "value should match only one schema, but matches none",
		`{"regex_uri":["^/(a","x"]}`:            pre + "invalid regex_uri (^/(a, x), err:error parsing regexp: missing closing ): `^/(a`",
		`{"regex_uri":["^/a"]}`:                 pre + `property "regex_uri" validation failed: expect array to have at least 2 items`,
		`{"uri":"/"}`:                           pre + `property "uri" validation failed: string too short, expected at least 2, got 1`,
	} {
		if got := plugintest.Check(t, New(0), conf, false); got != want {
			t.Errorf("%s:\n got %q\nwant %q", conf, got, want)
		}
	}
}

func BenchmarkRedirect(b *testing.B) {
	for name, conf := range map[string]string{
		"static":        `{"uri":"/test/add"}`,
		"http_to_https": `{"http_to_https":true}`,
		"regex_uri":     `{"regex_uri":["^/test/(.*)","http://test.com/${1}"]}`,
	} {
		b.Run(name, func(b *testing.B) {
			in := plugintest.New(b, New(0), conf).(gateway.Rewriter)
			c := plugintest.NewCtx(map[string]string{"uri": "/test/1", "request_uri": "/test/1", "host": "foo.com"})
			b.ReportAllocs()
			for b.Loop() {
				c.Reset()
				in.Rewrite(c)
			}
		})
	}
}

// TestV3: 3.x's http_to_https rules (t/plugin/redirect.t TEST 47, 48).
func TestV3(t *testing.T) {
	vars := map[string]string{"host": "foo.com", "request_uri": "/hello", "http_x_forwarded_proto": "any"}
	for _, tc := range []struct {
		v3       bool
		code     int
		location string
	}{
		{false, 0, ""}, // 2.14: only http goes to https
		{true, 301, "https://foo.com:9443/hello"},
	} {
		f := NewWithOptions(Options{HTTPSPort: 9443, V3: tc.v3})
		c := plugintest.NewCtx(vars)
		rep := plugintest.New(t, f, `{"http_to_https":true}`).(gateway.Rewriter).Rewrite(c)
		if rep.Status != tc.code || c.ResponseHeader("Location") != tc.location {
			t.Errorf("v3 %v, X-Forwarded-Proto any: %d %q, want %d %q", tc.v3, rep.Status, c.ResponseHeader("Location"), tc.code, tc.location)
		}
		want := ""
		if tc.v3 {
			want = "failed to check the configuration of plugin redirect err: only one of `http_to_https` and `append_query_string` can be configured."
		}
		if got := plugintest.Check(t, f, `{"http_to_https":true,"append_query_string":true}`, false); got != want {
			t.Errorf("v3 %v: %q, want %q", tc.v3, got, want)
		}
	}
}
