package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/internal/accesslog"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/httpapi"
)

// BenchmarkRedirect is the redirect hit path as the server runs it:
// routing, in-flight accounting, the store lookup, Location and
// Cache-Control, metrics. Target: 0 allocs/op.
func BenchmarkRedirect(b *testing.B) {
	benchmarkRedirect(b, setup{}, "")
}

// BenchmarkRedirectForwardQuery is BenchmarkRedirect with links that
// forward the query string, visited with three UTM parameters and one the
// target has already.
func BenchmarkRedirectForwardQuery(b *testing.B) {
	benchmarkRedirect(b, setup{}, "?utm_source=newsletter&utm_medium=email&utm_campaign=spring&ref=visitor")
}

// BenchmarkRedirectVisits is BenchmarkRedirect with visits counted (a
// browser User-Agent and a Referer on every request): the cost of Record
// on the hot path. Flushes (hourly here) are measured by make bench-visits.
func BenchmarkRedirectVisits(b *testing.B) {
	benchmarkRedirect(b, setup{visits: true}, "")
}

// BenchmarkRedirectVisitsUTM is BenchmarkRedirectVisits with UTM
// parameters in the query, which Record decodes. Target: 0 allocs/op.
func BenchmarkRedirectVisitsUTM(b *testing.B) {
	benchmarkRedirect(b, setup{visits: true}, "?utm_source=news&utm_medium=e%20mail&utm_campaign=launch")
}

// BenchmarkRedirectDomain is BenchmarkRedirect on the second of two
// domains: the Host is matched and the store key (domain/id) built in a
// pooled buffer. Target: 0 allocs/op, as on the default domain.
func BenchmarkRedirectDomain(b *testing.B) {
	benchmarkRedirect(b, setup{cfg: httpapi.Config{Domains: []string{"sho.rt", "go.example.com"}}}, "")
}

// benchmarkRedirect follows 1000 links in turn; with a query, the links
// forward it. With domains, the links are on the last one and requests
// name it.
func benchmarkRedirect(b *testing.B, s setup, query string) {
	h, store := newHandler(b, s)
	ctx := context.Background()
	var host, domain string // none: no Host header, as before domains
	if n := len(s.cfg.Domains); n > 1 {
		host, domain = s.cfg.Domains[n-1], s.cfg.Domains[n-1]
	}
	paths := make([][]byte, 1000)
	for i := range paths {
		id := fmt.Sprintf("bench%05d", i)
		l := shortener.Link{ID: shortener.LinkKey(domain, id), URL: "https://aws.amazon.com/ec2/graviton/?ref=" + id}
		if query != "" {
			l.ForwardQuery = shortener.ForwardOn
		}
		if err := store.Create(ctx, l); err != nil {
			b.Fatal(err)
		}
		paths[i] = []byte("/" + id + query)
	}
	var rc fasthttp.RequestCtx
	var req fasthttp.Request
	req.Header.SetMethod("GET")
	req.SetRequestURI("/bench00000")
	req.Header.SetUserAgent("Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0")
	req.Header.SetReferer("https://news.example.com/item?id=1")
	rc.Init(&req, nil, nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		rc.Request.SetRequestURIBytes(paths[i%len(paths)])
		if host != "" {
			rc.Request.Header.SetHost(host)
		}
		rc.Response.Reset()
		h.ServeFastHTTP(&rc)
		if rc.Response.StatusCode() != 302 {
			b.Fatalf("status %d", rc.Response.StatusCode())
		}
	}
}

// BenchmarkShed is a create refused because its class's budget is used
// up (here by one create held in the store): a flood's refusals must cost
// the server little. Target: 0 allocs/op.
func BenchmarkShed(b *testing.B) {
	bs := blockingStore{entered: make(chan struct{}, 1), release: make(chan struct{})}
	h, _ := newHandler(b, setup{cfg: httpapi.Config{MaxInflightCreates: 1}, wrap: func(st shortener.Store) shortener.Store { bs.Store = st; return bs }})
	create := func() *fasthttp.RequestCtx {
		var req fasthttp.Request
		req.Header.SetMethod("POST")
		req.SetRequestURI("/shortenURL")
		req.SetBodyString(`{"OriginalURL":"https://aws.amazon.com/ec2/graviton/"}`)
		var rc fasthttp.RequestCtx
		rc.Init(&req, nil, nil)
		return &rc
	}
	held := make(chan int)
	go func() {
		rc := create()
		h.ServeFastHTTP(rc)
		held <- rc.Response.StatusCode()
	}()
	<-bs.entered
	rc := create()
	b.ReportAllocs()
	for b.Loop() {
		rc.Response.Reset()
		h.ServeFastHTTP(rc)
		if rc.Response.StatusCode() != 503 {
			b.Fatalf("status %d", rc.Response.StatusCode())
		}
	}
	b.StopTimer()
	close(bs.release)
	if st := <-held; st != 201 {
		b.Errorf("held create: %d", st)
	}
}

