package lambda_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/lambda"
)

// echo answers with what it was asked, one fact a line, and sets two
// cookies and a binary-safe body when asked to.
func echo(ctx *fasthttp.RequestCtx) {
	var b strings.Builder
	fmt.Fprintf(&b, "method=%s\nuri=%s\npath=%s\nhost=%s\ntls=%v\nremote=%s\nbody=%s\n",
		ctx.Method(), ctx.RequestURI(), ctx.Path(), ctx.Host(), ctx.IsTLS(), ctx.RemoteIP(), ctx.PostBody())
	var hdrs []string
	for k, v := range ctx.Request.Header.All() {
		if string(k) != "Host" && string(k) != "Cookie" {
			hdrs = append(hdrs, fmt.Sprintf("%s: %s", k, v))
		}
	}
	sort.Strings(hdrs)
	fmt.Fprintf(&b, "headers=%s\n", strings.Join(hdrs, " | "))
	var cookies []string
	for k, v := range ctx.Request.Header.Cookies() {
		cookies = append(cookies, string(k)+"="+string(v))
	}
	sort.Strings(cookies)
	fmt.Fprintf(&b, "cookies=%s\n", strings.Join(cookies, ","))
	fmt.Fprintf(&b, "query=%s\n", ctx.QueryArgs().String())
	ctx.Response.Header.Set("X-Multi", "a")
	ctx.Response.Header.Add("X-Multi", "b")
	ctx.Response.Header.SetContentType("text/plain")
	var c1, c2 fasthttp.Cookie
	c1.SetKey("session")
	c1.SetValue("s1")
	c2.SetKey("theme")
	c2.SetValue("dark")
	ctx.Response.Header.SetCookie(&c1)
	ctx.Response.Header.SetCookie(&c2)
	ctx.SetStatusCode(fasthttp.StatusTeapot)
	if string(ctx.QueryArgs().Peek("binary")) == "1" {
		ctx.SetBody([]byte{0xff, 0x00, 0xfe})
		return
	}
	ctx.SetBodyString(b.String())
}

func newEcho() *lambda.Handler {
	return lambda.NewHandler(echo, lambda.Options{MaxBodyBytes: 64, MaxHeaderBytes: 1024})
}

// reply is a proxy response of either payload version.
type reply struct {
	StatusCode        int
	Headers           map[string]string
	MultiValueHeaders map[string][]string
	Cookies           []string
	Body              string
	IsBase64Encoded   bool
}

func invoke(t *testing.T, h *lambda.Handler, ev any) (reply, map[string]string) {
	t.Helper()
	payload, ok := ev.([]byte)
	if !ok {
		var err error
		if payload, err = json.Marshal(ev); err != nil {
			t.Fatal(err)
		}
	}
	out, err := h.Invoke(context.Background(), payload)
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	var r reply
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("response %s: %v", out, err)
	}
	facts := map[string]string{}
	for _, line := range strings.Split(r.Body, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			facts[k] = v
		}
	}
	return r, facts
}

func v2Event(method, rawPath, rawQuery string) events.APIGatewayV2HTTPRequest {
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "$default", RawPath: rawPath, RawQueryString: rawQuery,
		Headers: map[string]string{"host": "abc123.execute-api.eu-west-1.amazonaws.com", "x-forwarded-proto": "https", "user-agent": "curl/8.5.0", "accept": "*/*"},
	}
	ev.RequestContext.Stage = "$default"
	ev.RequestContext.DomainName = "abc123.execute-api.eu-west-1.amazonaws.com"
	ev.RequestContext.HTTP.Method = method
	ev.RequestContext.HTTP.Path = rawPath
	ev.RequestContext.HTTP.SourceIP = "203.0.113.7"
	return ev
}

func v1Event(method, path string) events.APIGatewayProxyRequest {
	ev := events.APIGatewayProxyRequest{
		Resource: "/{proxy+}", Path: path, HTTPMethod: method,
		Headers:           map[string]string{"Host": "xyz.execute-api.eu-west-1.amazonaws.com", "X-Forwarded-Proto": "https", "Accept": "*/*"},
		MultiValueHeaders: map[string][]string{"Host": {"xyz.execute-api.eu-west-1.amazonaws.com"}, "X-Forwarded-Proto": {"https"}, "Accept": {"*/*"}, "X-Twice": {"1", "2"}},
	}
	ev.RequestContext.Stage = "prod"
	ev.RequestContext.Path = "/prod" + path
	ev.RequestContext.Identity.SourceIP = "198.51.100.9"
	return ev
}

func urlEvent(method, rawPath, rawQuery string) events.LambdaFunctionURLRequest {
	ev := events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: rawPath, RawQueryString: rawQuery,
		Headers: map[string]string{"host": "q4k2x.lambda-url.eu-west-1.on.aws", "x-forwarded-proto": "https", "x-forwarded-for": "192.0.2.1"},
	}
	ev.RequestContext.DomainName = "q4k2x.lambda-url.eu-west-1.on.aws"
	ev.RequestContext.HTTP.Method = method
	ev.RequestContext.HTTP.Path = rawPath
	ev.RequestContext.HTTP.SourceIP = "192.0.2.1"
	return ev
}

