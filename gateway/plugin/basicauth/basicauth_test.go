package basicauth

import (
	"testing"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
)

func TestParse(t *testing.T) {
	for header, want := range map[string][2]string{
		"Basic Zm9vOmJhcg==":        {"foo", "bar"},
		"Basic Zm9vOmJhcg":          {"foo", "bar"}, // no padding
		"Basic YmFyOmJhcgo=":        {"bar", "bar"}, // "bar:bar\n": whitespace goes
		"Basic YTpiOmM=":            {"a", "b"},     // "a:b:c": the password stops at ':'
		"xBasic Zm9vOmJhcg==":       {"foo", "bar"}, // the regex is not anchored
		"Bad_header YmFyOmJhcgo=":   {},
		"Basic aca_a":               {},
		"Basic YmFy":                {}, // "bar": no password
		"Basic":                     {},
		"Basic  Zm9vOmJhcg==":       {},
		"basic Zm9vOmJhcg==":        {},
		"Basic Zm9vOmJhcg== trails": {},
	} {
		user, pass, ok := Parse(make([]byte, 64), header)
		if ok != (want != [2]string{}) || string(user) != want[0] || string(pass) != want[1] {
			t.Errorf("%q: %q %q %v, want %q", header, user, pass, ok, want)
		}
	}
}

// TestParseAnyCase: 3.x's scheme in any case (t/plugin/basic-auth.t
// TEST 28-30); 2.14's only "Basic".
func TestParseAnyCase(t *testing.T) {
	for header, want := range map[string]bool{
		"basic Zm9vOmJhcg==":  true,
		"BASIC Zm9vOmJhcg==":  true,
		"BaSiC Zm9vOmJhcg==":  true,
		"xbasic Zm9vOmJhcg==": true, // not anchored, as Basic
		"basi Zm9vOmJhcg==":   false,
		"b@sic Zm9vOmJhcg==":  false,
	} {
		user, _, ok := parse(make([]byte, 64), header, true)
		if ok != want || ok && string(user) != "foo" {
			t.Errorf("%q: %q %v, want %v", header, user, ok, want)
		}
		if _, _, ok := Parse(make([]byte, 64), header); ok {
			t.Errorf("%q: 2.14 takes only Basic", header)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("Basic Zm9vOmJhcg==")
	f.Add("Basic YTpiOmM=")
	f.Fuzz(func(t *testing.T, h string) {
		user, pass, ok := parse(make([]byte, len(h)), h, true)
		if !ok {
			return
		}
		for _, b := range append(user, pass...) {
			if isSpace(b) {
				t.Fatalf("%q: whitespace kept in %q:%q", h, user, pass)
			}
		}
	})
}

func TestRewrite(t *testing.T) {
	f := New()
	compiled := plugintest.Compile(t, gateway.NewRegistry(f), map[string]string{
		"consumers/foo": `{"username":"foo","plugins":{"basic-auth":{"username":"foo","password":"bar"}}}`,
	})
	for _, tc := range []struct {
		name, conf, auth string
		status           int
		body             string
	}{
		{"TEST 5 missing", `{}`, "", 401, `{"message":"Missing authorization in request"}` + "\n"},
		{"TEST 6 bad header", `{}`, "Bad_header YmFyOmJhcgo=", 401, `{"message":"Invalid authorization in request"}` + "\n"},
		{"TEST 7 bad base64", `{}`, "Basic aca_a", 401, `{"message":"Invalid authorization in request"}` + "\n"},
		{"TEST 8 no password", `{}`, "Basic YmFy", 401, `{"message":"Invalid authorization in request"}` + "\n"},
		{"TEST 9 unknown user", `{}`, "Basic YmFyOmJhcgo=", 401, `{"message":"Invalid user authorization"}` + "\n"},
		{"TEST 10 wrong password", `{}`, "Basic Zm9vOmZvbwo=", 401, `{"message":"Invalid user authorization"}` + "\n"},
		{"TEST 11 verify", `{}`, "Basic Zm9vOmJhcg==", 0, ""},
		{"hide credentials", `{"hide_credentials":true}`, "Basic Zm9vOmJhcg==", 0, ""},
	} {
		in := plugintest.New(t, f, tc.conf).(gateway.Rewriter)
		c := plugintest.NewCtx(map[string]string{"http_authorization": tc.auth})
		c.Compiled = compiled
		rep := in.Rewrite(c)
		if rep.Status != tc.status || string(rep.Body) != tc.body {
			t.Errorf("%s: %d %q, want %d %q", tc.name, rep.Status, rep.Body, tc.status, tc.body)
		}
		if tc.status == 0 && (c.User == nil || c.User.Username != "foo") {
			t.Errorf("%s: consumer %v", tc.name, c.User)
		}
		if got, hide := c.Var("http_authorization"), tc.conf == `{"hide_credentials":true}`; hide != (got == "") && tc.auth != "" {
			t.Errorf("%s: Authorization upstream %q", tc.name, got)
		}
		if tc.auth == "" && c.ResponseHeader("WWW-Authenticate") != "Basic realm='.'" {
			t.Errorf("%s: WWW-Authenticate %q", tc.name, c.ResponseHeader("WWW-Authenticate"))
		}
	}
}

func TestConsumerSchema(t *testing.T) {
	pre := "failed to check the configuration of plugin basic-auth err: "
	for conf, want := range map[string]string{
		`{"username":"foo","password":"bar"}`: "",
		`{"username":"foo"}`:                  pre + `property "password" is required`,
		`{"username":123,"password":"bar"}`:   pre + `property "username" validation failed: wrong type: expected string, got number`,
	} {
		if got := plugintest.Check(t, New(), conf, true); got != want {
			t.Errorf("%s: %q, want %q", conf, got, want)
		}
	}
}

func BenchmarkRewrite(b *testing.B) {
	for _, v3 := range []bool{false, true} {
		b.Run(map[bool]string{false: "v2", true: "v3"}[v3], func(b *testing.B) {
			f := NewWithOptions(Options{V3: v3})
			compiled := plugintest.Compile(b, gateway.NewRegistry(f), map[string]string{
				"consumers/foo": `{"username":"foo","plugins":{"basic-auth":{"username":"foo","password":"bar"}}}`,
			})
			in := plugintest.New(b, f, `{}`).(gateway.Rewriter)
			c := plugintest.NewCtx(map[string]string{"http_authorization": "Basic Zm9vOmJhcg=="})
			c.Compiled = compiled
			b.ReportAllocs()
			for b.Loop() {
				c.Reset()
				if in.Rewrite(c).Status != 0 {
					b.Fatal("rejected")
				}
			}
		})
	}
}
