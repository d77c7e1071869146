package opentelemetry_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/opentelemetry"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
)

// span is one exported span, decoded from OTLP with its resource.
type span struct {
	traceID, spanID, parentID string
	name                      string
	kind                      tracepb.Span_SpanKind
	attrs, resource           map[string]string
	status                    tracepb.Status_StatusCode
}

func flatten(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = fmt.Sprint(x.IntValue)
		default:
			m[kv.GetKey()] = v.String()
		}
	}
	return m
}

// spans decodes an export request into spans, sent on ch.
func decode(req *coltracepb.ExportTraceServiceRequest, ch chan<- span) {
	for _, rs := range req.GetResourceSpans() {
		res := flatten(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				ch <- span{traceID: hex.EncodeToString(s.GetTraceId()), spanID: hex.EncodeToString(s.GetSpanId()),
					parentID: hex.EncodeToString(s.GetParentSpanId()), name: s.GetName(), kind: s.GetKind(),
					attrs: flatten(s.GetAttributes()), resource: res, status: s.GetStatus().GetCode()}
			}
		}
	}
}

// otlpHTTP is an OTLP/HTTP receiver: POST /v1/traces, protobuf bodies.
func otlpHTTP(t *testing.T, ch chan<- span) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP receiver: %s %s %s", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
			http.Error(w, "no", http.StatusBadRequest)
			return
		}
		b, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &req)
		}
		if err != nil {
			t.Errorf("OTLP receiver: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		decode(&req, ch)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// otlpGRPC is an OTLP/gRPC receiver (the collector's TraceService).
type otlpGRPC struct {
	coltracepb.UnimplementedTraceServiceServer
	ch chan<- span
}

func (g otlpGRPC) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	decode(req, g.ch)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func startGRPC(t *testing.T, ch chan<- span) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(s, otlpGRPC{ch: ch})
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return "grpc://" + ln.Addr().String()
}

var traceparentRE = regexp.MustCompile(`(?m)^Traceparent: 00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])$`)

// gw runs the engine with the plugin exporting to collector: routes 1-5
// with the samplers under test, and route 9 always sampled, whose span
// marks the end of a case's spans (the batch processor exports in order).
func gw(t *testing.T, opts opentelemetry.Options) (*plugintest.Gateway, *opentelemetry.Factory) {
	opts.BatchTimeout = 5 * time.Millisecond
	f := opentelemetry.New(opts)
	t.Cleanup(func() { _ = f.Shutdown(context.Background()) })
	g := plugintest.Start(t, gateway.NewRegistry(f), func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusBadGateway)
		}
		plugintest.Echo(w, r)
	})
	route := func(uri, sampler string) string {
		return fmt.Sprintf(`{"uris":[%q,"/fail"],"name":"r-%s","upstream":{"type":"roundrobin","nodes":{"$UPSTREAM":1}},
			"plugins":{"opentelemetry":{"sampler":%s,"additional_attributes":["arg_q"],"additional_header_prefix_attributes":["x-my-*","x-one"]}}}`, uri, uri[1:], sampler)
	}
	g.Load(t, map[string]string{
		"routes/1": route("/on", `{"name":"always_on"}`),
		"routes/2": route("/off", `{"name":"always_off"}`),
		"routes/3": route("/parent", `{"name":"parent_base","options":{"root":{"name":"always_off"}}}`),
		"routes/4": route("/ratio1", `{"name":"trace_id_ratio","options":{"fraction":1}}`),
		"routes/5": route("/ratio0", `{"name":"trace_id_ratio","options":{"fraction":0}}`),
		"routes/6": route("/default", `{}`),
		"routes/9": `{"uri":"/mark","upstream":{"type":"roundrobin","nodes":{"$UPSTREAM":1}},"plugins":{"opentelemetry":{"sampler":{"name":"always_on"}}}}`,
	})
	return g, f
}