func TestHTTPAPIEvent(t *testing.T) {
	ev := v2Event("POST", "/api/v1/links", "a=1&b=x%20y")
	ev.Cookies = []string{"session=s0", "theme=light"}
	ev.Body = base64.StdEncoding.EncodeToString([]byte(`{"url":"https://example.com/"}`))
	ev.IsBase64Encoded = true
	r, f := invoke(t, newEcho(), ev)
	want := map[string]string{
		"method": "POST", "uri": "/api/v1/links?a=1&b=x%20y", "path": "/api/v1/links", "host": "abc123.execute-api.eu-west-1.amazonaws.com",
		"tls": "true", "remote": "203.0.113.7", "body": `{"url":"https://example.com/"}`, "cookies": "session=s0,theme=light",
		"headers": "Accept: */* | User-Agent: curl/8.5.0 | X-Forwarded-Proto: https",
	}
	for k, v := range want {
		if f[k] != v {
			t.Errorf("%s = %q, want %q", k, f[k], v)
		}
	}
	if r.StatusCode != 418 || r.IsBase64Encoded || r.Headers["Content-Type"] != "text/plain" || r.Headers["X-Multi"] != "a, b" {
		t.Errorf("response %d %v %v", r.StatusCode, r.Headers, r.IsBase64Encoded)
	}
	if !slices.Equal(r.Cookies, []string{"session=s1", "theme=dark"}) {
		t.Errorf("cookies %q, want session and theme in the cookies field", r.Cookies)
	}
	if _, ok := r.Headers["Set-Cookie"]; ok || r.MultiValueHeaders != nil {
		t.Errorf("payload 2.0 response with Set-Cookie header or multiValueHeaders: %+v", r)
	}
	for _, h := range []string{"Content-Length", "Connection", "Date"} {
		if _, ok := r.Headers[h]; ok {
			t.Errorf("response carries %s", h)
		}
	}
}

func TestRESTAPIEvent(t *testing.T) {
	ev := v1Event("GET", "/getFullURL/a b")
	ev.MultiValueQueryStringParameters = map[string][]string{"q": {"x y", "&z"}}
	ev.QueryStringParameters = map[string]string{"q": "&z"}
	ev.MultiValueHeaders["Cookie"] = []string{"session=s0"}
	r, f := invoke(t, newEcho(), ev)
	want := map[string]string{
		"method": "GET", "path": "/getFullURL/a b", "host": "xyz.execute-api.eu-west-1.amazonaws.com", "tls": "true",
		"remote": "198.51.100.9", "body": "", "cookies": "session=s0", "query": "q=x+y&q=%26z",
		"headers": "Accept: */* | X-Forwarded-Proto: https | X-Twice: 1 | X-Twice: 2",
	}
	for k, v := range want {
		if f[k] != v {
			t.Errorf("%s = %q, want %q", k, f[k], v)
		}
	}
	if u, err := url.ParseRequestURI(f["uri"]); err != nil || u.Path != "/getFullURL/a b" {
		t.Errorf("uri %q does not encode the path: %v", f["uri"], err)
	}
	if r.StatusCode != 418 || !slices.Equal(r.MultiValueHeaders["X-Multi"], []string{"a", "b"}) ||
		!slices.Equal(r.MultiValueHeaders["Set-Cookie"], []string{"session=s1", "theme=dark"}) || r.Headers != nil {
		t.Errorf("response %+v", r)
	}
}

// Payload 1.0 without multiValueHeaders (HTTP APIs send both; tests often
// only headers) still carries its headers.
func TestRESTAPIEventSingleValueHeaders(t *testing.T) {
	ev := v1Event("POST", "/shortenURL")
	ev.MultiValueHeaders = nil
	ev.Body = "plain"
	_, f := invoke(t, newEcho(), ev)
	if f["host"] != "xyz.execute-api.eu-west-1.amazonaws.com" || f["body"] != "plain" || f["tls"] != "true" {
		t.Errorf("facts %v", f)
	}
}

func TestFunctionURLEvent(t *testing.T) {
	ev := urlEvent("GET", "/Ab3dEf9hJk", "")
	ev.Cookies = []string{"a=1"}
	r, f := invoke(t, newEcho(), ev)
	if f["path"] != "/Ab3dEf9hJk" || f["host"] != "q4k2x.lambda-url.eu-west-1.on.aws" || f["tls"] != "true" || f["remote"] != "192.0.2.1" || f["cookies"] != "a=1" {
		t.Errorf("facts %v", f)
	}
	var resp events.LambdaFunctionURLResponse
	out, _ := newEcho().Invoke(context.Background(), mustJSON(t, ev))
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode != 418 || len(resp.Cookies) != 2 {
		t.Errorf("response does not decode as a function URL response: %+v %v", resp, err)
	}
	_ = r
}

