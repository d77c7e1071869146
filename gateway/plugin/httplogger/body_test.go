package httplogger

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/gateway"
	gzipplugin "github.com/linkgate/linkgate/gateway/plugin/gzip"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
)

// bodyUpstream answers with what it received (length and digest of the
// request body, in headers) and a body chosen by the path: /text the
// 26 letters; /big 200 kB of them, streamed (no Content-Length);
// /gzip the letters gzipped (Content-Encoding gzip); /missing 404.
func bodyUpstream(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	sum := sha256.Sum256(b)
	w.Header().Set("X-Got-Len", strconv.Itoa(len(b)))
	w.Header().Set("X-Got-Sum", hex.EncodeToString(sum[:]))
	const letters = "abcdefghijklmnopqrstuvwxyz"
	switch r.URL.Path {
	case "/text":
		io.WriteString(w, letters)
	case "/big":
		for range 200 << 10 / len(letters) {
			io.WriteString(w, letters)
			w.(http.Flusher).Flush()
		}
	case "/gzip":
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		io.WriteString(zw, letters)
		zw.Close()
	default:
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, "not here")
	}
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestBodies: the request and response bodies in the full log, through
// the real engine, bounded by max_*_body_bytes, chosen by the
// expressions; the upstream and the client still get whole bodies.
func TestBodies(t *testing.T) {
	rcv := newReceiver(t, 200)
	gw := plugintest.Start(t, gateway.NewRegistry(New(Options{}), gzipplugin.New()), bodyUpstream)
	big := strings.Repeat("0123456789", 100<<10/10) // 100 kB: streamed upstream
	for _, tc := range []struct {
		name, conf, method, path, body string
		chunked                        bool
		hdr                            []string
		wantReq, wantResp              any // nil: no key
		plugins                        string
	}{
		{name: "request body, read whole", conf: `"include_req_body":true,"max_req_body_bytes":5`,
			method: "POST", path: "/text", body: "hello world", wantReq: "hello"},
		{name: "request body shorter than the bound", conf: `"include_req_body":true`,
			method: "POST", path: "/text", body: "hi", wantReq: "hi"},
		{name: "request body streamed upstream", conf: `"include_req_body":true,"max_req_body_bytes":12`,
			method: "POST", path: "/text", body: big, wantReq: "012345678901"},
		{name: "request body of unknown length", conf: `"include_req_body":true,"max_req_body_bytes":7`,
			method: "POST", path: "/text", body: big, chunked: true, wantReq: "0123456"},
		{name: "request expression matches", conf: `"include_req_body":true,"include_req_body_expr":[["arg_log","==","yes"]]`,
			method: "POST", path: "/text?log=yes", body: "abc", wantReq: "abc"},
		{name: "request expression does not match", conf: `"include_req_body":true,"include_req_body_expr":[["arg_log","==","yes"]]`,
			method: "POST", path: "/text?log=no", body: "abc"},
		{name: "response body", conf: `"include_resp_body":true,"max_resp_body_bytes":5`,
			method: "GET", path: "/text", wantResp: "abcde"},
		{name: "response body streamed to the client", conf: `"include_resp_body":true,"max_resp_body_bytes":30`,
			method: "GET", path: "/big", wantResp: "abcdefghijklmnopqrstuvwxyzabcd"},
		{name: "both", conf: `"include_req_body":true,"include_resp_body":true`,
			method: "PUT", path: "/text", body: "up", wantReq: "up", wantResp: "abcdefghijklmnopqrstuvwxyz"},
		{name: "response expression on the status, matches", conf: `"include_resp_body":true,"include_resp_body_expr":[["status","==",404]]`,
			method: "GET", path: "/missing", wantResp: "not here"},
		{name: "response expression on the status, does not match", conf: `"include_resp_body":true,"include_resp_body_expr":[["status","==",404]]`,
			method: "GET", path: "/text"},
		{name: "upstream gzip, decoded", conf: `"include_resp_body":true`,
			method: "GET", path: "/gzip", wantResp: "abcdefghijklmnopqrstuvwxyz"},
		{name: "upstream gzip cut at the bound, as it is", conf: `"include_resp_body":true,"max_resp_body_bytes":4`,
			method: "GET", path: "/gzip", wantResp: "\x1f\ufffd\b\x00"}, // JSON strings are UTF-8
		{name: "gzip plugin: the body before it", conf: `"include_resp_body":true`, plugins: `,"gzip":{"min_length":1}`,
			method: "GET", path: "/text", hdr: []string{"Accept-Encoding", "gzip"}, wantResp: "abcdefghijklmnopqrstuvwxyz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw.Load(t, map[string]string{"routes/1": `{"uri":"/*","upstream":{"type":"roundrobin","nodes":{"$UPSTREAM":1}},"plugins":{"http-logger":` +
				`{"uri":"` + rcv.url + `","batch_max_size":1,` + tc.conf + `}` + tc.plugins + `}}`})
			var rd io.Reader
			if tc.body != "" {
				rd = strings.NewReader(tc.body)
				if tc.chunked {
					rd = io.MultiReader(rd) // no length known: chunked
				}
			}
			req, err := http.NewRequest(tc.method, gw.URL+tc.path, rd)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				req.Header.Set(tc.hdr[i], tc.hdr[i+1])
			}
			res, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if n, sum := res.Header.Get("X-Got-Len"), res.Header.Get("X-Got-Sum"); n != strconv.Itoa(len(tc.body)) || sum != digest(tc.body) {
				t.Errorf("upstream got %s bytes (sha256 %s), want the whole %d", n, sum, len(tc.body))
			}
			if tc.path == "/big" && len(got) != 200<<10/26*26 {
				t.Errorf("client got %d bytes, want the whole body", len(got))
			}
			var e struct {
				Request  map[string]any `json:"request"`
				Response map[string]any `json:"response"`
			}
			if err := json.Unmarshal([]byte(rcv.next(t).body), &e); err != nil {
				t.Fatal(err)
			}
			if g := e.Request["body"]; g != tc.wantReq {
				t.Errorf("request.body %q, want %q", g, tc.wantReq)
			}
			if g := e.Response["body"]; g != tc.wantResp {
				t.Errorf("response.body %q, want %q", g, tc.wantResp)
			}
		})
	}
}

func TestBodyConf(t *testing.T) {
	const prefix = "failed to check the configuration of plugin http-logger err: "
	for _, tc := range []struct{ conf, err string }{
		{`{"uri":"http://a","include_req_body":true,"include_resp_body":true,"max_req_body_bytes":5,"max_resp_body_bytes":5}`, ""},
		{`{"uri":"http://a","include_req_body":true,"include_req_body_expr":[["arg_bar","==","bar"]]}`, ""},
		{`{"uri":"http://a","max_req_body_bytes":0}`, `property "max_req_body_bytes" validation failed: expected 0 to be at least 1`},
		{`{"uri":"http://a","max_resp_body_bytes":"1"}`, `property "max_resp_body_bytes" validation failed: wrong type: expected integer, got string`},
		{`{"uri":"http://a","include_req_body_expr":[["bar","<>","bar"]]}`, `failed to validate the 'include_req_body_expr' expression: invalid operator '<>'`},
		{`{"uri":"http://a","include_resp_body_expr":[["bar"]]}`, `failed to validate the 'include_resp_body_expr' expression: invalid expression`},
	} {
		got := plugintest.Check(t, New(Options{}), tc.conf, false)
		if want := tc.err; got != want && (want == "" || got != prefix+want) {
			t.Errorf("%s: %q, want %q", tc.conf, got, prefix+want)
		}
	}
}

// BenchmarkBodies: a request through the phases of an instance that logs
// both bodies (the engine's capture itself is in gateway/proxy).
func BenchmarkBodies(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	f := New(Options{MaxPending: 1 << 30})
	in := plugintest.New(b, f, `{"uri":"`+srv.URL+`","batch_max_size":1000,"include_req_body":true,"include_resp_body":true,"max_resp_body_bytes":64}`).(*bodyInstance)
	c := plugintest.NewCtx(map[string]string{"host": "example.com", "uri": "/api"})
	c.ReqBody = bytes.Repeat([]byte("q"), 200)
	c.RespBody = bytes.Repeat([]byte("r"), 200)
	e := &gateway.LogEntry{Status: 200, RouteID: "1"}
	b.ReportAllocs()
	for b.Loop() {
		c.Reset()
		in.Access(c)
		in.FilterHeaders(c)
		in.Log(c, e)
	}
}
