package proxy_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/basicauth"
	"github.com/linkgate/linkgate/gateway/plugin/cors"
	"github.com/linkgate/linkgate/gateway/plugin/faultinjection"
	gz "github.com/linkgate/linkgate/gateway/plugin/gzip"
	"github.com/linkgate/linkgate/gateway/plugin/iprestriction"
	"github.com/linkgate/linkgate/gateway/plugin/keyauth"
	"github.com/linkgate/linkgate/gateway/plugin/limitconn"
	"github.com/linkgate/linkgate/gateway/plugin/limitcount"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
	"github.com/linkgate/linkgate/gateway/plugin/proxyrewrite"
	"github.com/linkgate/linkgate/gateway/plugin/realip"
	"github.com/linkgate/linkgate/gateway/plugin/redirect"
	"github.com/linkgate/linkgate/gateway/plugin/redis"
	"github.com/linkgate/linkgate/gateway/plugin/requestid"
	"github.com/linkgate/linkgate/gateway/plugin/responserewrite"
)

func phaseRegistry() *gateway.Registry {
	log := slog.New(slog.DiscardHandler)
	return gateway.NewRegistry(keyauth.New(), basicauth.New(), cors.New(), requestid.New(1), responserewrite.New(), gz.New(),
		realip.New(), iprestriction.New(), redirect.New(0), faultinjection.New(), proxyrewrite.New(),
		limitcount.New(log, redis.NewPool()), limitconn.New(log, redis.NewPool()))
}

// The header filter phase runs on every response — the upstream's, a
// plugin's reply, a 404 — global rules first; cors answers preflights.
func TestHeaderFilterPhase(t *testing.T) {
	w := plugintest.Start(t, phaseRegistry(), nil)
	up := `"upstream":{"type":"roundrobin","nodes":{"$UPSTREAM":1}}`
	w.Load(t, map[string]string{
		"global_rules/1": `{"plugins":{"request-id":{"header_name":"X-Global-Id"}}}`,
		"routes/1":       `{"uri":"/cors","plugins":{"cors":{"allow_origins":"**"},"key-auth":{}},` + up + `}`,
		"routes/2":       `{"uri":"/open","plugins":{"cors":{},"request-id":{}},` + up + `}`,
	})
	r := w.Do(t, "OPTIONS", "/cors", "", "Origin", "https://sub.domain.com")
	if r.Status != 200 || r.Body != "" || r.Header.Get("Access-Control-Allow-Origin") != "https://sub.domain.com" || r.Header.Get("Vary") != "Origin" {
		t.Errorf("preflight: %d %q %v", r.Status, r.Body, r.Header)
	}
	// cors.t TEST 16: headers on the auth plugin's 401 too.
	r = w.Do(t, "GET", "/cors", "", "Origin", "https://sub.domain.com")
	if r.Status != 401 || r.Header.Get("Access-Control-Allow-Origin") != "https://sub.domain.com" || r.Header.Get("X-Global-Id") == "" {
		t.Errorf("401: %d %v", r.Status, r.Header)
	}
	r = w.Do(t, "GET", "/open", "")
	id := r.Header.Get("X-Request-Id")
	if r.Status != 200 || len(id) != 36 || !strings.Contains(r.Body, "X-Request-Id: "+id) || r.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("request-id: %d id %q %q", r.Status, id, r.Body)
	}
	if r = w.Do(t, "GET", "/open", "", "X-Request-Id", "mine"); r.Header.Get("X-Request-Id") != "mine" {
		t.Errorf("client id not kept: %v", r.Header)
	}
	if r = w.Do(t, "GET", "/nowhere", ""); r.Status != 404 || r.Header.Get("X-Global-Id") == "" {
		t.Errorf("404 without the global rule's header: %v", r.Header)
	}
}

