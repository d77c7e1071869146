package cors

import (
	"strings"
	"testing"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
)

const (
	acao = "Access-Control-Allow-Origin"
	acam = "Access-Control-Allow-Methods"
	acah = "Access-Control-Allow-Headers"
	aceh = "Access-Control-Expose-Headers"
	acma = "Access-Control-Max-Age"
	acac = "Access-Control-Allow-Credentials"
)

// Cases from APISIX 2.14's t/plugin/cors.t, as header expectations ("" =
// absent).
func TestHeaders(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		vars       map[string]string
		want       map[string]string
	}{
		{"TEST 7 default", `{}`, nil,
			map[string]string{acao: "*", "Vary": "", acam: "*", acah: "*", aceh: "*", acma: "5", acac: ""}},
		{"TEST 9 listed origin", `{"allow_origins":"http://sub.domain.com,http://sub2.domain.com","allow_methods":"GET,POST","allow_headers":"headr1,headr2","expose_headers":"ex-headr1,ex-headr2","max_age":50,"allow_credential":true}`,
			map[string]string{"http_origin": "http://sub2.domain.com"},
			map[string]string{acao: "http://sub2.domain.com", "Vary": "Origin", acam: "GET,POST", acah: "headr1,headr2", aceh: "ex-headr1,ex-headr2", acma: "50", acac: "true"}},
		{"TEST 10 unlisted origin", `{"allow_origins":"http://sub.domain.com,http://sub2.domain.com","allow_credential":true,"allow_methods":"GET","allow_headers":"h","expose_headers":"e"}`,
			map[string]string{"http_origin": "http://sub3.domain.com"},
			map[string]string{acao: "", acam: "", acah: "", aceh: "", acma: "", acac: ""}},
		{"TEST 12 force wildcard", `{"allow_origins":"**","allow_methods":"**","allow_headers":"**","expose_headers":"*"}`,
			map[string]string{"http_origin": "https://sub.domain.com", "http_access_control_request_headers": "req-header1,req-header2"},
			map[string]string{acao: "https://sub.domain.com", "Vary": "Origin", acam: "GET,POST,PUT,DELETE,PATCH,HEAD,OPTIONS,CONNECT,TRACE", acah: "req-header1,req-header2", aceh: "*", acma: "5", acac: ""}},
		{"TEST 13 force wildcard, no origin", `{"allow_origins":"**","allow_methods":"**","allow_headers":"**","expose_headers":"*"}`, nil,
			map[string]string{acao: "*", acam: "GET,POST,PUT,DELETE,PATCH,HEAD,OPTIONS,CONNECT,TRACE", acah: "", aceh: "*", acma: "5", acac: ""}},
		{"TEST 29 regex", `{"allow_origins":"http://sub.domain.com,http://sub2.domain.com","allow_methods":"GET,POST","allow_headers":"headr1,headr2","expose_headers":"ex-headr1,ex-headr2","max_age":50,"allow_credential":true,"allow_origins_by_regex":[".*\\.test.com"]}`,
			map[string]string{"http_origin": "http://a.test.com"},
			map[string]string{acao: "http://a.test.com", "Vary": "Origin", acam: "GET,POST", acac: "true"}},
		{"regex miss", `{"allow_origins":"http://sub.domain.com","allow_origins_by_regex":[".*\\.test.com"]}`,
			map[string]string{"http_origin": "http://a.example.com"},
			map[string]string{acao: ""}},
		{"single origin", `{"allow_origins":"http://sub.domain.com"}`,
			map[string]string{"http_origin": "http://sub.domain.com"},
			map[string]string{acao: "http://sub.domain.com", "Vary": "Origin"}},
		{"single origin, no origin", `{"allow_origins":"http://sub.domain.com"}`, nil,
			map[string]string{acao: ""}},
	} {
		in := plugintest.New(t, New(), tc.conf).(gateway.HeaderFilter)
		c := plugintest.NewCtx(tc.vars)
		in.FilterHeaders(c)
		for h, want := range tc.want {
			if got := strings.Join(c.ResponseHeaderValues(h), ", "); got != want {
				t.Errorf("%s: %s = %q, want %q", tc.name, h, got, want)
			}
		}
	}
}

// TestRegexV3: under v3 allow_origins_by_regex, when set, replaces
// allow_origins (3.x t/plugin/cors2.t TEST 3-5); 2.14 tries it after.
func TestRegexV3(t *testing.T) {
	const conf = `{"allow_origins":"*","allow_origins_by_regex":[".*\\.domain.com$"]}`
	for _, tc := range []struct {
		v3           bool
		origin, want string
	}{
		{true, "http://sub.test.com", ""},
		{true, "", ""},
		{true, "http://sub.domain.com", "http://sub.domain.com"},
		{false, "http://sub.test.com", "*"},
		{false, "http://sub.domain.com", "*"},
	} {
		in := plugintest.New(t, NewWithOptions(Options{V3: tc.v3}), conf).(gateway.HeaderFilter)
		c := plugintest.NewCtx(map[string]string{"http_origin": tc.origin})
		in.FilterHeaders(c)
		if got := c.ResponseHeader(acao); got != tc.want {
			t.Errorf("v3 %v, origin %q: %s = %q, want %q", tc.v3, tc.origin, acao, got, tc.want)
		}
	}
}

