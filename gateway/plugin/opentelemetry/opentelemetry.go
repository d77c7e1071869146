// Package opentelemetry is APISIX 3.x's opentelemetry plugin on the
// official Go SDK (go.opentelemetry.io/otel): a server span per request,
// its parent taken from the client's W3C traceparent and its own context
// sent upstream in traceparent, sampled as the route says (always_on,
// always_off, trace_id_ratio, parent_base), exported in batches over
// OTLP/HTTP or OTLP/gRPC to one collector.
//
// APISIX 3.x reads the collector, resource and batch settings from the
// plugin's metadata; linkgate takes them from the gateway's flags
// (Options), as APISIX 2.x's plugin_attr did. A route without the plugin
// pays nothing: the exporter starts with the first instance.
package opentelemetry

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/linkgate/linkgate/gateway"
)

// Name and Priority as APISIX.
const (
	Name     = "opentelemetry"
	Priority = 12009
)

// Options are the plugin's process-wide settings (APISIX 3.x's plugin
// metadata).
type Options struct {
	// Collector is where spans go: "host:port" (OTLP/HTTP, as APISIX's
	// collector.address), an http:// or https:// URL (OTLP/HTTP, the
	// path defaults to /v1/traces), or grpc://host:port (OTLP/gRPC,
	// cleartext).
	Collector string
	// Timeout bounds one export (APISIX's request_timeout, 3 s).
	Timeout time.Duration
	// Headers are sent with every export (request_headers).
	Headers map[string]string
	// Resource attributes; service.name defaults to APISIX's "APISIX",
	// hostname is the machine's.
	Resource map[string]string
	// TraceIDSource is "random" (default) or "x-request-id": a request's
	// X-Request-Id of 32 hex digits becomes its trace id.
	TraceIDSource string
	// BatchTimeout and MaxQueueSize tune the batch span processor
	// (batch_timeout, max_queue_size); a full queue drops spans, it never
	// blocks a request.
	BatchTimeout time.Duration
	MaxQueueSize int
	Logger       *slog.Logger
}

// Factory makes opentelemetry instances; they share one exporter and
// batch span processor, started by the first instance.
type Factory struct {
	opts Options

	mu      sync.Mutex
	started bool
	bsp     sdktrace.SpanProcessor
	res     *resource.Resource
	err     error

	spans sync.Map // handle → trace.Span, from rewrite to log
	next  atomic.Int64
}

var _ gateway.Factory = (*Factory)(nil)

// New returns the plugin factory.
func New(opts Options) *Factory {
	if opts.Collector == "" {
		opts.Collector = "127.0.0.1:4318"
	}
	if opts.Timeout == 0 {
		opts.Timeout = 3 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Factory{opts: opts}
}

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

var samplerName = []any{"always_on", "always_off", "trace_id_ratio", "parent_base"}

var schema = &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
	"sampler": {Type: "object", Default: map[string]any{"name": "always_off", "options": map[string]any{"fraction": 0, "root": map[string]any{"name": "always_off"}}},
		Properties: map[string]*gateway.Schema{
			"name": {Type: "string", Enum: samplerName, Default: "always_off", Description: "sampling strategy"},
			"options": {Type: "object", Default: map[string]any{"fraction": 0, "root": map[string]any{"name": "always_off"}}, Properties: map[string]*gateway.Schema{
				"fraction": {Type: "number", Default: 0, Description: "trace_id_ratio fraction"},
				"root": {Type: "object", Description: "parent_base root sampler", Default: map[string]any{"name": "always_off", "options": map[string]any{"fraction": 0}},
					Properties: map[string]*gateway.Schema{
						"name": {Type: "string", Enum: samplerName[:3], Default: "always_off", Description: "sampling strategy"},
						"options": {Type: "object", Default: map[string]any{"fraction": 0}, Properties: map[string]*gateway.Schema{
							"fraction": {Type: "number", Default: 0, Description: "trace_id_ratio fraction parameter"},
						}},
					}},
			}},
		}},
	"additional_attributes":               {Type: "array", Items: &gateway.Schema{Type: "string", MinLength: 1}},
	"additional_header_prefix_attributes": {Type: "array", Items: &gateway.Schema{Type: "string", MinLength: 1}},
}}