// caseSpans sends the marker request and returns the spans exported
// before the marker's.
func caseSpans(t *testing.T, g *plugintest.Gateway, ch <-chan span) []span {
	t.Helper()
	g.Do(t, "GET", "/mark", "")
	var out []span
	deadline := time.After(10 * time.Second)
	for {
		select {
		case s := <-ch:
			if s.attrs["http.route"] == "/mark" {
				return out
			}
			out = append(out, s)
		case <-deadline:
			t.Fatalf("no marker span exported in 10s (got %d spans)", len(out))
		}
	}
}

const (
	clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan  = "00f067aa0ba902b7"
)

// The plugin's spans as an OTLP collector receives them, over HTTP and
// gRPC: ids, parents, attributes, resource and sampling as APISIX's, and
// the W3C traceparent sent upstream naming the gateway's span.
func TestSpans(t *testing.T) {
	tests := []struct {
		name, path, traceparent string
		hdr                     []string
		sampled                 bool   // a span is exported
		upstreamFlags           string // traceparent flags the upstream gets
		status                  tracepb.Status_StatusCode
	}{
		{name: "always_on, child of the client's span", path: "/on?q=v", traceparent: "00-" + clientTrace + "-" + clientSpan + "-01", sampled: true, upstreamFlags: "01"},
		{name: "always_on, a new trace", path: "/on", sampled: true, upstreamFlags: "01", hdr: []string{"X-My-A", "a", "X-My-B", "b", "X-One", "1", "X-Other", "no"}},
		{name: "always_on ignores an unsampled parent", path: "/on", traceparent: "00-" + clientTrace + "-" + clientSpan + "-00", sampled: true, upstreamFlags: "01"},
		{name: "always_off still propagates", path: "/off", traceparent: "00-" + clientTrace + "-" + clientSpan + "-01", upstreamFlags: "00"},
		{name: "default sampler is always_off", path: "/default", upstreamFlags: "00"},
		{name: "parent_base, sampled parent", path: "/parent", traceparent: "00-" + clientTrace + "-" + clientSpan + "-01", sampled: true, upstreamFlags: "01"},
		{name: "parent_base, unsampled parent", path: "/parent", traceparent: "00-" + clientTrace + "-" + clientSpan + "-00", upstreamFlags: "00"},
		{name: "parent_base, no parent: root always_off", path: "/parent", upstreamFlags: "00"},
		{name: "trace_id_ratio 1", path: "/ratio1", sampled: true, upstreamFlags: "01"},
		{name: "trace_id_ratio 0", path: "/ratio0", upstreamFlags: "00"},
		{name: "5xx is an error", path: "/fail", sampled: true, upstreamFlags: "01", status: tracepb.Status_STATUS_CODE_ERROR},
	}
	for _, proto := range []string{"http", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			ch := make(chan span, 64)
			collector := ""
			if proto == "http" {
				collector = otlpHTTP(t, ch)
			} else {
				collector = startGRPC(t, ch)
			}
			g, _ := gw(t, opentelemetry.Options{Collector: collector, Resource: map[string]string{"deployment.environment": "test"}})
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					hdr := tt.hdr
					if tt.traceparent != "" {
						hdr = append(hdr, "traceparent", tt.traceparent)
					}
					resp := g.Do(t, "GET", tt.path, "", hdr...)
					m := traceparentRE.FindStringSubmatch(resp.Body)
					if m == nil {
						t.Fatalf("the upstream got no traceparent:\n%s", resp.Body)
					}
					upTrace, upParent, upFlags := m[1], m[2], m[3]
					if upFlags != tt.upstreamFlags {
						t.Errorf("upstream traceparent flags %s, want %s", upFlags, tt.upstreamFlags)
					}
					if tt.traceparent != "" && upTrace != clientTrace {
						t.Errorf("upstream trace id %s, want the client's %s", upTrace, clientTrace)
					}
					spans := caseSpans(t, g, ch)
					if !tt.sampled {
						if len(spans) != 0 {
							t.Fatalf("exported %d spans, want none: %+v", len(spans), spans)
						}
						return
					}
					if len(spans) != 1 {
						t.Fatalf("exported %d spans, want 1: %+v", len(spans), spans)
					}
					s := spans[0]
					if s.traceID != upTrace || s.spanID != upParent {
						t.Errorf("span %s/%s, but the upstream's parent is %s/%s", s.traceID, s.spanID, upTrace, upParent)
					}
					wantParent := ""
					if tt.traceparent != "" {
						wantParent = clientSpan
					}
					if s.parentID != wantParent {
						t.Errorf("parent span %q, want %q", s.parentID, wantParent)
					}
					if s.kind != tracepb.Span_SPAN_KIND_SERVER {
						t.Errorf("kind %v, want server", s.kind)
					}
					route := strings.Split(tt.path, "?")[0]
					if route == "/fail" {
						route = "/on" // the matched route's uris; its name is the route's first uri
					}
					status := "200"
					if tt.status == tracepb.Status_STATUS_CODE_ERROR {
						status = "502"
					}
					want := map[string]string{"http.method": "GET", "http.request.method": "GET", "url.path": strings.Split(tt.path, "?")[0],
						"http.target": tt.path, "url.scheme": "http", "http.scheme": "http", "net.host.name": "127.0.0.1",
						"apisix.route_id": "1", "apisix.route_name": "r-on", "http.status_code": status, "http.response.status_code": status,
						"apisix.response_source": "upstream"}
					if tt.path == "/on?q=v" {
						want["arg_q"] = "v"
					}
					if len(tt.hdr) > 0 {
						want["x-my-a"], want["x-my-b"], want["x-one"] = "a", "b", "1"
					}
					for k, v := range want {
						if strings.HasPrefix(k, "apisix.route") && !strings.HasPrefix(tt.path, "/on") && route != "/on" {
							continue
						}
						if got := s.attrs[k]; got != v {
							t.Errorf("attribute %s = %q, want %q (all: %v)", k, got, v, s.attrs)
						}
					}
					if _, ok := s.attrs["x-other"]; ok {
						t.Errorf("x-other matched no prefix but is an attribute: %v", s.attrs)
					}
					if s.status != tt.status {
						t.Errorf("status %v, want %v", s.status, tt.status)
					}
					if s.resource["service.name"] != "APISIX" || s.resource["deployment.environment"] != "test" || s.resource["hostname"] == "" {
						t.Errorf("resource %v", s.resource)
					}
				})
			}
		})
	}
}

