// Package opentelemetry is APISIX 3.x's opentelemetry plugin on the
// official Go SDK (go.opentelemetry.io/otel): a server span per request,
// its parent taken from the client's W3C traceparent and its own context
// sent upstream in traceparent, sampled as the route says (always_on,
// always_off, trace_id_ratio, parent_base), exported in batches over
// OTLP/HTTP or OTLP/gRPC to one collector.
//
// The collector, resource, trace id source and batch settings are the
// plugin metadata's, as APISIX 3.x's (/apisix/admin/plugin_metadata/
// opentelemetry); what the metadata leaves out, or all of it when none is
// stored, comes from the gateway's flags (Options), whose defaults are
// APISIX's. A route without the plugin pays nothing: an exporter starts
// with the first instance that needs it.
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
	"slices"
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
	// MaxExportBatchSize caps the spans of one export (max_export_batch_size).
	MaxExportBatchSize int
	Logger             *slog.Logger
}

// Factory makes opentelemetry instances. Instances built with the same
// metadata share one exporter and batch span processor (a pipeline),
// started by the first of them.
type Factory struct {
	opts Options

	mu sync.Mutex
	// pipes by metadata (its JSON; "" for none), the most recently used
	// last; at most keepPipelines, the oldest shut down (its queued spans
	// exported) when a newer metadata needs one.
	pipes map[string]*pipeline
	order []string

	spans sync.Map // handle → trace.Span, from rewrite to log
	next  atomic.Int64
}

// keepPipelines: the current metadata's pipeline and the one before it,
// which requests still running on the previous configuration may use.
const keepPipelines = 2

// pipeline is an exporter and its batch span processor, with the resource
// and trace id source of one metadata.
type pipeline struct {
	bsp        sdktrace.SpanProcessor
	res        *resource.Resource
	requestIDs bool // trace_id_source x-request-id
	err        error
}

var (
	_ gateway.Factory      = (*Factory)(nil)
	_ gateway.MetadataUser = (*Factory)(nil)
)

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
	return &Factory{opts: opts, pipes: map[string]*pipeline{}}
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

var scalar = &gateway.Schema{OneOf: []*gateway.Schema{{Type: "boolean"}, {Type: "number"}, {Type: "string"}}}

// metadataSchema is APISIX 3.x's metadata_schema without its defaults of
// trace_id_source and collector: what it leaves out is the flags'.
var metadataSchema = &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
	"trace_id_source": {Type: "string", Enum: []any{"x-request-id", "random"}, Description: "the source of trace id"},
	"resource":        {Type: "object", Values: scalar, Description: "additional resource"},
	"collector": {Type: "object", Description: "opentelemetry collector", Properties: map[string]*gateway.Schema{
		"address":         {Type: "string", Description: "host:port"},
		"request_timeout": {Type: "integer", Description: "second uint"},
		"request_headers": {Type: "object", Values: scalar, Description: "http headers"},
	}},
	"batch_span_processor": {Type: "object", Default: map[string]any{}, Description: "batch span processor", Properties: map[string]*gateway.Schema{
		"drop_on_queue_full":    {Type: "boolean"},
		"max_queue_size":        {Type: "integer"},
		"batch_timeout":         {Type: "number"},
		"inactive_timeout":      {Type: "number"},
		"max_export_batch_size": {Type: "integer"},
	}},
	"set_ngx_var": {Type: "boolean", Default: false, Description: "set nginx variables"},
}}

// MetadataSchema is APISIX 3.x's (see metadataSchema).
func (*Factory) MetadataSchema() *gateway.Schema { return metadataSchema }

// metadata is the plugin metadata as the pipeline reads it.
type metadata struct {
	TraceIDSource string         `json:"trace_id_source"`
	Resource      map[string]any `json:"resource"`
	Collector     struct {
		Address        string         `json:"address"`
		RequestTimeout int            `json:"request_timeout"`
		RequestHeaders map[string]any `json:"request_headers"`
	} `json:"collector"`
	Batch struct {
		MaxQueueSize       int     `json:"max_queue_size"`
		BatchTimeout       float64 `json:"batch_timeout"`
		MaxExportBatchSize int     `json:"max_export_batch_size"`
	} `json:"batch_span_processor"`
}

// settings are the flags overlaid with what md sets.
func (f *Factory) settings(md json.RawMessage) (Options, []attribute.KeyValue, error) {
	o := f.opts
	attrs := make([]attribute.KeyValue, 0, len(o.Resource))
	for _, k := range sortedKeys(o.Resource) {
		attrs = append(attrs, attribute.String(k, o.Resource[k]))
	}
	if md == nil {
		return o, attrs, nil
	}
	var m metadata
	if err := gateway.Unmarshal(md, &m); err != nil {
		return o, nil, err
	}
	if m.TraceIDSource != "" {
		o.TraceIDSource = m.TraceIDSource
	}
	if m.Collector.Address != "" {
		o.Collector = m.Collector.Address
	}
	if m.Collector.RequestTimeout > 0 {
		o.Timeout = time.Duration(m.Collector.RequestTimeout) * time.Second
	}
	if len(m.Collector.RequestHeaders) > 0 {
		o.Headers = map[string]string{}
		for k, v := range f.opts.Headers {
			o.Headers[k] = v
		}
		for k, v := range m.Collector.RequestHeaders {
			o.Headers[k] = fmt.Sprint(v)
		}
	}
	if m.Batch.MaxQueueSize > 0 {
		o.MaxQueueSize = m.Batch.MaxQueueSize
	}
	if m.Batch.BatchTimeout > 0 {
		o.BatchTimeout = time.Duration(m.Batch.BatchTimeout * float64(time.Second))
	}
	if m.Batch.MaxExportBatchSize > 0 {
		o.MaxExportBatchSize = m.Batch.MaxExportBatchSize
	}
	for _, k := range sortedKeys(m.Resource) {
		switch v := m.Resource[k].(type) {
		case bool:
			attrs = append(attrs, attribute.Bool(k, v))
		case float64:
			if v == float64(int64(v)) {
				attrs = append(attrs, attribute.Int64(k, int64(v)))
			} else {
				attrs = append(attrs, attribute.Float64(k, v))
			}
		default:
			attrs = append(attrs, attribute.String(k, fmt.Sprint(v)))
		}
	}
	return o, attrs, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

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
	f          *Factory
	requestIDs bool // trace_id_source x-request-id
	tracer     trace.Tracer
	// never: the sampler drops every root span (always_off, a ratio of
	// 0, parent_base over those); with parentBased a sampled parent is
	// still followed. Such requests take the fast path: the traceparent
	// sent upstream is written without the SDK, allocating nothing.
	never, parentBased bool
	vars               []string // additional_attributes
	prefixes           []string // additional_header_prefix_attributes
}