func TestNamedStagePrefixIsStripped(t *testing.T) {
	ev := v2Event("GET", "/dev/getFullURL/x", "")
	ev.RequestContext.Stage = "dev"
	if _, f := invoke(t, newEcho(), ev); f["path"] != "/getFullURL/x" {
		t.Errorf("path %q", f["path"])
	}
	ev = v2Event("GET", "/devices", "")
	ev.RequestContext.Stage = "dev"
	if _, f := invoke(t, newEcho(), ev); f["path"] != "/devices" {
		t.Errorf("path %q", f["path"])
	}
}

func TestPlainHTTPAndHead(t *testing.T) {
	ev := v2Event("HEAD", "/x", "")
	delete(ev.Headers, "x-forwarded-proto")
	r, _ := invoke(t, newEcho(), ev)
	if r.Body != "" || r.StatusCode != 418 {
		t.Errorf("HEAD answered a body: %+v", r)
	}
	ev.RequestContext.HTTP.Method = "GET"
	if _, f := invoke(t, newEcho(), ev); f["tls"] != "false" {
		t.Errorf("tls %q without X-Forwarded-Proto", f["tls"])
	}
}

func TestBinaryResponse(t *testing.T) {
	r, _ := invoke(t, newEcho(), v2Event("GET", "/x", "binary=1"))
	b, err := base64.StdEncoding.DecodeString(r.Body)
	if !r.IsBase64Encoded || err != nil || !bytes.Equal(b, []byte{0xff, 0x00, 0xfe}) {
		t.Errorf("binary body %+v", r)
	}
}

func TestBadEvents(t *testing.T) {
	big := v2Event("POST", "/shortenURL", "")
	big.Body = strings.Repeat("x", 65)
	bigB64 := v2Event("POST", "/shortenURL", "")
	bigB64.Body, bigB64.IsBase64Encoded = base64.StdEncoding.EncodeToString(make([]byte, 65)), true
	badB64 := v2Event("POST", "/shortenURL", "")
	badB64.Body, badB64.IsBase64Encoded = "!!!", true
	bigHeaders := v2Event("GET", "/x", "")
	bigHeaders.Headers["x-big"] = strings.Repeat("h", 1024)
	tests := []struct {
		name string
		ev   any
		want string // the error the ErrorHandler saw
	}{
		{"not JSON", []byte(`{"version":`), "not an API Gateway or function URL event"},
		{"JSON but not an object", []byte(`[1,2]`), "not an API Gateway or function URL event"},
		{"S3 event", []byte(`{"Records":[{"eventSource":"aws:s3"}]}`), "no method or path"},
		{"unknown version", []byte(`{"version":"3.0","rawPath":"/x","requestContext":{"http":{"method":"GET"}}}`), "payload version"},
		{"body too large", big, "body size exceeds"},
		{"base64 body too large", bigB64, "body size exceeds"},
		{"bad base64", badB64, "body: illegal base64"},
		{"headers too large", bigHeaders, "small read buffer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got error
			h := lambda.NewHandler(echo, lambda.Options{MaxBodyBytes: 64, MaxHeaderBytes: 1024, ErrorHandler: func(ctx *fasthttp.RequestCtx, err error) {
				got = err
				ctx.SetStatusCode(400)
				ctx.SetBodyString(`{"error":"x"}`)
			}})
			r, _ := invoke(t, h, tt.ev)
			if got == nil || !strings.Contains(got.Error(), tt.want) {
				t.Errorf("ErrorHandler got %v, want %q", got, tt.want)
			}
			if r.StatusCode != 400 || r.Body != `{"error":"x"}` {
				t.Errorf("response %+v", r)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Whatever arrives, the runtime gets a proxy response: never a panic, never
// an invocation error.
func FuzzInvoke(f *testing.F) {
	for _, ev := range []any{v2Event("POST", "/shortenURL", "a=1"), v1Event("GET", "/x"), urlEvent("GET", "/y", "")} {
		b, _ := json.Marshal(ev)
		f.Add(b)
	}
	f.Add([]byte(`{"version":"2.0","rawPath":"/%zz","requestContext":{"http":{"method":"G ET"}},"isBase64Encoded":true,"body":"===="}`))
	h := newEcho()
	f.Fuzz(func(t *testing.T, payload []byte) {
		out, err := h.Invoke(context.Background(), payload)
		if err != nil {
			t.Fatalf("Invoke error %v", err)
		}
		var r reply
		if err := json.Unmarshal(out, &r); err != nil || r.StatusCode < 100 || r.StatusCode > 599 {
			t.Fatalf("response %s: %v", out, err)
		}
	})
}