// trace_id_source x-request-id: a request's X-Request-Id of 32 hex digits
// is its trace id; anything else gets a random one.
func TestTraceIDFromRequestID(t *testing.T) {
	ch := make(chan span, 64)
	g, _ := gw(t, opentelemetry.Options{Collector: otlpHTTP(t, ch), TraceIDSource: "x-request-id"})
	for _, tt := range []struct{ id, want string }{
		{"0AF7651916CD43DD8448EB211C80319C", "0af7651916cd43dd8448eb211c80319c"},
		{"not-a-trace-id", ""},
		{"00000000000000000000000000000000", ""},
	} {
		// Unsampled, the id still names the trace sent upstream.
		resp := g.Do(t, "GET", "/off", "", "X-Request-Id", tt.id)
		if m := traceparentRE.FindStringSubmatch(resp.Body); m == nil || tt.want != "" && m[1] != tt.want || tt.want == "" && m[1] == strings.ToLower(tt.id) {
			t.Errorf("X-Request-Id %s, unsampled: upstream got %q", tt.id, m)
		}
		g.Do(t, "GET", "/on", "", "X-Request-Id", tt.id)
		spans := caseSpans(t, g, ch)
		if len(spans) != 1 {
			t.Fatalf("%s: %d spans", tt.id, len(spans))
		}
		if got := spans[0].traceID; tt.want != "" && got != tt.want || tt.want == "" && (got == strings.ToLower(tt.id) || got == strings.Repeat("0", 32)) {
			t.Errorf("X-Request-Id %s: trace id %s, want %q", tt.id, got, tt.want)
		}
	}
}

func TestCollectorAddress(t *testing.T) {
	for _, addr := range []string{"ftp://x:1", "http://"} {
		f := opentelemetry.New(opentelemetry.Options{Collector: addr})
		if _, err := f.New([]byte(`{}`), gateway.Scope{}); err == nil {
			t.Errorf("collector %q accepted", addr)
		}
	}
}