// Cases from APISIX 3.x's t/plugin/cors3.t: origins named in the plugin
// metadata (allow_origins_by_metadata), loaded and compiled as a gateway
// does.
func TestMetadataOrigins(t *testing.T) {
	const md = `{"allow_origins":{"key_1":"https://domain.com","key_2":"https://sub.domain.com,https://sub2.domain.com","key_3":"*"}}`
	for _, tc := range []struct {
		name, conf, md, origin, want string
	}{
		{"TEST 4 origin not match", `{"allow_origins":"https://test.com","allow_origins_by_metadata":["key_1"]}`, md, "http://foo.example.org", ""},
		{"TEST 5 matches allow_origins", `{"allow_origins":"https://test.com","allow_origins_by_metadata":["key_1"]}`, md, "https://test.com", "https://test.com"},
		{"TEST 6 matches metadata", `{"allow_origins":"https://test.com","allow_origins_by_metadata":["key_1"]}`, md, "https://domain.com", "https://domain.com"},
		{"TEST 8 first list", `{"allow_origins":"https://test.com","allow_origins_by_metadata":["key_1","key_2"]}`, md, "https://domain.com", "https://domain.com"},
		{"TEST 9 second list", `{"allow_origins":"https://test.com","allow_origins_by_metadata":["key_1","key_2"]}`, md, "https://sub.domain.com", "https://sub.domain.com"},
		{"TEST 12 wildcard list", `{"allow_origins":"https://test.com","allow_origins_by_metadata":["key_3"]}`, md, "http://foo.example.org", "http://foo.example.org"},
		{"TEST 14 allow_origins * ignored", `{"allow_origins":"*","allow_origins_by_metadata":["key_1"]}`, md, "http://foo.example.org", ""},
		{"TEST 15 allow_origins *, metadata match", `{"allow_origins":"*","allow_origins_by_metadata":["key_1"]}`, md, "https://domain.com", "https://domain.com"},
		{"a list the metadata lacks", `{"allow_origins":"https://test.com","allow_origins_by_metadata":["key_9"]}`, md, "https://domain.com", ""},
		{"no metadata stored", `{"allow_origins":"https://test.com","allow_origins_by_metadata":["key_1"]}`, "", "https://domain.com", ""},
		{"no metadata stored, own origin", `{"allow_origins":"https://test.com","allow_origins_by_metadata":["key_1"]}`, "", "https://test.com", "https://test.com"},
	} {
		res := map[string]string{"routes/1": `{"uri":"/hello","plugins":{"cors":` + tc.conf + `}}`}
		if tc.md != "" {
			res["plugin_metadata/cors"] = tc.md
		}
		c := plugintest.Compile(t, gateway.NewRegistry(New()), res)
		in := c.Routes[0].Chain[0].Impl.(gateway.HeaderFilter)
		ctx := plugintest.NewCtx(map[string]string{"http_origin": tc.origin})
		in.FilterHeaders(ctx)
		if got := ctx.ResponseHeader(acao); got != tc.want {
			t.Errorf("%s: %s = %q, want %q", tc.name, acao, got, tc.want)
		}
	}
}

