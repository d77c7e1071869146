// Package proxyrewrite is APISIX's proxy-rewrite plugin: it rewrites the
// upstream request's uri (plain or by regex), Host, scheme, method and
// headers.
//
// It takes APISIX 3.x's configuration, a superset of 2.14's: regex_uri
// holds pairs of (regex, template) tried in turn, headers is either
// 2.14's {name: value} (each set) or 3.x's {add, set, remove}, whose
// values may be arrays (one header line each) and may use the regex's
// captures ($1, ${2}) as well as variables; use_real_request_uri_unsafe
// forwards the request URI as the client sent it.
package proxyrewrite

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unsafe"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/internal/headerform"
	"github.com/linkgate/linkgate/gateway/plugin/internal/nginxre"
	"github.com/linkgate/linkgate/gateway/plugin/internal/nginxuri"
)

// Name and Priority as APISIX.
const (
	Name     = "proxy-rewrite"
	Priority = 1008
)

// Factory makes proxy-rewrite instances.
type Factory struct{ v3 bool }

// Options configure the factory.
type Options struct {
	// V3 fills APISIX 3.x's default (use_real_request_uri_unsafe: false)
	// into stored configurations, as 3.x's admin API shows them; 2.14
	// had no such field.
	V3 bool
}

var (
	_ gateway.Factory     = (*Factory)(nil)
	_ gateway.ConfChecker = (*Factory)(nil)
)

// New returns the plugin factory, with 2.14's defaults.
func New() *Factory { return &Factory{} }

// NewWithOptions returns the plugin factory configured by o.
func NewWithOptions(o Options) *Factory { return &Factory{v3: o.V3} }

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

// methods are the ones ngx.req.set_method takes (APISIX's switch_map).
var methods = []any{"GET", "POST", "PUT", "HEAD", "DELETE", "OPTIONS", "MKCOL", "COPY", "MOVE", "PROPFIND", "LOCK", "UNLOCK", "PATCH", "TRACE"}

var (
	noColon = `^[^:]+$`
	scalar  = []*gateway.Schema{{Type: "string"}, {Type: "number"}}
	// headerValues: a value, or several (one header line each).
	headerValues = &gateway.Schema{OneOf: append(slices.Clone(scalar),
		&gateway.Schema{Type: "array", MinItems: 1, Items: &gateway.Schema{OneOf: scalar}})}
	headerMap = func(values *gateway.Schema) *gateway.Schema {
		return &gateway.Schema{Type: "object", MinProperties: 1, PatternProperties: map[string]*gateway.Schema{noColon: values}}
	}
)

var schema = &gateway.Schema{Type: "object", MinProperties: 1, Properties: map[string]*gateway.Schema{
	"uri":       {Type: "string", MinLength: 1, MaxLength: 4096, Pattern: regexp.MustCompile(`^\/.*`)},
	"method":    {Type: "string", Enum: methods},
	"regex_uri": {Type: "array", MinItems: 2, Items: &gateway.Schema{Type: "string"}},
	"host":      {Type: "string", Pattern: regexp.MustCompile(`^[0-9a-zA-Z-.]+(:\d{1,5})?$`)},
	"scheme":    {Type: "string", Enum: []any{"http", "https"}}, // 2.14's; 3.x dropped it
	"headers": {OneOf: []*gateway.Schema{
		{Type: "object", MinProperties: 1, NoAdditional: true, Properties: map[string]*gateway.Schema{
			"add":    headerMap(headerValues),
			"set":    headerMap(headerValues),
			"remove": {Type: "array", MinItems: 1, Items: &gateway.Schema{Type: "string", Pattern: regexp.MustCompile(noColon)}},
		}},
		headerMap(&gateway.Schema{OneOf: scalar}),
	}},
	"use_real_request_uri_unsafe": {Type: "boolean"},
}}