// The net/http adapter answers exactly what the fasthttp server answers.
func TestServeHTTPAdapter(t *testing.T) {
	s := start(t, setup{})
	viaAdapter := func(method, path, body string, hdr ...string) response {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Host = strings.TrimPrefix(s.URL, "http://")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		s.Handler.ServeHTTP(w, req)
		return response{w.Code, w.Header(), w.Body.String()}
	}
	r := viaAdapter("POST", "/shortenURL", `{"OriginalURL":"https://adapter.example/?a=1&b=2"}`)
	id := wantSeedCreated(t, r, `https://adapter.example/?a=1\u0026b=2`)
	tests := []struct {
		method, path, body string
		hdr                []string
	}{
		{"GET", "/" + id, "", nil},
		{"HEAD", "/" + id, "", nil},
		{"GET", "/getFullURL/" + id, "", nil},
		{"GET", "/nope000000", "", []string{"Accept", "application/json"}},
		{"GET", "/nope000000", "", nil},
		{"POST", "/" + id, "", nil},
		{"POST", "/shortenURL", `{"OriginalURL":"javascript:x"}`, nil},
		{"POST", "/shortenURL", strings.Repeat("x", 9000), nil},
		{"GET", "/api/v1/links/" + id, "", nil},
		{"GET", "/api/v1/links", "", nil},
		{"GET", "/healthz", "", nil},
	}
	for _, tt := range tests {
		got := viaAdapter(tt.method, tt.path, tt.body, tt.hdr...)
		want := s.do(t, tt.method, tt.path, tt.body, tt.hdr...)
		if tt.method == "HEAD" {
			got.Body = ""
		}
		if got.Status != want.Status || got.Body != want.Body {
			t.Errorf("%s %s: adapter %d %q, server %d %q", tt.method, tt.path, got.Status, got.Body, want.Status, want.Body)
		}
		for _, k := range []string{"Content-Type", "Location", "Cache-Control", "Allow", "Retry-After"} {
			if got.Header.Get(k) != want.Header.Get(k) {
				t.Errorf("%s %s: adapter %s %q, server %q", tt.method, tt.path, k, got.Header.Get(k), want.Header.Get(k))
			}
		}
	}
}

// fuzzPost sends body to path through the fasthttp handler directly.
func fuzzPost(h interface{ ServeFastHTTP(*fasthttp.RequestCtx) }, path string, body []byte) (int, []byte) {
	var rc fasthttp.RequestCtx
	var req fasthttp.Request
	req.Header.SetMethod("POST")
	req.SetRequestURI(path)
	req.Header.SetHost("links.example")
	req.SetBody(body)
	rc.Init(&req, nil, nil)
	h.ServeFastHTTP(&rc)
	return rc.Response.StatusCode(), rc.Response.Body()
}

// checkFuzzAnswer: a create answers 201 or a 4xx JSON error; never 5xx.
func checkFuzzAnswer(t *testing.T, body []byte, status int, out []byte) {
	switch {
	case status == 201:
	case status == 400 || status == 409:
		var e struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal(out, &e); err != nil || e.Error.Code == "" {
			t.Fatalf("body %q: %d with a non-JSON error %q", body, status, out)
		}
	default:
		t.Fatalf("body %q: status %d %q", body, status, out)
	}
}

func FuzzShortenURLBody(f *testing.F) {
	for _, s := range []string{`{"OriginalURL":"https://aws.amazon.com/ec2/graviton/"}`, `{}`, `null`, `[]`, `"x"`, `{"originalurl":"https://a.example/?a=<b>"}`, `foo=bar&baz=quux`, `{"OriginalURL":"x"}{"OriginalURL":"y"}`, `{"OriginalURL":123}`} {
		f.Add([]byte(s))
	}
	h, _ := newHandler(f, setup{})
	f.Fuzz(func(t *testing.T, body []byte) {
		status, out := fuzzPost(h, "/shortenURL", body)
		checkFuzzAnswer(t, body, status, out)
		if status == 201 && !seedCreateBody.Match(out) {
			t.Fatalf("201 body %q does not have the seed's shape", out)
		}
	})
}

func FuzzCreateBody(f *testing.F) {
	for _, s := range []string{`{"url":"https://example.com/","slug":"my-slug","expires_at":"2099-01-01T00:00:00Z","max_visits":3}`, `{"url":"https://example.com/"}`, `{"url":1}`, `{"x":1}`, `{"url":"https://e.example/","slug":"api"}`, `{"url":"https://e.example/","expires_at":"2099-13-01T00:00:00Z"}`} {
		f.Add([]byte(s))
	}
	h, _ := newHandler(f, setup{})
	f.Fuzz(func(t *testing.T, body []byte) {
		status, out := fuzzPost(h, "/api/v1/links", body)
		checkFuzzAnswer(t, body, status, out)
		if status == 201 {
			var l linkBody
			if err := json.Unmarshal(out, &l); err != nil || l.ID == "" || l.URL == "" {
				t.Fatalf("201 body %q", out)
			}
		}
	})
}

var _ http.Handler = (*httpapi.Handler)(nil)

// BenchmarkShortenURL is POST /shortenURL end to end through the handler
// with 64 concurrent clients sharing the store's group commits; each op is one
// fsynced create (make bench-serve measures it over HTTP).
func BenchmarkShortenURL(b *testing.B) {
	h, _ := newHandler(b, setup{})
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(64)
	b.RunParallel(func(pb *testing.PB) {
		var rc fasthttp.RequestCtx
		var req fasthttp.Request
		req.Header.SetMethod("POST")
		req.SetRequestURI("/shortenURL")
		rc.Init(&req, nil, nil)
		for pb.Next() {
			rc.Request.SetBodyString(fmt.Sprintf(`{"OriginalURL":"https://bench.example/%d"}`, n.Add(1)))
			rc.Response.Reset()
			h.ServeFastHTTP(&rc)
			if rc.Response.StatusCode() != 201 {
				b.Fatalf("status %d %q", rc.Response.StatusCode(), rc.Response.Body())
			}
		}
	})
}

// BenchmarkRedirectAccessLog is BenchmarkRedirect with an access log on
// (combined, to io.Discard): its record is copied into the log's buffer
// on the redirect's path, formatted by the log's writer goroutine.
// Target: 0 allocs/op.
func BenchmarkRedirectAccessLog(b *testing.B) {
	log := accesslog.New(io.Discard, accesslog.Options{})
	defer log.Close()
	benchmarkRedirect(b, setup{cfg: httpapi.Config{AccessLog: log}}, "")
}