// Schema is APISIX 3.x's.
func (*Factory) Schema() *gateway.Schema { return schema }

type samplerConf struct {
	Name    string `json:"name"`
	Options struct {
		Fraction float64 `json:"fraction"`
		Root     *struct {
			Name    string `json:"name"`
			Options struct {
				Fraction float64 `json:"fraction"`
			} `json:"options"`
		} `json:"root"`
	} `json:"options"`
}

func sampler(name string, fraction float64) sdktrace.Sampler {
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample()
	case "trace_id_ratio":
		return sdktrace.TraceIDRatioBased(fraction)
	}
	return sdktrace.NeverSample()
}

func neverSamples(name string, fraction float64) bool {
	return name == "always_off" || name == "" || name == "trace_id_ratio" && fraction <= 0
}

type instance struct {
	f      *Factory
	tracer trace.Tracer
	// never: the sampler drops every root span (always_off, a ratio of
	// 0, parent_base over those); with parentBased a sampled parent is
	// still followed. Such requests take the fast path: the traceparent
	// sent upstream is written without the SDK, allocating nothing.
	never, parentBased bool
	vars               []string // additional_attributes
	prefixes           []string // additional_header_prefix_attributes
}

// New builds an instance: a tracer with the route's sampler on the shared
// span processor.
func (f *Factory) New(raw json.RawMessage, _ gateway.Scope) (any, error) {
	var c struct {
		Sampler  samplerConf `json:"sampler"`
		Attrs    []string    `json:"additional_attributes"`
		Prefixes []string    `json:"additional_header_prefix_attributes"`
	}
	c.Sampler.Name = "always_off"
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	if err := f.start(); err != nil {
		return nil, err
	}
	s := sampler(c.Sampler.Name, c.Sampler.Options.Fraction)
	never := neverSamples(c.Sampler.Name, c.Sampler.Options.Fraction)
	if c.Sampler.Name == "parent_base" {
		root, rootNever := sdktrace.NeverSample(), true
		if r := c.Sampler.Options.Root; r != nil {
			root, rootNever = sampler(r.Name, r.Options.Fraction), neverSamples(r.Name, r.Options.Fraction)
		}
		s, never = sdktrace.ParentBased(root), rootNever
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithSampler(s), sdktrace.WithSpanProcessor(f.bsp), sdktrace.WithResource(f.res)}
	if f.opts.TraceIDSource == "x-request-id" {
		opts = append(opts, sdktrace.WithIDGenerator(requestIDs{}))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	in := &instance{f: f, tracer: tp.Tracer("linkgate/gateway"), vars: c.Attrs, never: never, parentBased: c.Sampler.Name == "parent_base"}
	for _, p := range c.Prefixes {
		in.prefixes = append(in.prefixes, strings.ToLower(p))
	}
	return in, nil
}

// start creates the exporter and the batch span processor once.
func (f *Factory) start() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started {
		return f.err
	}
	f.started = true
	exp, err := f.exporter()
	if err != nil {
		f.err = fmt.Errorf("opentelemetry collector %q: %w", f.opts.Collector, err)
		return f.err
	}
	var bo []sdktrace.BatchSpanProcessorOption
	if f.opts.BatchTimeout > 0 {
		bo = append(bo, sdktrace.WithBatchTimeout(f.opts.BatchTimeout))
	}
	if f.opts.MaxQueueSize > 0 {
		bo = append(bo, sdktrace.WithMaxQueueSize(f.opts.MaxQueueSize))
	}
	f.bsp = sdktrace.NewBatchSpanProcessor(exp, bo...)
	attrs := []attribute.KeyValue{attribute.String("service.name", "APISIX")}
	if h, err := os.Hostname(); err == nil {
		attrs = append(attrs, attribute.String("hostname", h))
	}
	for k, v := range f.opts.Resource {
		attrs = append(attrs, attribute.String(k, v))
	}
	f.res = resource.NewSchemaless(attrs...) // later keys win: the operator's service.name
	return nil
}

