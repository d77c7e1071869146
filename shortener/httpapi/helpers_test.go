package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/httpapi"
	"github.com/linkgate/linkgate/shortener/pebble/pebbletest"
	"github.com/linkgate/linkgate/shortener/visits"
)

// testServer is the API on a real fasthttp server on 127.0.0.1:0 over a
// pebble store in a temporary directory.
type testServer struct {
	URL     string
	Store   shortener.Store
	Handler *httpapi.Handler
	client  *http.Client
}

type setup struct {
	cfg      httpapi.Config
	policy   shortener.URLPolicy
	wrap     func(shortener.Store) shortener.Store // decorates the store (fault injection)
	visits   bool                                  // count visits (visits_test.go)
	noKeys   bool                                  // no store of API keys (only cfg.AdminKey)
	transfer bool                                  // export, import and backup over the store (transfer_test.go)
	agg      func(*visits.Aggregator)              // given the aggregator, with visits
	registry bool                                  // the store keeps the domain registry (cfg.Registry)
	store    shortener.Store                       // a store to share (another instance's); nil: a new one
}

func newHandler(t testing.TB, s setup) (*httpapi.Handler, shortener.Store) {
	t.Helper()
	return newHandlerLogger(t, s, slog.New(slog.DiscardHandler))
}

// newHandlerLogger is newHandler logging to logger.
func newHandlerLogger(t testing.TB, s setup, logger *slog.Logger) (*httpapi.Handler, shortener.Store) {
	t.Helper()
	var store shortener.Store = s.store
	if store == nil {
		b, _ := pebbletest.Open(t)
		store = b
	}
	b := store
	if s.wrap != nil {
		store = s.wrap(store)
	}
	if s.cfg.Keys == nil && !s.noKeys {
		s.cfg.Keys = b // as serve wires it: the link store keeps the keys
	}
	if s.registry {
		s.cfg.Registry = b
	}
	if s.transfer {
		s.cfg.Records = b
		s.cfg.Backup = func(_ context.Context, w io.Writer) error {
			return b.(interface{ WriteBackup(io.Writer) error }).WriteBackup(w)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	opts := shortener.Options{Policy: s.policy}
	if s.visits {
		agg := newAggregator(t, store)
		s.cfg.Visits, opts.Visits = agg, agg
		if s.agg != nil {
			s.agg(agg)
		}
	}
	h, err := httpapi.NewHandler(logger, shortener.NewService(store, opts),
		httpapi.NewMetrics(reg), reg, s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h, store
}

// serve serves h on a loopback port with cfg until the test ends and
// returns its address.
func serve(t *testing.T, h *httpapi.Handler, cfg httpapi.ServerConfig) string {
	t.Helper()
	return serveLogger(t, h, cfg, slog.New(slog.DiscardHandler))
}

// serveLogger is serve with the server logging to logger.
func serveLogger(t *testing.T, h *httpapi.Handler, cfg httpapi.ServerConfig, logger *slog.Logger) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpapi.NewServer(logger, h, cfg)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-done
	})
	return ln.Addr().String()
}

func start(t *testing.T, s setup) *testServer {
	t.Helper()
	h, store := newHandler(t, s)
	addr := serve(t, h, httpapi.ServerConfig{})
	return &testServer{
		URL: "http://" + addr, Store: store, Handler: h,
		client: &http.Client{
			Timeout:       10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

type response struct {
	Status int
	Header http.Header
	Body   string
}

// do sends a request; hdr is alternating header names and values.
func (s *testServer) do(t testing.TB, method, path, body string, hdr ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, string(b)}
}

// apiError decodes a JSON error body and checks its shape.
func apiError(t testing.TB, r response) (code, message string) {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("error Content-Type %q", ct)
	}
	var e struct {
		Error struct{ Code, Message string }
	}
	dec := json.NewDecoder(strings.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Errorf("not a JSON error body (%v): %q", err, r.Body)
	}
	return e.Error.Code, e.Error.Message
}

func wantError(t testing.TB, r response, status int, code string) {
	t.Helper()
	if r.Status != status {
		t.Errorf("status %d, want %d; body %q", r.Status, status, r.Body)
	}
	if got, _ := apiError(t, r); got != code {
		t.Errorf("error code %q, want %q; body %q", got, code, r.Body)
	}
}
