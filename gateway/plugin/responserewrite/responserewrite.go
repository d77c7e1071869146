// Package responserewrite is APISIX's response-rewrite plugin: it changes
// the status, headers and body of responses (the upstream's or a
// plugin's), for every response or those matching vars. Rewriting the
// body needs the whole of it: only a configuration with body or filters
// makes an instance with a body phase (gateway.BodyFilter).
package responserewrite

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/internal/headerform"
	"github.com/linkgate/linkgate/gateway/plugin/internal/nginxre"
)

// Name and Priority as APISIX.
const (
	Name     = "response-rewrite"
	Priority = 899
)

// Factory makes response-rewrite instances.
type Factory struct{}

var (
	_ gateway.Factory     = (*Factory)(nil)
	_ gateway.ConfChecker = (*Factory)(nil)
)

// New returns the plugin factory.
func New() *Factory { return &Factory{} }

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

var (
	noColon     = `^[^:]+$`
	scalar      = &gateway.Schema{OneOf: []*gateway.Schema{{Type: "string"}, {Type: "number"}}}
	headerMap   = &gateway.Schema{Type: "object", MinProperties: 1, PatternProperties: map[string]*gateway.Schema{noColon: scalar}}
	addPattern  = regexp.MustCompile(`^[^:]+:[^:]*[^/]$`)
	addLine     = regexp.MustCompile(`^([^:\s]+)\s*:\s*([^:]+)$`)
	headersForm = &gateway.Schema{Type: "object", MinProperties: 1, AnyOf: []*gateway.Schema{
		headerMap, // 2.14's {name: value}, each set
		{Properties: map[string]*gateway.Schema{ // 3.x's
			"add":    {Type: "array", MinItems: 1, Items: &gateway.Schema{Type: "string", Pattern: addPattern}},
			"set":    headerMap,
			"remove": {Type: "array", MinItems: 1, Items: &gateway.Schema{Type: "string", Pattern: regexp.MustCompile(noColon)}},
		}},
	}}
)

var schema = &gateway.Schema{Type: "object", MinProperties: 1, Properties: map[string]*gateway.Schema{
	"headers":     headersForm,
	"body":        {Type: "string"},
	"body_base64": {Type: "boolean", Default: false},
	"status_code": {Type: "integer", Minimum: gateway.Num(200), Maximum: gateway.Num(598)},
	"vars":        {Type: "array"},
	"filters": {Type: "array", MinItems: 1, Items: &gateway.Schema{Type: "object", Required: []string{"regex", "replace"}, Properties: map[string]*gateway.Schema{
		"regex":   {Type: "string", MinLength: 1},
		"scope":   {Type: "string", Enum: []any{"once", "global"}, Default: "once"},
		"replace": {Type: "string"},
		"options": {Type: "string", Default: "jo"},
	}}},
}}

// Schema is APISIX 2.14's, with 3.x's headers (add, set, remove).
func (*Factory) Schema() *gateway.Schema { return schema }

// CheckConf enforces what the schema cannot say, with APISIX's messages.
func (*Factory) CheckConf(c map[string]any) error {
	if h, ok := c["headers"].(map[string]any); ok && !headerform.IsNew(h) {
		for k, v := range h {
			switch v.(type) {
			case string, json.Number:
			default:
				return fmt.Errorf("invalid type as header value")
			}
			if k == "" {
				return fmt.Errorf("invalid field length in header")
			}
		}
	}
	if c["body_base64"] == true {
		body, _ := c["body"].(string)
		if _, err := base64.StdEncoding.DecodeString(body); body == "" || err != nil {
			return fmt.Errorf("invalid base64 content")
		}
	}
	if v, ok := c["vars"].([]any); ok {
		if _, err := gateway.ParseVars(v); err != nil {
			return fmt.Errorf("failed to validate the 'vars' expression: %v", err)
		}
	}
	if fs, ok := c["filters"].([]any); ok {
		for _, f := range fs {
			m := f.(map[string]any)
			opts, _ := m["options"].(string)
			if _, err := nginxre.Compile(m["regex"].(string), opts); err != nil {
				return fmt.Errorf("regex %q validation failed: %v", m["regex"], err)
			}
		}
	}
	return nil
}

type headerOp uint8

const (
	opAdd headerOp = iota
	opSet
	opRemove
)

type header struct {
	name, value string
	expand      bool // value holds $variables
	op          headerOp
}

type filter struct {
	re       *nginxre.Regexp
	global   bool
	template []byte
}

// instance rewrites status and headers; withBody also rewrites the body.
type instance struct {
	vars    *gateway.Expr
	status  int
	headers []header
	// body or filters set: the body changes, so its validators go.
	touchesBody bool
	body        []byte
	filters     []filter
}

type withBody struct{ *instance }