func (f *Factory) exporter() (*otlptrace.Exporter, error) {
	ctx := context.Background()
	addr := f.opts.Collector
	if rest, ok := strings.CutPrefix(addr, "grpc://"); ok {
		return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(rest), otlptracegrpc.WithInsecure(),
			otlptracegrpc.WithTimeout(f.opts.Timeout), otlptracegrpc.WithHeaders(f.opts.Headers))
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithTimeout(f.opts.Timeout), otlptracehttp.WithHeaders(f.opts.Headers)}
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errors.New("want host:port, an http(s):// URL or grpc://host:port")
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces"
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
	} else {
		opts = append(opts, otlptracehttp.WithEndpoint(addr), otlptracehttp.WithInsecure())
	}
	return otlptracehttp.New(ctx, opts...)
}

// Shutdown exports the spans still queued; call it when the gateway stops.
func (f *Factory) Shutdown(ctx context.Context) error {
	f.mu.Lock()
	bsp := f.bsp
	f.mu.Unlock()
	if bsp == nil {
		return nil
	}
	return bsp.Shutdown(ctx)
}

// carrier reads the request's headers and writes the upstream request's.
type carrier struct{ c gateway.Ctx }

func (h carrier) Get(key string) string {
	return h.c.Var("http_" + key) // traceparent, tracestate: no '-' to map
}
func (h carrier) Set(key, value string) { h.c.SetUpstreamHeader(key, value) }
func (carrier) Keys() []string          { return nil }

var propagator = propagation.TraceContext{}

type requestIDKey struct{}

// Rewrite starts the request's server span, a child of the client's
// traceparent, and sends its context upstream.
func (in *instance) Rewrite(c gateway.Ctx) gateway.Reply {
	if in.never {
		parent, ok := parseTraceparent(c.Var("http_traceparent"))
		if !(ok && in.parentBased && parent.flags&1 == 1) {
			in.unsampled(c, parent, ok)
			return gateway.Reply{}
		}
	}
	ctx := propagator.Extract(context.Background(), carrier{c})
	if in.f.opts.TraceIDSource == "x-request-id" {
		ctx = context.WithValue(ctx, requestIDKey{}, c.Var("http_x_request_id"))
	}
	method := c.Var("request_method")
	ctx, span := in.tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer))
	propagator.Inject(ctx, carrier{c})
	if !span.IsRecording() {
		return gateway.Reply{} // not sampled: nothing kept past this phase
	}
	// Request values are views of buffers reused by later requests: the
	// span outlives this one, so each is copied.
	ua := strings.Clone(c.Var("http_user_agent"))
	scheme := strings.Clone(c.Var("scheme"))
	method = strings.Clone(method)
	span.SetAttributes(
		attribute.String("net.host.name", strings.Clone(c.Var("host"))),
		attribute.String("http.method", method),
		attribute.String("http.scheme", scheme),
		attribute.String("http.target", strings.Clone(c.Var("request_uri"))),
		attribute.String("http.user_agent", ua),
		attribute.String("http.request.method", method),
		attribute.String("url.scheme", scheme),
		attribute.String("url.path", strings.Clone(c.Var("uri"))),
		attribute.String("user_agent.original", ua),
	)
	if id := c.Var("route_id"); id != "" {
		span.SetAttributes(attribute.String("apisix.route_id", strings.Clone(id)), attribute.String("apisix.route_name", strings.Clone(c.Var("route_name"))))
	}
	if id := c.Var("service_id"); id != "" {
		span.SetAttributes(attribute.String("apisix.service_id", strings.Clone(id)))
	}
	for _, v := range in.vars {
		if val := c.Var(v); val != "" {
			span.SetAttributes(attribute.String(v, strings.Clone(val)))
		}
	}
	for _, p := range in.prefixes {
		in.headerAttrs(c, span, p)
	}
	h := in.f.next.Add(1)
	in.f.spans.Store(h, span)
	c.SetValue(in, h)
	return gateway.Reply{}
}