// New builds an instance with the flags' settings (no plugin metadata).
func (f *Factory) New(raw json.RawMessage, scope gateway.Scope) (any, error) {
	return f.NewWithMetadata(raw, nil, scope)
}

// NewWithMetadata builds an instance: a tracer with the route's sampler on
// the span processor of the metadata's pipeline.
func (f *Factory) NewWithMetadata(raw, md json.RawMessage, _ gateway.Scope) (any, error) {
	var c struct {
		Sampler  samplerConf `json:"sampler"`
		Attrs    []string    `json:"additional_attributes"`
		Prefixes []string    `json:"additional_header_prefix_attributes"`
	}
	c.Sampler.Name = "always_off"
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	p, err := f.pipeline(md)
	if err != nil {
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
	opts := []sdktrace.TracerProviderOption{sdktrace.WithSampler(s), sdktrace.WithSpanProcessor(p.bsp), sdktrace.WithResource(p.res)}
	if p.requestIDs {
		opts = append(opts, sdktrace.WithIDGenerator(requestIDs{}))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	in := &instance{f: f, requestIDs: p.requestIDs, tracer: tp.Tracer("linkgate/gateway"), vars: c.Attrs, never: never, parentBased: c.Sampler.Name == "parent_base"}
	for _, p := range c.Prefixes {
		in.prefixes = append(in.prefixes, strings.ToLower(p))
	}
	return in, nil
}

// pipeline returns md's pipeline, started on first use.
func (f *Factory) pipeline(md json.RawMessage) (*pipeline, error) {
	key := string(md)
	f.mu.Lock()
	defer f.mu.Unlock()
	if i := slices.Index(f.order, key); i >= 0 {
		f.order = append(slices.Delete(f.order, i, i+1), key)
		p := f.pipes[key]
		return p, p.err
	}
	p := f.start(md)
	f.pipes[key] = p
	f.order = append(f.order, key)
	if len(f.order) > keepPipelines {
		old := f.pipes[f.order[0]]
		delete(f.pipes, f.order[0])
		f.order = f.order[1:]
		if old.bsp != nil {
			go func() { // exports what it holds, bounded by the export timeout
				if err := old.bsp.Shutdown(context.Background()); err != nil {
					f.opts.Logger.Warn("opentelemetry: spans of a replaced plugin metadata not exported", "err", err)
				}
			}()
		}
	}
	return p, p.err
}

// start creates a pipeline's exporter and batch span processor.
func (f *Factory) start(md json.RawMessage) *pipeline {
	o, attrs, err := f.settings(md)
	if err != nil {
		return &pipeline{err: err}
	}
	exp, err := exporter(o)
	if err != nil {
		return &pipeline{err: fmt.Errorf("opentelemetry collector %q: %w", o.Collector, err)}
	}
	var bo []sdktrace.BatchSpanProcessorOption
	if o.BatchTimeout > 0 {
		bo = append(bo, sdktrace.WithBatchTimeout(o.BatchTimeout))
	}
	if o.MaxQueueSize > 0 {
		bo = append(bo, sdktrace.WithMaxQueueSize(o.MaxQueueSize))
	}
	if o.MaxExportBatchSize > 0 {
		bo = append(bo, sdktrace.WithMaxExportBatchSize(o.MaxExportBatchSize))
	}
	base := []attribute.KeyValue{attribute.String("service.name", "APISIX")}
	if h, err := os.Hostname(); err == nil {
		base = append(base, attribute.String("hostname", h))
	}
	return &pipeline{bsp: sdktrace.NewBatchSpanProcessor(exp, bo...), requestIDs: o.TraceIDSource == "x-request-id",
		res: resource.NewSchemaless(append(base, attrs...)...)} // later keys win: the operator's service.name
}

func exporter(o Options) (*otlptrace.Exporter, error) {
	ctx := context.Background()
	addr := o.Collector
	if rest, ok := strings.CutPrefix(addr, "grpc://"); ok {
		return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(rest), otlptracegrpc.WithInsecure(),
			otlptracegrpc.WithTimeout(o.Timeout), otlptracegrpc.WithHeaders(o.Headers))
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithTimeout(o.Timeout), otlptracehttp.WithHeaders(o.Headers)}
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
	pipes := f.pipes
	f.pipes, f.order = map[string]*pipeline{}, nil
	f.mu.Unlock()
	var errs []error
	for _, p := range pipes {
		if p.bsp != nil {
			errs = append(errs, p.bsp.Shutdown(ctx))
		}
	}
	return errors.Join(errs...)
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
	if in.requestIDs {
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
		if in.requestIDs {
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