// schemaV3 fills 3.x's default.
var schemaV3 = func() *gateway.Schema {
	s := *schema
	s.Properties = maps.Clone(schema.Properties)
	s.Properties["use_real_request_uri_unsafe"] = &gateway.Schema{Type: "boolean", Default: false}
	return &s
}()

// Schema is APISIX 3.x's (with 2.14's scheme); without Options.V3 it
// fills no default 2.14 did not have.
func (f *Factory) Schema() *gateway.Schema {
	if f.v3 {
		return schemaV3
	}
	return schema
}

// CheckConf compiles regex_uri and checks 2.14-form headers as APISIX does.
func (*Factory) CheckConf(c map[string]any) error {
	if r, ok := c["regex_uri"].([]any); ok && len(r) > 0 {
		if len(r)%2 != 0 {
			return errors.New("The length of regex_uri should be an even number") //lint:ignore ST1005 APISIX's message, as its clients see it
		}
		for i := 0; i < len(r); i += 2 {
			_, err := regexp.Compile(r[i].(string))
			if err == nil {
				err = nginxre.CheckTemplate(r[i+1].(string))
			}
			if err != nil {
				return fmt.Errorf("invalid regex_uri(%s, %s): %v", r[i], r[i+1], err)
			}
		}
	}
	headers, _ := c["headers"].(map[string]any)
	if headerform.IsNew(headers) {
		return nil // the schema checked it
	}
	for name, v := range headers {
		var value string
		switch v := v.(type) {
		case string:
			value = v
		case float64, json.Number:
			value = fmt.Sprint(v)
		default:
			return errors.New("invalid type as header value")
		}
		if name == "" {
			return errors.New("invalid field length in header")
		}
		if !validField(name) {
			return errors.New("invalid field character in header")
		}
		if strings.ContainsAny(value, "\r\n") {
			return errors.New("invalid value character in header")
		}
	}
	return nil
}

// validField is APISIX's core.utils.validate_header_field: letters,
// digits and the token characters of RFC 7230 other than ':'.
func validField(name string) bool {
	for i := 0; i < len(name); i++ {
		b := name[i]
		if b <= ' ' || b >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, b) >= 0 {
			return false
		}
	}
	return true
}

// header is one name with its values; a value holding '$' is resolved per
// request (captures, then variables).
type header struct {
	name   string
	values []string
}

type rule struct {
	re       *regexp.Regexp
	template string
}

type instance struct {
	uri        string // resolved per request if it holds '$'
	encodedURI string // uri escaped, when it holds no '$'
	rules      []rule
	host       string
	method     string
	scheme     string
	unsafe     bool
	add, set   []header
	remove     []string
	captures   bool // a header value uses $1, ${2}…
}

// New builds an instance.
func (*Factory) New(raw json.RawMessage, _ gateway.Scope) (any, error) {
	var c struct {
		URI      string                     `json:"uri"`
		RegexURI []string                   `json:"regex_uri"`
		Host     string                     `json:"host"`
		Method   string                     `json:"method"`
		Scheme   string                     `json:"scheme"`
		Headers  map[string]json.RawMessage `json:"headers"`
		Unsafe   bool                       `json:"use_real_request_uri_unsafe"`
	}
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	in := &instance{uri: c.URI, host: c.Host, method: c.Method, scheme: c.Scheme, unsafe: c.Unsafe}
	if c.URI != "" && !strings.Contains(c.URI, "$") {
		in.encodedURI = string(encode([]byte(c.URI)))
	}
	for i := 0; i+1 < len(c.RegexURI); i += 2 {
		re, err := regexp.Compile(c.RegexURI[i])
		if err != nil {
			return nil, err
		}
		in.rules = append(in.rules, rule{re, nginxre.Template(c.RegexURI[i+1])})
	}
	var err error
	if isNewForm(c.Headers) {
		if in.add, err = headerList(c.Headers["add"]); err == nil {
			in.set, err = headerList(c.Headers["set"])
		}
		if r := c.Headers["remove"]; err == nil && len(r) > 0 {
			err = json.Unmarshal(r, &in.remove)
		}
	} else if len(c.Headers) > 0 {
		b, _ := json.Marshal(c.Headers)
		in.set, err = headerList(b)
	}
	if err != nil {
		return nil, err
	}
	for _, h := range slices.Concat(in.add, in.set) {
		for _, v := range h.values {
			in.captures = in.captures || hasCapture(v)
		}
	}
	return in, nil
}

