package responserewrite

import (
	"slices"
	"testing"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
)

func TestSchema(t *testing.T) {
	pre := "failed to check the configuration of plugin response-rewrite err: "
	for conf, want := range map[string]string{
		`{"body":"new body\n","headers":{"X-Server-id":3,"Content-Type":""}}`: "",
		`{"status_code":599}`:                  pre + `property "status_code" validation failed: expected 599 to be at most 598`,
		`{}`:                                   "", // body_base64's default counts, as in APISIX
		`{"body":2}`:                           pre + `property "body" validation failed: wrong type: expected string, got number`,
		`{"status_code":200,"headers":{"":2}}`: pre + "invalid field length in header",
		`{"status_code":200,"headers":{"X-Name":{}}}`:                                             pre + "invalid type as header value",
		`{"headers":{"add":["Cache-Control: no-cache"],"set":{"X-A":1},"remove":["Set-Cookie"]}}`: "",
		`{"headers":{"add":["Cache-Control no-cache"]}}`:                                          pre + `property "headers" validation failed: object matches none of the required`,
		`{"headers":{"remove":["a:b"]}}`:                                                          pre + `property "headers" validation failed: object matches none of the required`,
		`{"headers":{}}`:                                                                          pre + `property "headers" validation failed: expect object to have at least 1 properties`,
		`{"body":"Zm9vYmFyCg=","body_base64":true}`:                                               pre + "invalid base64 content",
		`{"body":"","body_base64":true}`:                                                          pre + "invalid base64 content",
		`{"body_base64":true}`:                                                                    pre + "invalid base64 content",
		`{"vars":[["status","==",500]],"body":"x"}`:                                               "",
		`{"vars":[["status","fail",500]],"body":"x"}`:                                             pre + "failed to validate the 'vars' expression: invalid operator 'fail'", // lua-resty-expr 1.3.1's wording
		`{"filters":[{"regex":"Hello"}]}`:                                                         pre + `property "filters" validation failed: failed to validate item 1: property "replace" is required`,
		`{"filters":[{"regex":"","replace":"world"}]}`:                                            pre + `property "filters" validation failed: failed to validate item 1: property "regex" validation failed: string too short, expected at least 1, got 0`,
		`{"filters":[{"regex":"hello","replace":"HELLO","options":"h"}]}`:                         pre + `regex "hello" validation failed: unknown flag "h" (flags "h")`,
	} {
		if got := plugintest.Check(t, New(), conf, false); got != want {
			t.Errorf("%s:\n got %q\nwant %q", conf, got, want)
		}
	}
}

func run(t testing.TB, conf string, status int, hdrs []plugintest.Header, body string) (*plugintest.Ctx, string) {
	t.Helper()
	in := plugintest.New(t, New(), conf)
	c := plugintest.NewCtx(map[string]string{"host": "example.com"})
	c.StatusCode = status
	c.RespHeaders = append(c.RespHeaders, hdrs...)
	in.(gateway.HeaderFilter).FilterHeaders(c)
	if bf, ok := in.(gateway.BodyFilter); ok {
		body = string(bf.FilterBody(c, nil, []byte(body)))
	}
	return c, body
}