// Body filters and encoders see the whole body; Content-Length follows.
func TestBodyPhase(t *testing.T) {
	page := strings.Repeat("hello world ", 50)
	w := plugintest.Start(t, phaseRegistry(), func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/html")
		rw.Header().Set("ETag", `"abc"`)
		io.WriteString(rw, page)
	})
	up := `"upstream":{"type":"roundrobin","nodes":{"$UPSTREAM":1}}`
	w.Load(t, map[string]string{
		"routes/1": `{"uri":"/gzip","plugins":{"gzip":{"vary":true}},` + up + `}`,
		"routes/2": `{"uri":"/both","plugins":{"gzip":{},"response-rewrite":{"filters":[{"regex":"hello","replace":"bye","scope":"global"}],"headers":{"Content-Type":"text/html"}}},` + up + `}`,
		"routes/3": `{"uri":"/body","plugins":{"response-rewrite":{"body":"new body\n","status_code":201}},` + up + `}`,
		"routes/4": `{"uri":"/notype","plugins":{"response-rewrite":{"headers":{"Content-Type":"","etag":"","X-A":"1"}}},` + up + `}`,
		"routes/5": `{"uri":"/reply","plugins":{"fault-injection":{"abort":{"http_status":200,"body":"x"}},"response-rewrite":{"headers":{"Content-Type":""}}},` + up + `}`,
	})
	for _, path := range []string{"/notype", "/reply"} {
		if r := w.Do(t, "GET", path, ""); r.Header.Get("Content-Type") != "" || r.Header.Get("ETag") != "" || len(r.Header["Content-Type"]) != 0 {
			t.Errorf("%s: headers deleted case-insensitively: %v", path, r.Header)
		}
	}
	r := w.Do(t, "GET", "/gzip", "", "Accept-Encoding", "gzip")
	plain := gunzip(t, r.Body)
	if r.Header.Get("Content-Encoding") != "gzip" || plain != page || r.Header.Get("Content-Length") != fmt.Sprint(len(r.Body)) ||
		r.Header.Get("Vary") != "Accept-Encoding" || r.Header.Get("ETag") != `W/"abc"` {
		t.Errorf("gzip: %v, %d bytes", r.Header, len(r.Body))
	}
	if r = w.Do(t, "GET", "/gzip", ""); r.Header.Get("Content-Encoding") != "" || r.Body != page {
		t.Errorf("gzip without Accept-Encoding: %v", r.Header)
	}
	// The rewrite runs first, gzip encodes what it left.
	r = w.Do(t, "GET", "/both", "", "Accept-Encoding", "gzip")
	if got := gunzip(t, r.Body); got != strings.ReplaceAll(page, "hello", "bye") || r.Header.Get("ETag") != "" {
		t.Errorf("rewrite then gzip: %q %v", got[:min(len(got), 30)], r.Header)
	}
	r = w.Do(t, "GET", "/body", "")
	if r.Status != 201 || r.Body != "new body\n" || r.Header.Get("Content-Length") != "9" || r.Header.Get("ETag") != "" {
		t.Errorf("body: %d %q %v", r.Status, r.Body, r.Header)
	}
}

func gunzip(t *testing.T, s string) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader([]byte(s)))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A consumer's own plugins run merged with the route's, in every phase.
func TestConsumerPlugins(t *testing.T) {
	w := plugintest.Start(t, phaseRegistry(), nil)
	w.Load(t, map[string]string{
		"consumers/jack": `{"username":"jack","plugins":{"basic-auth":{"username":"jack","password":"pw"},
			"response-rewrite":{"headers":{"X-Consumer":"$consumer_name"}},"limit-count":{"count":1,"time_window":60,"rejected_code":429},
			"proxy-rewrite":{"headers":{"X-From-Consumer":"yes"}}}}`,
		"consumers/rose": `{"username":"rose","plugins":{"basic-auth":{"username":"rose","password":"pw"}}}`,
		"routes/1": `{"uri":"/hello","plugins":{"basic-auth":{},"response-rewrite":{"headers":{"X-Route":"1"}},"limit-count":{"count":5,"time_window":60}},
			"upstream":{"type":"roundrobin","nodes":{"$UPSTREAM":1}}}`,
	})
	jack, rose := "Basic amFjazpwdw==", "Basic cm9zZTpwdw=="
	r := w.Do(t, "GET", "/hello", "", "Authorization", jack)
	if r.Status != 200 || r.Header.Get("X-Consumer") != "jack" || r.Header.Get("X-Route") != "" || !strings.Contains(r.Body, "X-From-Consumer: yes") {
		t.Errorf("jack: %d %v %q", r.Status, r.Header, r.Body)
	}
	if r = w.Do(t, "GET", "/hello", "", "Authorization", jack); r.Status != 429 {
		t.Errorf("jack's own limit: %d", r.Status)
	}
	r = w.Do(t, "GET", "/hello", "", "Authorization", rose)
	if r.Status != 200 || r.Header.Get("X-Route") != "1" || r.Header.Get("X-Consumer") != "" || r.Header.Get("X-RateLimit-Limit") != "5" {
		t.Errorf("rose: %d %v", r.Status, r.Header)
	}
}