func isNewForm(h map[string]json.RawMessage) bool {
	for _, k := range []string{"add", "set", "remove"} {
		if v := strings.TrimSpace(string(h[k])); strings.HasPrefix(v, "{") || strings.HasPrefix(v, "[") {
			return true
		}
	}
	return false
}

// headerList decodes {name: value | [values]}, sorted by name.
func headerList(raw json.RawMessage) ([]header, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	var out []header
	for name, v := range m {
		var items []json.RawMessage
		if json.Unmarshal(v, &items) != nil {
			items = []json.RawMessage{v}
		}
		h := header{name: name}
		for _, it := range items {
			var s string
			if json.Unmarshal(it, &s) != nil {
				s = string(it) // a number, as APISIX sends it
			}
			h.values = append(h.values, s)
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// Rewrite changes the upstream request: host, uri, headers (add, then
// set, then remove) and method, in APISIX 3.x's order.
func (in *instance) Rewrite(c gateway.Ctx) gateway.Reply {
	if in.host != "" {
		c.SetUpstreamHost(in.host)
	}
	if in.scheme != "" {
		c.SetUpstreamScheme(in.scheme)
	}
	caps := in.rewriteURI(c)
	for _, h := range in.add {
		for _, v := range h.values {
			c.AddUpstreamHeader(h.name, in.resolve(c, v, caps))
		}
	}
	for _, h := range in.set {
		for i, v := range h.values {
			if i == 0 {
				c.SetUpstreamHeader(h.name, in.resolve(c, v, caps))
			} else {
				c.AddUpstreamHeader(h.name, in.resolve(c, v, caps))
			}
		}
	}
	for _, name := range in.remove {
		c.SetUpstreamHeader(name, "")
	}
	if in.method != "" {
		c.SetUpstreamMethod(in.method)
	}
	return gateway.Reply{}
}

// rewriteURI sets the upstream URI and returns regex_uri's captures
// (when a header needs them).
func (in *instance) rewriteURI(c gateway.Ctx) []string {
	path := c.Var("uri")
	query := "" // what follows the path, '?' included, in unsafe mode
	if in.unsafe {
		path = c.Var("request_uri")
		if i := strings.IndexByte(path, '?'); i >= 0 {
			query = path[i:]
		}
	}
	var caps []string
	switch {
	case in.uri != "":
		uri := in.encodedURI
		if uri == "" {
			uri = string(encode([]byte(c.Expand(in.uri))))
		}
		if in.unsafe {
			if query != "" {
				if strings.Contains(uri, "?") {
					uri += "&" + query[1:]
				} else {
					uri += query
				}
			}
			c.SetUpstreamURI(uri)
		} else {
			c.SetUpstreamURI(withArgs(c, uri))
		}
		return nil
	case in.rules != nil:
		for _, r := range in.rules {
			m := r.re.FindStringSubmatchIndex(path)
			if m == nil {
				continue
			}
			if in.captures {
				caps = make([]string, len(m)/2)
				for i := range caps {
					if m[2*i] >= 0 {
						caps[i] = path[m[2*i]:m[2*i+1]]
					}
				}
			}
			// Like ngx.re.sub: only the matched part is replaced.
			uri := path[:m[0]] + string(r.re.ExpandString(nil, r.template, path, m)) + path[m[1]:]
			if in.unsafe {
				c.SetUpstreamURI(uri)
			} else {
				c.SetUpstreamURI(withArgs(c, string(encode([]byte(uri)))))
			}
			return caps
		}
		if in.unsafe {
			c.SetUpstreamURI(path)
			return nil
		}
	case in.unsafe:
		c.SetUpstreamURI(path)
		return nil
	}
	// The path as matched (decoded, normalized), escaped again, with the
	// client's query: built in the request's buffer, without allocating.
	n := len(path)
	for i := 0; i < len(path); i++ {
		if nginxuri.Escapes(path[i]) {
			n += 2
		}
	}
	q := c.Var("query_string")
	buf := c.Buffer(n + 1 + len(q))[:0]
	buf = nginxuri.Encode(append(buf, path...), -1)
	if q != "" || c.Var("is_args") == "?" {
		buf = append(append(buf, '?'), q...)
	}
	c.SetUpstreamURI(b2s(buf))
	return caps
}

// encode is APISIX's escaping of the rewritten uri: the path part as
// nginx's ngx_escape_uri, control characters in the query.
func encode(uri []byte) []byte {
	q := slices.Index(uri, '?')
	out := nginxuri.Encode(uri, q)
	if q < 0 {
		return out
	}
	q = len(out) - (len(uri) - q)
	var b []byte
	for i, ch := range out[q:] {
		if ch < 0x20 || ch == 0x7f {
			if b == nil {
				b = slices.Clone(out[:q+i])
			}
			b = append(b, '%', "0123456789ABCDEF"[ch>>4], "0123456789ABCDEF"[ch&15])
		} else if b != nil {
			b = append(b, ch)
		}
	}
	if b != nil {
		return b
	}
	return out
}

// resolve is APISIX's resolve_var_with_captures then resolve_var.
func (in *instance) resolve(c gateway.Ctx, v string, caps []string) string {
	if !strings.Contains(v, "$") {
		return v
	}
	if in.captures {
		v = withCaptures(v, caps)
	}
	return c.Expand(v)
}

// hasCapture reports whether v refers to a capture ($1, ${1}).
func hasCapture(v string) bool {
	for i := 0; i < len(v); i++ {
		if _, _, ok := captureAt(v, i); ok {
			return true
		}
	}
	return false
}

// captureAt parses a capture reference at v[i]: an unescaped '$', an
// optional '{', digits, an optional '}' (APISIX's pattern
// (?<!\\)\$\{?(\d+)\}?). It returns the capture's number (-1 when too
// large to be one) and the reference's end.
func captureAt(v string, i int) (n, end int, ok bool) {
	if v[i] != '$' || (i > 0 && v[i-1] == '\\') {
		return 0, 0, false
	}
	j := i + 1
	if j < len(v) && v[j] == '{' {
		j++
	}
	start := j
	for j < len(v) && v[j] >= '0' && v[j] <= '9' {
		if n >= 0 {
			n = n*10 + int(v[j]-'0')
			if n > 1<<20 {
				n = -1
			}
		}
		j++
	}
	if j == start {
		return 0, 0, false
	}
	if j < len(v) && v[j] == '}' {
		j++
	}
	return n, j, true
}

// withCaptures replaces each capture reference by its capture, "" when
// there is none (regex_uri did not match, or the group did not take part).
func withCaptures(v string, caps []string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(v); i++ {
		n, end, ok := captureAt(v, i)
		if !ok {
			continue
		}
		b.WriteString(v[last:i])
		if n >= 0 && n < len(caps) {
			b.WriteString(caps[n])
		}
		last, i = end, end-1
	}
	if last == 0 {
		return v
	}
	b.WriteString(v[last:])
	return b.String()
}

// withArgs appends the client's query string as APISIX does: after "&"
// when the new uri has a query of its own; built in the request's buffer.
func withArgs(c gateway.Ctx, uri string) string {
	q := c.Var("query_string")
	if q == "" && c.Var("is_args") != "?" {
		return uri
	}
	sep := byte('?')
	if strings.Contains(uri, "?") {
		sep = '&'
	}
	buf := c.Buffer(len(uri) + 1 + len(q))[:0]
	return b2s(append(append(append(buf, uri...), sep), q...))
}

func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