func TestRewrite(t *testing.T) {
	upstream := []plugintest.Header{{Name: "X-Server-id", Value: "100"}, {Name: "Content-Type", Value: "application/xml"}, {Name: "Content-Encoding", Value: "gzip"},
		{Name: "Last-Modified", Value: "Wed, 21 Oct 2015 07:28:00 GMT"}, {Name: "ETag", Value: `"33a6"`}}
	for _, tc := range []struct {
		name, conf string
		status     int
		body       string
		wantStatus int
		wantBody   string
		want       map[string]string
	}{
		{"TEST 4 headers and body", `{"headers":{"X-Server-id":3,"X-Server-status":"on","Content-Type":""},"body":"new body\n"}`, 200, "upstream",
			200, "new body\n", map[string]string{"X-Server-id": "3", "X-Server-status": "on", "Content-Type": "", "Content-Encoding": "", "ETag": ""}},
		{"TEST 7 body only", `{"body":"new body2\n"}`, 200, "upstream",
			200, "new body2\n", map[string]string{"X-Server-id": "100", "Content-Type": "application/xml", "Content-Encoding": "", "Last-Modified": "", "ETag": ""}},
		{"headers only keep the body and its validators", `{"headers":{"X-A":"b"}}`, 200, "upstream",
			200, "upstream", map[string]string{"X-A": "b", "ETag": `"33a6"`, "Content-Encoding": "gzip"}},
		{"TEST 9 302 with location", `{"status_code":302,"headers":{"Location":"https://www.iresty.com"}}`, 200, "x",
			302, "x", map[string]string{"Location": "https://www.iresty.com"}},
		{"TEST 13 base64", `{"body":"SGVsbG8K","body_base64":true}`, 200, "x", 200, "Hello\n", nil},
		{"TEST 19 vars match", `{"body":"new body3\n","status_code":403,"vars":[["status","==",500]]}`, 500, "error", 403, "new body3\n", nil},
		{"TEST 20 vars miss", `{"body":"new body3\n","status_code":403,"vars":[["status","==",500]]}`, 200, "hello world\n", 200, "hello world\n", nil},
		{"TEST 24 variables in headers", `{"headers":{"X-Host":"$host-${host}x"}}`, 200, "", 200, "", map[string]string{"X-Host": "example.com-example.comx"}},
		{"3.x add then set", `{"headers":{"add":["Cache-Control: no-cache"],"set":{"Cache-Control":"max-age=0, must-revalidate"}}}`, 200, "", 200, "",
			map[string]string{"Cache-Control": "max-age=0, must-revalidate"}},
		{"3.x remove", `{"headers":{"add":["Set-Cookie: a=b"],"set":{"X-A":"$host"},"remove":["Set-Cookie","X-Server-id"]}}`, 200, "", 200, "",
			map[string]string{"Set-Cookie": "", "X-Server-id": "", "X-A": "example.com", "ETag": `"33a6"`}},
		{"filters global", `{"filters":[{"regex":"l","replace":"t","scope":"global"}]}`, 200, "hello world\n", 200, "hetto wortd\n", nil},
		{"filters once", `{"filters":[{"regex":"l","replace":"t"}]}`, 200, "hello world\n", 200, "hetlo world\n", nil},
		{"filters replace with empty", `{"filters":[{"regex":"hello","replace":""}]}`, 200, "hello world\n", 200, " world\n", nil},
		{"filters words", `{"filters":[{"regex":"\\w\\S+$","replace":"*"}]}`, 200, "hello world\n", 200, "hello *\n", nil},
		{"body and filters: filters win", `{"body":"new body","filters":[{"regex":"hello","replace":"HELLO"}]}`, 200, "hello world\n", 200, "HELLO world\n", nil},
		{"multiple filters", `{"filters":[{"regex":"hello","replace":"HELLO"},{"regex":"L","replace":"T"},{"regex":"T","replace":"X","scope":"global"}]}`, 200, "hello world\n", 200, "HEXLO world\n", nil},
		{"filters no match", `{"filters":[{"regex":"test","replace":"TEST"}]}`, 200, "hello world\n", 200, "hello world\n", nil},
		{"filters with vars miss", `{"vars":[["status","==",404]],"filters":[{"regex":"hello","replace":"test"}]}`, 200, "hello world\n", 200, "hello world\n", nil},
	} {
		c, body := run(t, tc.conf, tc.status, upstream, tc.body)
		if c.StatusCode != tc.wantStatus || body != tc.wantBody {
			t.Errorf("%s: %d %q, want %d %q", tc.name, c.StatusCode, body, tc.wantStatus, tc.wantBody)
		}
		for h, want := range tc.want {
			if got := c.ResponseHeader(h); got != want {
				t.Errorf("%s: %s = %q, want %q", tc.name, h, got, want)
			}
		}
	}
	// 3.x's add keeps the lines there ("Name : value" too).
	c, _ := run(t, `{"headers":{"add":["Cache-Control: no-cache","Cache-Control : max-age=0, must-revalidate"]}}`, 200,
		[]plugintest.Header{{Name: "Cache-Control", Value: "private"}}, "")
	if got := c.ResponseHeaderValues("Cache-Control"); !slices.Equal(got, []string{"private", "no-cache", "max-age=0, must-revalidate"}) {
		t.Errorf("add: Cache-Control %q", got)
	}
	// Only a body rewrite needs the body.
	if _, ok := plugintest.New(t, New(), `{"headers":{"X-A":"b"},"status_code":201}`).(gateway.BodyFilter); ok {
		t.Error("a header rewrite asks for the body")
	}
}

func BenchmarkResponseRewrite(b *testing.B) {
	for name, conf := range map[string]string{
		"headers": `{"headers":{"X-Server-id":"3","X-Server-status":"on"}}`,
		"body":    `{"body":"new body\n"}`,
		"filter":  `{"filters":[{"regex":"world","replace":"there"}]}`,
	} {
		b.Run(name, func(b *testing.B) {
			in := plugintest.New(b, New(), conf)
			hf := in.(gateway.HeaderFilter)
			bf, _ := in.(gateway.BodyFilter)
			c := plugintest.NewCtx(nil)
			body, dst := []byte("hello world\n"), make([]byte, 0, 64)
			b.ReportAllocs()
			for b.Loop() {
				c.Reset()
				hf.FilterHeaders(c)
				if bf != nil {
					bf.FilterBody(c, dst, body)
				}
			}
		})
	}
}