// real-ip changes the address everything after it sees, upstream included.
func TestRealIP(t *testing.T) {
	w := plugintest.Start(t, phaseRegistry(), nil)
	up := `"upstream":{"type":"roundrobin","nodes":{"$UPSTREAM":1}}`
	w.Load(t, map[string]string{
		"routes/1": `{"uri":"/hello","plugins":{"real-ip":{"source":"http_xff"},"ip-restriction":{"whitelist":["1.1.1.1"]}},` + up + `}`,
		"routes/2": `{"uri":"/xff","plugins":{"real-ip":{"source":"http_x_forwarded_for","trusted_addresses":["127.0.0.0/8"],"recursive":true},
			"response-rewrite":{"headers":{"remote":"$remote_addr:$remote_port"}}},` + up + `}`,
	})
	if r := w.Do(t, "GET", "/hello", "", "XFF", "1.1.1.1:7090"); r.Status != 200 || !strings.Contains(r.Body, "X-Real-Ip: 1.1.1.1") {
		t.Errorf("real ip: %d %q", r.Status, r.Body)
	}
	if r := w.Do(t, "GET", "/hello", ""); r.Status != 403 || r.Body != `{"message":"Your IP address is not allowed"}`+"\n" {
		t.Errorf("no real ip: %d %q", r.Status, r.Body)
	}
	// Two X-Forwarded-For headers read as one list (nginx's variable).
	r := w.Do(t, "GET", "/xff", "", "X-Forwarded-For", "3.3.3.3, 2.2.2.2", "X-Forwarded-For", "127.0.0.5")
	if !strings.HasPrefix(r.Header.Get("remote"), "2.2.2.2:") {
		t.Errorf("recursive: %v", r.Header)
	}
}

// limit-conn counts a request out in the log phase, whatever answered it.
func TestLimitConnCountsOut(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 4)
	w := plugintest.Start(t, phaseRegistry(), func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			<-release
		}
		io.WriteString(rw, "ok")
	})
	w.Load(t, map[string]string{
		"routes/1": `{"uris":["/slow","/fast"],"plugins":{"limit-conn":{"conn":1,"burst":0,"default_conn_delay":0.1,"key":"remote_addr","rejected_code":429},
			"fault-injection":{"abort":{"http_status":418,"vars":[[["arg_fail","==","1"]]]}}},
			"upstream":{"type":"roundrobin","nodes":{"$UPSTREAM":1}}}`,
	})
	done := make(chan Response, 1)
	go func() { r := w.Do(t, "GET", "/slow", ""); done <- Response{r.Status} }()
	<-arrived
	if r := w.Do(t, "GET", "/fast", ""); r.Status != 429 {
		t.Errorf("second in flight: %d, want 429", r.Status)
	}
	close(release)
	if r := <-done; r.status != 200 {
		t.Errorf("first: %d", r.status)
	}
	// Counted out: the next ones pass, one at a time.
	for range 3 {
		if r := w.Do(t, "GET", "/fast", ""); r.Status != 200 {
			t.Errorf("after the first left: %d", r.Status)
		}
	}
	// fault-injection (priority 11000) answers before limit-conn counts in.
	if r := w.Do(t, "GET", "/fast?fail=1", ""); r.Status != 418 {
		t.Errorf("abort: %d", r.Status)
	}
	if r := w.Do(t, "GET", "/fast", ""); r.Status != 200 {
		t.Errorf("after an abort: %d", r.Status)
	}
}

// Response carries a status out of a goroutine.
type Response struct{ status int }

func TestRedirectPhase(t *testing.T) {
	w := plugintest.Start(t, phaseRegistry(), nil)
	w.Load(t, map[string]string{
		"routes/1": `{"uri":"/hello","plugins":{"redirect":{"http_to_https":true}},"upstream":{"type":"roundrobin","nodes":{"$UPSTREAM":1}}}`,
	})
	r := w.Do(t, "GET", "/hello?a=1", "", "Host", "foo.com")
	if r.Status != 301 || r.Header.Get("Location") != "https://foo.com/hello?a=1" {
		t.Errorf("%d %v", r.Status, r.Header)
	}
	if r = w.Do(t, "POST", "/hello", "x", "Host", "foo.com"); r.Status != 308 {
		t.Errorf("POST: %d", r.Status)
	}
}

// $http_custom_header reads a header sent as custom_header, as nginx's
// variables do with APISIX's underscores_in_headers on.
func TestHeaderVarUnderscores(t *testing.T) {
	w := plugintest.Start(t, phaseRegistry(), nil)
	w.Load(t, map[string]string{"routes/1": `{"uri":"/hello","plugins":{"response-rewrite":{"headers":{"X-Got":"$http_custom_header"}}},
		"upstream":{"type":"roundrobin","nodes":{"$UPSTREAM":1}}}`})
	for _, name := range []string{"custom_header", "Custom-Header"} {
		if r := w.Do(t, "GET", "/hello", "", name, "v1"); r.Header.Get("X-Got") != "v1" {
			t.Errorf("%s: X-Got %q", name, r.Header.Get("X-Got"))
		}
	}
}