// The plugin metadata (APISIX 3.x's) decides the collector, resource and
// trace id source, over the flags; a metadata change takes effect with the
// configuration that carries it, and what it leaves out is the flags'.
func TestMetadata(t *testing.T) {
	flagsCh, mdCh := make(chan span, 64), make(chan span, 64)
	g, _ := gw(t, opentelemetry.Options{Collector: otlpHTTP(t, flagsCh), Resource: map[string]string{"deployment.environment": "flags"}})
	for _, tc := range []struct {
		name, md    string
		ch, quiet   chan span
		requestID   string
		wantTraceID string
		wantRes     map[string]string
	}{
		{name: "no metadata: the flags", ch: flagsCh, quiet: mdCh, wantRes: map[string]string{"deployment.environment": "flags"}},
		{name: "the metadata's collector, resource and trace id source",
			md: `{"collector":{"address":"` + startGRPC(t, mdCh) + `","request_timeout":5},"resource":{"deployment.environment":"md","answer":42,"on":true},"trace_id_source":"x-request-id"}`,
			ch: mdCh, quiet: flagsCh, requestID: "0af7651916cd43dd8448eb211c80319c", wantTraceID: "0af7651916cd43dd8448eb211c80319c",
			wantRes: map[string]string{"deployment.environment": "md", "answer": "42", "on": "bool_value:true"}},
		{name: "a metadata without a collector: the flags' collector", md: `{"resource":{"deployment.environment":"md2"}}`,
			ch: flagsCh, quiet: mdCh, requestID: "0af7651916cd43dd8448eb211c80319c", wantRes: map[string]string{"deployment.environment": "md2"}},
	} {
		if tc.md != "" {
			g.Load(t, map[string]string{"plugin_metadata/opentelemetry": tc.md})
		}
		g.Do(t, "GET", "/on", "", "X-Request-Id", tc.requestID)
		spans := caseSpans(t, g, tc.ch)
		if len(spans) != 1 {
			t.Fatalf("%s: %d spans", tc.name, len(spans))
		}
		s := spans[0]
		if tc.wantTraceID != "" && s.traceID != tc.wantTraceID || tc.wantTraceID == "" && s.traceID == tc.requestID {
			t.Errorf("%s: trace id %s, want %q", tc.name, s.traceID, tc.wantTraceID)
		}
		for k, v := range tc.wantRes {
			if s.resource[k] != v {
				t.Errorf("%s: resource %s = %q, want %q (%v)", tc.name, k, s.resource[k], v, s.resource)
			}
		}
		if s.resource["service.name"] != "APISIX" {
			t.Errorf("%s: service.name %q", tc.name, s.resource["service.name"])
		}
		select {
		case s := <-tc.quiet:
			t.Errorf("%s: a span went to the other collector: %+v", tc.name, s)
		default:
		}
	}
}

// APISIX 3.x's metadata_schema (opentelemetry.t: "metadata_schema rejects
// non-scalar resource and collector.request_headers values").
func TestMetadataSchema(t *testing.T) {
	reg := gateway.NewRegistry(opentelemetry.New(opentelemetry.Options{}))
	for md, ok := range map[string]bool{
		`{}`: true,
		`{"trace_id_source":"x-request-id","resource":{"a":"b","n":1,"t":true},"collector":{"address":"127.0.0.1:4318","request_timeout":3,"request_headers":{"foo":"bar","n":1}},"batch_span_processor":{"max_queue_size":10,"batch_timeout":0.5},"set_ngx_var":true}`: true,
		`{"trace_id_source":"header"}`:                       false,
		`{"resource":{"a":{"nested":1}}}`:                    false,
		`{"resource":{"a":["x"]}}`:                           false,
		`{"collector":{"request_headers":{"foo":{"a":1}}}}`:  false,
		`{"collector":{"request_timeout":"3"}}`:              false,
		`{"batch_span_processor":{"max_queue_size":"many"}}`: false,
	} {
		v, err := gateway.DecodeJSON([]byte(md))
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.CheckMetadata(opentelemetry.Name, v.(map[string]any)); (err == nil) != ok {
			t.Errorf("%s: %v, want ok=%v", md, err, ok)
		}
	}
}
