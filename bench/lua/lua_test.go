package lua_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/bench"
	"github.com/linkgate/linkgate/bench/lua"
)

// recorder is an in-test target that keeps every request it gets.
type recorder struct {
	mu   sync.Mutex
	reqs []*http.Request
	body []string
}

func (r *recorder) serve(t *testing.T, h http.HandlerFunc) *url.URL {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, req)
		r.body = append(r.body, string(b))
		r.mu.Unlock()
		req.Body = io.NopCloser(bytes.NewReader(b))
		h(w, req)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL + "/")
	return u
}

func ok(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Served", "yes")
	w.Write([]byte("ok"))
}

func load(t *testing.T, path string, u *url.URL, args ...string) (*lua.Script, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	s, err := lua.Load(lua.Options{Path: path, URL: u, Args: args, Stdout: &out,
		Headers: bench.Fields{{Name: "X-From-H", Value: "1"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, &out
}

func runScript(t *testing.T, s *lua.Script, u *url.URL, threads int) *bench.Result {
	t.Helper()
	res, err := bench.Run(context.Background(), bench.Config{
		URL: u, Threads: threads, Connections: threads * 2, Duration: 200 * time.Millisecond,
		Timeout: time.Second, NewRequester: s.NewRequester,
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestStockPost(t *testing.T) {
	var rec recorder
	u := rec.serve(t, ok)
	s, _ := load(t, "testdata/post.lua", u)
	// A static script: the worker gets fixed bytes and never calls Lua.
	r, err := s.NewRequester(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.(bench.Fixed); !ok {
		t.Errorf("post.lua gave %T, want a fixed request", r)
	}
	res := runScript(t, s, u, 1)
	if res.Requests == 0 || res.Errors.Total() != 0 {
		t.Fatalf("requests %d errors %+v", res.Requests, res.Errors)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	req := rec.reqs[0]
	if req.Method != "POST" || rec.body[0] != "foo=bar&baz=quux" ||
		req.Header.Get("Content-Type") != "application/x-www-form-urlencoded" || req.Header.Get("X-From-H") != "1" ||
		req.Host != u.Host {
		t.Errorf("request %s %s host %q headers %v body %q", req.Method, req.URL, req.Host, req.Header, rec.body[0])
	}
}

func TestStockCounter(t *testing.T) {
	var rec recorder
	u := rec.serve(t, ok)
	s, _ := load(t, "testdata/counter.lua", u)
	res := runScript(t, s, u, 1)
	if res.Requests < 3 {
		t.Fatalf("requests %d", res.Requests)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	// The first request() call is wrk's verification call, so the target
	// sees paths from /1 on, each with its own X-Counter.
	seen := map[string]bool{}
	for i, req := range rec.reqs {
		if "/"+req.Header.Get("X-Counter") != req.URL.Path {
			t.Errorf("request %d: path %s X-Counter %q", i, req.URL.Path, req.Header.Get("X-Counter"))
		}
		seen[req.URL.Path] = true
	}
	for _, want := range []string{"/1", "/2", "/3"} {
		if !seen[want] || seen["/0"] {
			t.Errorf("paths %v: want /1, /2, /3… and not /0", seen)
			break
		}
	}
}

func TestStockReport(t *testing.T) {
	var rec recorder
	u := rec.serve(t, ok)
	s, out := load(t, "testdata/report.lua", u)
	res := runScript(t, s, u, 1)
	if !s.HasDone() {
		t.Fatal("HasDone false")
	}
	if err := s.Done(res); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 || lines[0] != "------------------------------" || !strings.HasPrefix(lines[1], "50%,") ||
		!strings.HasPrefix(lines[4], "99.999%,") {
		t.Errorf("report.lua printed %q", out.String())
	}
}

func TestSetupInitResponseDone(t *testing.T) {
	var rec recorder
	u := rec.serve(t, ok)
	s, out := load(t, "testdata/threads.lua", u, "tagged")
	res := runScript(t, s, u, 2)
	if err := s.Done(res); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"thread 1 tag tagged responses ", "thread 2 tag tagged responses ", "summary requests "} {
		if !strings.Contains(got, want) {
			t.Errorf("output %q lacks %q", got, want)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.reqs[0].Header.Get("X-Tag") != "tagged" {
		t.Errorf("init(args) did not set X-Tag: %v", rec.reqs[0].Header)
	}
}

// The repository's JSON post.lua for /shortenURL sends what linkgate serve
// (and the seed's shortener) accept.
func TestShortenPostScript(t *testing.T) {
	var rec recorder
	u := rec.serve(t, func(w http.ResponseWriter, r *http.Request) {
		var in struct{ OriginalURL string }
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if r.Method != "POST" || r.URL.Path != "/shortenURL" || r.Header.Get("Content-Type") != "application/json" ||
			dec.Decode(&in) != nil || !strings.HasPrefix(in.OriginalURL, "https://") {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]string{"shortURL": "abcdefghij", "originalURL": in.OriginalURL})
	})
	u.Path = "/shortenURL"
	s, _ := load(t, "../../scripts/shorten-post.lua", u)
	res := runScript(t, s, u, 1)
	if res.Requests == 0 || res.Errors.Total() != 0 {
		t.Fatalf("requests %d errors %+v", res.Requests, res.Errors)
	}
}

func TestSyntaxError(t *testing.T) {
	_, err := lua.Load(lua.Options{Path: "testdata/syntax_error.lua", URL: &url.URL{Scheme: "http", Host: "h"}})
	var se *lua.SyntaxError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "syntax_error.lua") || !strings.Contains(err.Error(), "line:2") {
		t.Errorf("err = %v, want a syntax error naming the file and line", err)
	}
}

func TestRuntimeErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := dir + "/" + name
		if err := writeFile(p, src); err != nil {
			t.Fatal(err)
		}
		return p
	}
	u := &url.URL{Scheme: "http", Host: "127.0.0.1:1", Path: "/"}
	if _, err := lua.Load(lua.Options{Path: write("top.lua", `error("at load")`), URL: u}); err == nil || !strings.Contains(err.Error(), "top.lua:1: at load") {
		t.Errorf("load error %v", err)
	}
	s, err := lua.Load(lua.Options{Path: write("init.lua", `function init(a) error("in init") end`), URL: u})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.NewRequester(0); err == nil || !strings.Contains(err.Error(), "init.lua:1: in init") {
		t.Errorf("init error %v", err)
	}
	s2, err := lua.Load(lua.Options{Path: write("req.lua", `function request() return 42 end`), URL: u})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	r, _ := s2.NewRequester(0)
	if _, err := r.Request(nil); err == nil || !strings.Contains(err.Error(), "want a string") {
		t.Errorf("request error %v", err)
	}
	if _, err := lua.Load(lua.Options{Path: dir + "/missing.lua", URL: u}); err == nil {
		t.Error("missing file accepted")
	}
}

// BenchmarkDynamicRequest is the cost of one request() call through Lua,
// the price of a dynamic script (static scripts never pay it).
func BenchmarkDynamicRequest(b *testing.B) {
	u := &url.URL{Scheme: "http", Host: "127.0.0.1:1", Path: "/"}
	s, err := lua.Load(lua.Options{Path: "testdata/counter.lua", URL: u})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r, _ := s.NewRequester(0)
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = r.Request(dst[:0])
	}
}
