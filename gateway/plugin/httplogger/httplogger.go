// Package httplogger is APISIX's http-logger plugin: in the log phase,
// each request's log entry (APISIX's full log, or log_format's variables)
// goes to a batch processor (gateway/plugin/internal/batch) that POSTs
// batches to uri as a JSON array, or as JSON lines (concat_method
// new_line). A request never waits for the logger: entries past the
// pending bound are dropped.
package httplogger

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/internal/batch"
)

// Name and Priority as APISIX.
const (
	Name     = "http-logger"
	Priority = 410
)

// Options are what the factory is built with.
type Options struct {
	Logger   *slog.Logger
	Hostname string // server.hostname in the full log
	Version  string // server.version
	// Clock drives the batch processors (nil: the real one).
	Clock batch.Clock
	// MaxPending bounds the entries waiting to be sent, all routes
	// together (APISIX's plugin_metadata max_pending_entries; 0: 8192).
	MaxPending int
}

// Factory makes http-logger instances; it owns the batch processors.
type Factory struct {
	opts    Options
	batches *batch.Manager
	clients [2]*http.Client // [ssl_verify]
}

var (
	_ gateway.Factory      = (*Factory)(nil)
	_ gateway.ConfChecker  = (*Factory)(nil)
	_ gateway.MetadataUser = (*Factory)(nil)
	_ gateway.Logger       = (*instance)(nil)
)

// New returns the plugin factory.
func New(opts Options) *Factory {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	f := &Factory{opts: opts, batches: batch.NewManager(opts.Logger, opts.Clock, opts.MaxPending)}
	for i, verify := range []bool{false, true} {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: !verify} // #nosec G402 -- APISIX's ssl_verify, false by default
		f.clients[i] = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return f
}

// Batches is the factory's batch manager (pending and dropped counts).
func (f *Factory) Batches() *batch.Manager { return f.batches }

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

func intDef(min float64, def int) *gateway.Schema {
	return &gateway.Schema{Type: "integer", Minimum: gateway.Num(min), Default: def}
}

// maxBodyBytes is the default of max_req_body_bytes and max_resp_body_bytes.
const maxBodyBytes = 512 << 10

var schema = &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
	"uri":                    {Type: "string", Pattern: regexp.MustCompile(`^[^\/]+:\/\/([\da-zA-Z.-]+|\[[\da-fA-F:]+\])(:\d+)?`)},
	"auth_header":            {Type: "string"},
	"timeout":                intDef(1, 3),
	"log_format":             {Type: "object"},
	"log_format_extra":       {Type: "object"},
	"include_req_body":       {Type: "boolean", Default: false},
	"include_req_body_expr":  {Type: "array", MinItems: 1, Items: &gateway.Schema{Type: "array"}},
	"include_resp_body":      {Type: "boolean", Default: false},
	"include_resp_body_expr": {Type: "array", MinItems: 1, Items: &gateway.Schema{Type: "array"}},
	"max_req_body_bytes":     intDef(1, maxBodyBytes),
	"max_resp_body_bytes":    intDef(1, maxBodyBytes),
	"concat_method":          {Type: "string", Enum: []any{"json", "new_line"}, Default: "json"},
	"ssl_verify":             {Type: "boolean", Default: false},
	// the batch processor's, as batch_processor_manager:wrap_schema adds them
	"name":             {Type: "string", Default: "http logger"},
	"max_retry_count":  intDef(0, 0),
	"retry_delay":      intDef(0, 1),
	"buffer_duration":  intDef(1, 60),
	"inactive_timeout": intDef(1, 5),
	"batch_max_size":   intDef(1, 1000),
}, Required: []string{"uri"}}

// Schema is APISIX 3.x's.
func (*Factory) Schema() *gateway.Schema { return schema }

// metadataSchema is APISIX 3.x's, with the batch processor manager's
// max_pending_entries.
var metadataSchema = &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
	"log_format":          {Type: "object"},
	"log_format_extra":    {Type: "object"},
	"max_pending_entries": {Type: "integer", Minimum: gateway.Num(1), Default: batch.DefaultMaxPending},
}}

// MetadataSchema is APISIX 3.x's.
func (*Factory) MetadataSchema() *gateway.Schema { return metadataSchema }

// CheckConf compiles the body expressions, as log_util.check_log_schema.
func (*Factory) CheckConf(c map[string]any) error {
	for _, k := range []string{"include_req_body_expr", "include_resp_body_expr"} {
		if rule, ok := c[k].([]any); ok {
			if _, err := gateway.ParseVars(rule); err != nil {
				return fmt.Errorf("failed to validate the '%s' expression: %v", k, err)
			}
		}
	}
	return nil
}

type instance struct {
	f         *Factory
	proc      *batch.Processor
	format    *format // nil: the full log
	extra     *format
	extraKeys []string
}