// The metadata's allow_origins as APISIX 3.x's cors3.t TEST 1 validates them.
func TestMetadataSchema(t *testing.T) {
	reg := gateway.NewRegistry(New())
	good := `{"allow_origins":{"key_1":"*","key_2":"**","key_3":"null","key_4":"http://y.com.uk","key_5":"https://x.com","key_6":"https://x.com,http://y.com.uk","key_7":"https://x.com,http://y.com.uk,http://c.tv","key_8":"https://x.com,http://y.com.uk:12000,http://c.tv"}}`
	if err := reg.CheckMetadata(Name, decode(t, good)); err != nil {
		t.Errorf("good: %v", err)
	}
	for _, bad := range []string{"", "*a", "*,http://y.com", "nulll", "http//y.com.uk", "x.com", "https://x.com,y.com.uk", "https://x.com,*,https://y.com.uk", "https://x.com,http://y.com.uk,http:c.tv"} {
		if err := reg.CheckMetadata(Name, map[string]any{"allow_origins": map[string]any{"key": bad}}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	v, err := gateway.DecodeJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v.(map[string]any)
}

// APISIX 3.x's headers (Options.V3), from its t/plugin/cors.t and cors3.t:
// no default expose_headers, Vary by the configuration.
func TestHeadersV3(t *testing.T) {
	for _, tc := range []struct {
		name, conf, origin string
		want               map[string]string
	}{
		{"cors.t TEST 7 default", `{}`, "",
			map[string]string{acao: "*", "Vary": "", acam: "*", aceh: "", acma: "5"}},
		{"cors3.t TEST 4 origin not allowed", `{"allow_origins":"https://test.com"}`, "http://foo.example.org",
			map[string]string{acao: "", "Vary": "Origin", acam: "", aceh: ""}},
		{"allowed, expose_headers set", `{"allow_origins":"https://test.com","expose_headers":"x-a"}`, "https://test.com",
			map[string]string{acao: "https://test.com", "Vary": "Origin", aceh: "x-a"}},
	} {
		in := plugintest.New(t, NewWithOptions(Options{V3: true}), tc.conf).(gateway.HeaderFilter)
		c := plugintest.NewCtx(map[string]string{"http_origin": tc.origin})
		in.FilterHeaders(c)
		for h, want := range tc.want {
			if got := strings.Join(c.ResponseHeaderValues(h), ", "); got != want {
				t.Errorf("%s: %s = %q, want %q", tc.name, h, got, want)
			}
		}
	}
}

func TestPreflight(t *testing.T) {
	in := plugintest.New(t, New(), `{}`).(gateway.Rewriter)
	if rep := in.Rewrite(plugintest.NewCtx(map[string]string{"request_method": "OPTIONS"})); rep.Status != 200 || len(rep.Body) != 0 {
		t.Errorf("OPTIONS: %+v", rep)
	}
	if rep := in.Rewrite(plugintest.NewCtx(nil)); rep.Status != 0 {
		t.Errorf("GET: %+v", rep)
	}
}

func TestSchema(t *testing.T) {
	pre := "failed to check the configuration of plugin cors err: "
	for conf, want := range map[string]string{
		`{"allow_origins":"http://test.com","allow_methods":"","allow_headers":"","expose_headers":"","max_age":600,"allow_credential":true}`: "",
		`{"max_age":"600"}`:                             pre + `property "max_age" validation failed: wrong type: expected integer, got string`,
		`{"allow_origins":"*","allow_credential":true}`: pre + "you can not set '*' for other option when 'allow_credential' is true",
		`{"allow_origins":"http://a.com","allow_methods":"*","allow_credential":true}`: pre + "you can not set '*' for other option when 'allow_credential' is true",
		`{"allow_origins":"a.com"}`:     pre + `property "allow_origins" validation failed: failed to match pattern "^(\\*|\\*\\*|null|\\w+://[^,]+(,\\w+://[^,]+)*)$" with "a.com"`,
		`{"allow_origins_by_regex":[]}`: pre + `property "allow_origins_by_regex" validation failed: expect array to have at least 1 items`,
	} {
		if got := plugintest.Check(t, New(), conf, false); got != want {
			t.Errorf("%s:\n got %q\nwant %q", conf, got, want)
		}
	}
}

// Allow agrees with a direct reading of APISIX's rules on any list and origin.
func FuzzOrigins(f *testing.F) {
	f.Add("http://a.com,http://b.com", "http://b.com")
	f.Add("**", "")
	f.Add("*", "null")
	f.Add("http://a.com", "http://a.com")
	f.Add("http://a.com,,http://b.com", "")
	f.Fuzz(func(t *testing.T, list, origin string) {
		allow, decided := ParseOrigins(list).Allow(origin)
		switch {
		case list == "*":
			if allow != "*" || !decided {
				t.Fatal("* allows all")
			}
		case list == "**":
			if !decided || (origin != "" && allow != origin) || (origin == "" && allow != "*") {
				t.Fatalf("** echoes: %q %v", allow, decided)
			}
		case strings.Contains(list, ","):
			listed := false
			for _, e := range strings.Split(list, ",") {
				if e != "" && e == origin {
					listed = true
				}
			}
			if listed != (allow == origin && decided && origin != "") || (allow != "" && allow != origin) {
				t.Fatalf("list %q origin %q: %q %v", list, origin, allow, decided)
			}
		default:
			if allow != list || decided != (origin == list) {
				t.Fatalf("one %q origin %q: %q %v", list, origin, allow, decided)
			}
		}
	})
}

func BenchmarkCORS(b *testing.B) {
	for name, conf := range map[string]string{
		"default": `{}`,
		"listed":  `{"allow_origins":"http://a.com,http://b.com,http://c.com","allow_methods":"GET,POST","allow_credential":true,"allow_headers":"x","expose_headers":"y"}`,
	} {
		b.Run(name, func(b *testing.B) {
			in := plugintest.New(b, New(), conf)
			rw, hf := in.(gateway.Rewriter), in.(gateway.HeaderFilter)
			c := plugintest.NewCtx(map[string]string{"http_origin": "http://b.com"})
			b.ReportAllocs()
			for b.Loop() {
				c.Reset()
				rw.Rewrite(c)
				hf.FilterHeaders(c)
			}
		})
	}
}