// New builds an instance: values decoded, regexes compiled, headers sorted.
func (*Factory) New(raw json.RawMessage, _ gateway.Scope) (any, error) {
	var c struct {
		Headers    map[string]json.RawMessage `json:"headers"`
		Body       *string                    `json:"body"`
		BodyBase64 bool                       `json:"body_base64"`
		StatusCode int                        `json:"status_code"`
		Vars       json.RawMessage            `json:"vars"`
		Filters    []struct {
			Regex, Scope, Replace, Options string
		} `json:"filters"`
	}
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	in := &instance{status: c.StatusCode}
	if len(c.Vars) > 0 {
		v, err := gateway.DecodeJSON(c.Vars)
		if err != nil {
			return nil, err
		}
		arr, _ := v.([]any)
		if in.vars, err = gateway.ParseVars(arr); err != nil {
			return nil, err
		}
	}
	headers, err := decodeHeaders(c.Headers)
	if err != nil {
		return nil, err
	}
	in.headers = headers
	for _, f := range c.Filters {
		opts := f.Options
		if opts == "" {
			opts = "jo"
		}
		re, err := nginxre.Compile(f.Regex, opts)
		if err != nil {
			return nil, err
		}
		in.filters = append(in.filters, filter{re: re, global: f.Scope == "global", template: []byte(nginxre.Template(f.Replace))})
	}
	switch {
	case len(in.filters) > 0:
	case c.Body != nil:
		in.body = []byte(*c.Body)
		if c.BodyBase64 {
			b, err := base64.StdEncoding.DecodeString(*c.Body)
			if err != nil {
				return nil, err
			}
			in.body = b
		}
	default:
		return in, nil
	}
	in.touchesBody = true
	return withBody{in}, nil
}

// FilterHeaders applies status and headers when vars match, and notes the
// match for the body phase.
func (in *instance) FilterHeaders(c gateway.Ctx) {
	if in.vars != nil {
		if !in.vars.Eval(c) {
			return
		}
		c.SetValue(in, 1)
	}
	if in.status != 0 {
		c.SetStatus(in.status)
	}
	if in.touchesBody {
		for _, h := range []string{"Content-Length", "Content-Encoding", "Last-Modified", "ETag"} {
			c.SetResponseHeader(h, "")
		}
	}
	for _, h := range in.headers {
		v := h.value
		if h.expand {
			v = c.Expand(v)
		}
		switch h.op {
		case opAdd:
			c.AddResponseHeader(h.name, v)
		case opSet:
			c.SetResponseHeader(h.name, v)
		case opRemove:
			c.SetResponseHeader(h.name, "")
		}
	}
}

// decodeHeaders returns the header changes in APISIX's order: adds ("Name:
// value" lines), then sets (by name), then removes; 2.14's form is sets.
func decodeHeaders(raw map[string]json.RawMessage) ([]header, error) {
	scalarString := func(v json.RawMessage) string {
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
		return string(v) // a number
	}
	sets := func(m map[string]json.RawMessage) []header {
		var out []header
		for _, name := range slices.Sorted(maps.Keys(m)) {
			v := scalarString(m[name])
			out = append(out, header{name: name, value: v, expand: strings.Contains(v, "$"), op: opSet})
		}
		return out
	}
	isTable := func(v json.RawMessage) bool {
		t := strings.TrimSpace(string(v))
		return strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[")
	}
	if !isTable(raw["add"]) && !isTable(raw["set"]) && !isTable(raw["remove"]) {
		return sets(raw), nil
	}
	var c struct {
		Add    []string
		Set    map[string]json.RawMessage
		Remove []string
	}
	b, _ := json.Marshal(raw)
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	var out []header
	for _, line := range c.Add {
		m := addLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("invalid header to add: %q", line)
		}
		out = append(out, header{name: m[1], value: m[2], expand: strings.Contains(m[2], "$"), op: opAdd})
	}
	out = append(out, sets(c.Set)...)
	for _, name := range c.Remove {
		out = append(out, header{name: name, op: opRemove})
	}
	return out, nil
}

// FilterBody replaces the body, or applies the filters to it.
func (in withBody) FilterBody(c gateway.Ctx, dst, body []byte) []byte {
	if in.vars != nil {
		if _, matched := c.Value(in.instance); !matched {
			return body
		}
	}
	if in.filters == nil {
		return in.body
	}
	// Each filter reads the previous one's output: two buffers in turn.
	var alt []byte
	for i, f := range in.filters {
		out := &dst
		if i%2 == 1 {
			out = &alt
		}
		if f.global {
			*out, _ = nginxre.Gsub(f.re, (*out)[:0], body, f.template)
		} else {
			*out, _ = nginxre.Sub(f.re, (*out)[:0], body, f.template)
		}
		body = *out
	}
	return body
}