type conf struct {
	URI            string          `json:"uri"`
	AuthHeader     string          `json:"auth_header"`
	Timeout        int             `json:"timeout"`
	LogFormat      json.RawMessage `json:"log_format"`
	LogFormatExtra json.RawMessage `json:"log_format_extra"`
	ConcatMethod   string          `json:"concat_method"`
	SSLVerify      bool            `json:"ssl_verify"`
	bodyConf
	batch.Config
}

// New builds an instance without plugin metadata.
func (f *Factory) New(raw json.RawMessage, scope gateway.Scope) (any, error) {
	return f.NewWithMetadata(raw, nil, scope)
}

// NewWithMetadata builds an instance on the processor of its scope and
// configuration (a reload that keeps the configuration keeps its buffer).
// The metadata's log_format and log_format_extra apply where the
// configuration has none, as APISIX's get_log_entry; its
// max_pending_entries bounds every processor (Options.MaxPending when
// there is no metadata).
func (f *Factory) NewWithMetadata(raw, md json.RawMessage, scope gateway.Scope) (any, error) {
	c := conf{Timeout: 3, ConcatMethod: "json", Config: batch.Defaults("http logger"),
		bodyConf: bodyConf{MaxReqBodyBytes: maxBodyBytes, MaxRespBodyBytes: maxBodyBytes}}
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	var meta struct {
		LogFormat         json.RawMessage `json:"log_format"`
		LogFormatExtra    json.RawMessage `json:"log_format_extra"`
		MaxPendingEntries int             `json:"max_pending_entries"`
	}
	if md != nil {
		if err := gateway.Unmarshal(md, &meta); err != nil {
			return nil, err
		}
	}
	if isEmpty(c.LogFormat) {
		c.LogFormat = meta.LogFormat
	}
	if c.LogFormatExtra == nil {
		c.LogFormatExtra = meta.LogFormatExtra
	}
	f.batches.SetMaxPending(cmp.Or(meta.MaxPendingEntries, f.opts.MaxPending))
	in := &instance{f: f}
	var err error
	if in.format, err = parseFormat(c.LogFormat); err != nil {
		return nil, err
	}
	if in.extra, err = parseFormat(c.LogFormatExtra); err != nil {
		return nil, err
	}
	if in.extra != nil {
		for _, fl := range in.extra.fields {
			in.extraKeys = append(in.extraKeys, fl.key)
		}
	}
	key := scope.String() + "#" + strconv.FormatUint(uint64(gateway.ConfHash(raw)), 10)
	in.proc = f.batches.Processor(key, c.Config, f.sender(c))
	if c.IncludeReqBody || c.IncludeRespBody {
		return newBodyInstance(in, c.bodyConf)
	}
	return in, nil
}

