package lambda_test

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkgate/linkgate/lambda"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/httpapi"
	"github.com/linkgate/linkgate/shortener/pebble"
)

// The function answers exactly what `linkgate serve` answers: the same
// handler behind a real server and behind the adapter, over one store.
func TestParityWithServe(t *testing.T) {
	store, err := pebble.Open(filepath.Join(t.TempDir(), "links"), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	reg := prometheus.NewRegistry()
	logger := slog.New(slog.DiscardHandler)
	h, err := httpapi.NewHandler(logger, shortener.NewService(store, shortener.Options{}), httpapi.NewMetrics(reg), reg, httpapi.Config{PublicURL: "http://sho.example"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpapi.NewServer(logger, h, httpapi.ServerConfig{})
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	fn := lambda.NewHandler(h.ServeFastHTTP, lambda.Options{
		MaxBodyBytes: httpapi.MaxBodyBytes, MaxHeaderBytes: 8 << 10, ErrorHandler: httpapi.HandleServerError,
	})
	host := "sho.example"
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	type answer struct {
		status  int
		headers map[string]string
		body    string
	}
	viaServe := func(method, path, body string) answer {
		req, _ := http.NewRequest(method, "http://"+ln.Addr().String()+path, strings.NewReader(body))
		req.Host = host
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		a := answer{status: resp.StatusCode, headers: map[string]string{}, body: string(b)}
		for _, k := range []string{"Content-Type", "Location", "Allow", "Cache-Control", "Retry-After"} {
			if v := resp.Header.Get(k); v != "" {
				a.headers[k] = v
			}
		}
		return a
	}
	viaLambda := func(method, path, body string, v1 bool) answer {
		var r reply
		if v1 {
			ev := events.APIGatewayProxyRequest{HTTPMethod: method, Path: path, Headers: map[string]string{"Host": host}, Body: body}
			r, _ = invoke(t, fn, ev)
			a := answer{status: r.StatusCode, headers: map[string]string{}, body: r.Body}
			for k, v := range r.MultiValueHeaders {
				a.headers[k] = strings.Join(v, ", ")
			}
			return keep(a.status, a.headers, a.body)
		}
		ev := events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: path, Headers: map[string]string{"host": host},
			Body: base64.StdEncoding.EncodeToString([]byte(body)), IsBase64Encoded: true}
		ev.RequestContext.HTTP.Method = method
		r, _ = invoke(t, fn, ev)
		return keep(r.StatusCode, r.Headers, r.Body)
	}

	// A link created through the function resolves through the server, and
	// the other way round.
	created := viaLambda("POST", "/api/v1/links", `{"url":"https://example.com/from-lambda","slug":"from-lambda"}`, false)
	if created.status != 201 {
		t.Fatalf("create through the function: %+v", created)
	}
	if a := viaServe("POST", "/api/v1/links", `{"url":"https://example.com/from-serve","slug":"from-serve"}`); a.status != 201 {
		t.Fatalf("create through serve: %+v", a)
	}

	requests := []struct{ method, path, body string }{
		{"GET", "/from-lambda", ""},
		{"HEAD", "/from-serve", ""},
		{"GET", "/getFullURL/from-serve", ""},
		{"GET", "/getFullURL/nope", ""},
		{"GET", "/api/v1/links/from-lambda", ""},
		{"POST", "/api/v1/links", `{"url":"https://example.com/x","slug":"from-lambda"}`},
		{"POST", "/shortenURL", `{"originalURL":`},
		{"POST", "/shortenURL", `{"originalURL":"ftp://example.com/"}`},
		{"POST", "/shortenURL", strings.Repeat("x", httpapi.MaxBodyBytes+1)},
		{"DELETE", "/shortenURL", ""},
		{"GET", "/api/v1/links", ""},
		{"GET", "/healthz", ""},
		{"GET", "/nope/deeper", ""},
	}
	for _, r := range requests {
		want := viaServe(r.method, r.path, r.body)
		for _, v1 := range []bool{false, true} {
			got := viaLambda(r.method, r.path, r.body, v1)
			if r.method == "HEAD" {
				want.body = ""
			}
			if got.status != want.status || got.body != want.body || !sameHeaders(got.headers, want.headers) {
				t.Errorf("%s %s (payload 1.0: %v):\n function %+v\n serve    %+v", r.method, r.path, v1, got, want)
			}
		}
	}
}

// keep reduces a proxy response to what the parity test compares.
func keep(status int, headers map[string]string, body string) (a struct {
	status  int
	headers map[string]string
	body    string
}) {
	a.status, a.body, a.headers = status, body, map[string]string{}
	for _, k := range []string{"Content-Type", "Location", "Allow", "Cache-Control", "Retry-After"} {
		if v := headers[k]; v != "" {
			a.headers[k] = v
		}
	}
	return a
}

func sameHeaders(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