// unsampled sends upstream the traceparent of a span that is not
// recorded, as the SDK's non-recording span would: the parent's trace id
// (or a new one, X-Request-Id's with that source), a new span id, the
// sampled flag clear. The client's tracestate goes upstream as it came.
func (in *instance) unsampled(c gateway.Ctx, parent traceparent, hasParent bool) {
	tid := parent.traceID
	if !hasParent {
		var id string
		if in.f.opts.TraceIDSource == "x-request-id" {
			id = c.Var("http_x_request_id")
		}
		tid = traceIDOr(id)
	}
	b := c.Buffer(traceparentLen)[:0]
	b = appendTraceparent(b, tid, randomSpanID(), parent.flags&^1)
	c.SetUpstreamHeader("traceparent", unsafe.String(unsafe.SliceData(b), len(b)))
}

// headerAttrs adds the request headers named by p, or starting with it
// when it ends in '*' (additional_header_prefix_attributes).
func (in *instance) headerAttrs(c gateway.Ctx, span trace.Span, p string) {
	prefix, wild := strings.CutSuffix(p, "*")
	if !wild || prefix == "" {
		if val := c.Var("http_" + strings.ReplaceAll(p, "-", "_")); val != "" {
			span.SetAttributes(attribute.String(p, strings.Clone(val)))
		}
		return
	}
	c.RequestHeaders(func(name, value string) {
		if strings.HasPrefix(name, prefix) {
			span.SetAttributes(attribute.String(strings.Clone(name), strings.Clone(value)))
		}
	})
}

// Log ends the span with the response's status (an error from 500 on).
func (in *instance) Log(c gateway.Ctx, e *gateway.LogEntry) {
	h, ok := c.Value(in)
	if !ok {
		return
	}
	v, ok := in.f.spans.LoadAndDelete(h)
	if !ok {
		return
	}
	span := v.(trace.Span)
	source := "apisix"
	if e.Node != "" {
		source = "upstream"
	}
	if e.MatchedURI != "" {
		span.SetName(strings.Clone(c.Var("request_method")) + " " + e.MatchedURI)
		span.SetAttributes(attribute.String("http.route", e.MatchedURI))
	}
	if e.ServiceName != "" {
		span.SetAttributes(attribute.String("apisix.service_name", e.ServiceName))
	}
	span.SetAttributes(attribute.String("apisix.response_source", source),
		attribute.Int("http.status_code", e.Status), attribute.Int("http.response.status_code", e.Status))
	if e.Status >= 500 {
		span.SetStatus(codes.Error, source+" error: "+strconv.Itoa(e.Status))
	}
	span.End()
}

// requestIDs makes a request's X-Request-Id its trace id when it is 32
// hex digits, not all zero (APISIX's trace_id_source x-request-id).
type requestIDs struct{}

func (requestIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	s, _ := ctx.Value(requestIDKey{}).(string)
	return traceIDOr(s), randomSpanID()
}

// traceIDOr is s as a trace id when it is 32 hex digits, not all zero,
// else a random one.
func traceIDOr(s string) trace.TraceID {
	var tid trace.TraceID
	s = strings.ToLower(s) // as APISIX; no copy when it is lowercase
	if len(s) == 32 && cutHex(tid[:], &s) && tid.IsValid() {
		return tid
	}
	tid = trace.TraceID{}
	for !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid
}

func (requestIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return randomSpanID() }

func randomSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}