// sender POSTs a batch as send_http_data does.
func (f *Factory) sender(c conf) batch.SendFunc {
	client := f.clients[0]
	if c.SSLVerify {
		client = f.clients[1]
	}
	timeout := time.Duration(c.Timeout) * time.Second
	ctype := "application/json"
	if c.ConcatMethod == "new_line" {
		ctype = "text/plain"
	}
	return func(ctx context.Context, entries [][]byte, batchMaxSize int) error {
		var body []byte
		switch {
		case batchMaxSize == 1:
			body = entries[0]
		case c.ConcatMethod == "new_line":
			body = bytes.Join(entries, []byte("\n"))
		default:
			body = append(append([]byte("["), bytes.Join(entries, []byte(","))...), ']')
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URI, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", ctype)
		if c.AuthHeader != "" {
			req.Header.Set("Authorization", c.AuthHeader)
		}
		res, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("error while sending data to [%s]: %w", req.URL.Host, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		if res.StatusCode >= 400 {
			return fmt.Errorf("server returned status code[%d] host[%s] body[%s]", res.StatusCode, req.URL.Host, b)
		}
		return nil
	}
}

// Log builds the entry and hands it to the batch processor.
func (in *instance) Log(c gateway.Ctx, e *gateway.LogEntry) { in.push(in.entry(c, e)) }

// entry is APISIX's get_log_entry.
func (in *instance) entry(c gateway.Ctx, e *gateway.LogEntry) map[string]any {
	var entry map[string]any
	if in.format != nil {
		entry = in.format.build(c)
		if e.RouteID != "" {
			entry["route_id"], entry["service_id"] = e.RouteID, e.ServiceID
		}
	} else {
		entry = in.fullLog(c, e)
		if in.extra != nil {
			tmp := in.extra.build(c)
			for _, k := range in.extraKeys {
				if _, ok := entry[k]; !ok && tmp[k] != nil {
					entry[k] = tmp[k]
				}
			}
		}
	}
	if entry["route_id"] == nil || entry["route_id"] == "" {
		entry["route_id"] = "no-matched"
	}
	return entry
}

func (in *instance) push(entry map[string]any) {
	b, err := json.Marshal(entry)
	if err != nil {
		return
	}
	in.proc.Push(b)
}

// fullLog is APISIX's log_util.get_full_log.
func (in *instance) fullLog(c gateway.Ctx, e *gateway.LogEntry) map[string]any {
	reqHeaders := map[string]any{}
	c.RequestHeaders(func(k, v string) { addValue(reqHeaders, k, v) })
	respHeaders := map[string]any{}
	c.ResponseHeaders(func(k, v string) { addValue(respHeaders, k, v) })
	query := map[string]any{}
	for _, kv := range strings.Split(c.Var("args"), "&") {
		if kv == "" {
			continue
		}
		k, v, hasValue := strings.Cut(kv, "=")
		k, _ = url.QueryUnescape(k)
		if !hasValue {
			addAny(query, k, true) // ngx.req.get_uri_args: a bare key is true
			continue
		}
		v, _ = url.QueryUnescape(v)
		addValue(query, k, v)
	}
	host, port, scheme := c.Var("host"), c.Var("server_port"), c.Var("scheme")
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	latency := ms(e.RequestTime)
	serviceID, routeID := e.ServiceID, any(nil)
	if e.RouteID != "" {
		routeID = e.RouteID
	} else {
		serviceID = host
	}
	entry := map[string]any{
		"request": map[string]any{
			"url":         scheme + "://" + host + ":" + port + c.Var("request_uri"),
			"uri":         c.Var("request_uri"),
			"method":      c.Var("request_method"),
			"headers":     reqHeaders,
			"querystring": query,
			"size":        e.RequestLength,
		},
		"response":       map[string]any{"status": e.Status, "headers": respHeaders, "size": e.BytesSent},
		"server":         map[string]any{"hostname": in.f.opts.Hostname, "version": in.f.opts.Version},
		"service_id":     serviceID,
		"route_id":       routeID,
		"client_ip":      c.Var("remote_addr"),
		"start_time":     time.Now().Add(-e.RequestTime).UnixMilli(),
		"latency":        latency,
		"apisix_latency": latency,
	}
	if up := c.Var("upstream_addr"); up != "" {
		entry["upstream"] = up
	}
	if e.Consumer != "" {
		entry["consumer"] = map[string]any{"username": e.Consumer}
	}
	if e.UpstreamStatus != 0 {
		up := ms(e.UpstreamTime)
		entry["upstream_latency"] = up
		entry["apisix_latency"] = max(latency-up, 0)
	}
	return entry
}

// isEmpty is a missing or empty log_format (APISIX: nkeys == 0).
func isEmpty(raw json.RawMessage) bool {
	var m map[string]any
	return len(raw) == 0 || json.Unmarshal(raw, &m) != nil || len(m) == 0
}

// addValue adds a header or argument value: a second one makes a list,
// as ngx.req.get_headers and get_uri_args do.
func addValue(m map[string]any, k, v string) { addAny(m, k, v) }

func addAny(m map[string]any, k string, v any) {
	switch old := m[k].(type) {
	case nil:
		m[k] = v
	case []any:
		m[k] = append(old, v)
	default:
		m[k] = []any{old, v}
	}
}

// format is a parsed log_format: "$name" values are variables, objects
// nest (at most 5 deep, as APISIX), anything else is literal.
type format struct{ fields []field }

type field struct {
	key     string
	varName string  // "$name" → name
	nested  *format // an object
	literal any
}

const maxFormatDepth = 5

func parseFormat(raw json.RawMessage) (*format, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, nil
	}
	return buildFormat(m, 1), nil
}

func buildFormat(m map[string]any, depth int) *format {
	f := &format{}
	for k, v := range m {
		fl := field{key: k}
		switch v := v.(type) {
		case map[string]any:
			if depth >= maxFormatDepth {
				fl.nested = &format{}
			} else {
				fl.nested = buildFormat(v, depth+1)
			}
		case string:
			if name, ok := strings.CutPrefix(v, "$"); ok {
				fl.varName = name
			} else {
				fl.literal = v
			}
		default:
			fl.literal = v
		}
		f.fields = append(f.fields, fl)
	}
	return f
}

// build is APISIX's build_log_entry; an unset variable leaves its key out.
func (f *format) build(c gateway.Ctx) map[string]any {
	out := make(map[string]any, len(f.fields))
	for _, fl := range f.fields {
		switch {
		case fl.nested != nil:
			out[fl.key] = fl.nested.build(c)
		case fl.varName != "":
			if v := c.Var(fl.varName); v != "" {
				out[fl.key] = strings.Clone(v)
			}
		default:
			out[fl.key] = fl.literal
		}
	}
	return out
}
