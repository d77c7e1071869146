package uriblocker

import (
	"testing"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
)

func TestSchema(t *testing.T) {
	const prefix = "failed to check the configuration of plugin uri-blocker err: "
	for _, tc := range []struct{ conf, err string }{
		{`{"block_rules":["^a","^b"]}`, ""},
		{`{"block_rules":["aa"],"rejected_code":200,"rejected_msg":"no","case_insensitive":true}`, ""},
		{`{}`, `property "block_rules" is required`},
		{`{"block_rules":[".+("]}`, `pcre_compile() failed: missing ) in ".+("`},
		{`{"block_rules":["^a","^b("]}`, `pcre_compile() failed: missing ) in "^b("`},
		{`{"block_rules":["a)"]}`, `pcre_compile() failed: unmatched parentheses in "a)"`},
		{`{"block_rules":["[a"]}`, `pcre_compile() failed: missing terminating ] for character class in "[a"`},
		{`{"block_rules":["*a"]}`, `pcre_compile() failed: nothing to repeat in "*a"`},
		{`{"block_rules":["a","a"]}`, `property "block_rules" validation failed: expected unique items but items 1 and 2 are equal`},
		{`{"block_rules":[""]}`, `property "block_rules" validation failed: failed to validate item 1: string too short, expected at least 1, got 0`},
		{`{"block_rules":["^a"],"rejected_msg":""}`, `property "rejected_msg" validation failed: string too short, expected at least 1, got 0`},
		{`{"block_rules":["^a"],"rejected_msg":true}`, `property "rejected_msg" validation failed: wrong type: expected string, got boolean`},
		{`{"block_rules":["^a"],"rejected_code":199}`, `property "rejected_code" validation failed: expected 199 to be at least 200`},
	} {
		got := plugintest.Check(t, New(), tc.conf, false)
		want := tc.err
		if want != "" {
			want = prefix + want
		}
		if got != want {
			t.Errorf("%s: %q, want %q", tc.conf, got, want)
		}
	}
}

func TestRewrite(t *testing.T) {
	const msg = `{"error_msg":"access is not allowed"}` + "\n"
	for _, tc := range []struct {
		conf, uri, args string
		status          int
		body            string
	}{
		{`{"block_rules":["aa"]}`, "/hello", "aa=1", 403, ""},
		{`{"block_rules":["aa"]}`, "/hello", "bb=2", 0, ""},
		{`{"block_rules":["aa","bb","c\\d+"]}`, "/hello", "c1=2", 403, ""},
		{`{"block_rules":["aa","bb","c\\d+"]}`, "/hello", "cc=2", 0, ""},
		// A rule spanning the path and the query sees "?" between them.
		{`{"block_rules":["hello\\?x"]}`, "/hello", "x=1", 403, ""},
		{`{"block_rules":["hello\\?"]}`, "/hello", "", 0, ""},
		{`{"block_rules":["select.+(from|limit)","(?:(union(.*?)select))"]}`, "/hello", "name=;select%20from%20sys", 403, ""},
		{`{"block_rules":["select.+(from|limit)","(?:(union(.*?)select))"]}`, "/hello", "name=;union%20select%20", 403, ""},
		{`{"block_rules":["aa"],"rejected_msg":"access is not allowed"}`, "/hello", "aa=1", 403, msg},
		{`{"block_rules":["AA"],"rejected_msg":"access is not allowed"}`, "/hello", "aa=1", 0, ""},
		{`{"block_rules":["AA"],"rejected_msg":"access is not allowed","case_insensitive":true}`, "/hello", "aa=1", 403, msg},
		{`{"block_rules":["aa"],"rejected_code":451}`, "/hello", "aa=1", 451, ""},
		// $uri is what the engine normalized: "/./internal/x" arrives as
		// "/internal/x".
		{`{"block_rules":["^/internal/"]}`, "/internal/x", "aa=1", 403, ""},
		{`{"block_rules":["^/internal/$"]}`, "/internal/", "", 403, ""},
	} {
		in := plugintest.New(t, New(), tc.conf).(gateway.Rewriter)
		c := plugintest.NewCtx(map[string]string{"uri": tc.uri, "args": tc.args, "request_uri": "/unused"})
		rep := in.Rewrite(c)
		if rep.Status != tc.status || string(rep.Body) != tc.body {
			t.Errorf("%s on %s?%s: %d %q, want %d %q", tc.conf, tc.uri, tc.args, rep.Status, rep.Body, tc.status, tc.body)
		}
	}
}

func FuzzConf(f *testing.F) {
	plugintest.FuzzConf(f, New(), `{"block_rules":["^a","b$"],"case_insensitive":true}`, `{"block_rules":["(?i"]}`)
}

func BenchmarkRewrite(b *testing.B) {
	in := plugintest.New(b, New(), `{"block_rules":["select.+(from|limit)","(?:(union(.*?)select))","^/internal/"]}`).(gateway.Rewriter)
	c := plugintest.NewCtx(map[string]string{"uri": "/api/v1/items", "args": "page=2&sort=name"})
	b.ReportAllocs()
	for b.Loop() {
		if in.Rewrite(c).Status != 0 {
			b.Fatal("rejected")
		}
	}
}
