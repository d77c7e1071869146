// Package proxyrewrite is APISIX's proxy-rewrite plugin: it rewrites the
// upstream request's uri (plain or by regex), Host, scheme, method and
// headers.
package proxyrewrite

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/internal/nginxre"
)

// Name and Priority as APISIX.
const (
	Name     = "proxy-rewrite"
	Priority = 1008
)

// Factory makes proxy-rewrite instances.
type Factory struct{}

var _ gateway.Factory = (*Factory)(nil)

// New returns the plugin factory.
func New() *Factory { return &Factory{} }

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

// methods are the ones ngx.req.set_method takes (APISIX's switch_map).
var methods = []any{"GET", "POST", "PUT", "HEAD", "DELETE", "OPTIONS", "MKCOL", "COPY", "MOVE", "PROPFIND", "LOCK", "UNLOCK", "PATCH", "TRACE"}

var schema = &gateway.Schema{Type: "object", MinProperties: 1, Properties: map[string]*gateway.Schema{
	"uri":       {Type: "string", MinLength: 1, MaxLength: 4096, Pattern: regexp.MustCompile(`^\/.*`)},
	"method":    {Type: "string", Enum: methods},
	"regex_uri": {Type: "array", MinItems: 2, MaxItems: 2, Items: &gateway.Schema{Type: "string"}},
	"host":      {Type: "string", Pattern: regexp.MustCompile(`^[0-9a-zA-Z-.]+(:\d{1,5})?$`)},
	"scheme":    {Type: "string", Enum: []any{"http", "https"}},
	"headers":   {Type: "object", MinProperties: 1},
}}

// Schema is APISIX 2.14's.
func (*Factory) Schema() *gateway.Schema { return schema }

// CheckConf compiles regex_uri and checks the headers as APISIX does.
func (*Factory) CheckConf(c map[string]any) error {
	if r, ok := c["regex_uri"].([]any); ok && len(r) == 2 {
		_, err := regexp.Compile(r[0].(string))
		if err == nil {
			err = nginxre.CheckTemplate(r[1].(string))
		}
		if err != nil {
			return fmt.Errorf("invalid regex_uri(%s, %s): %v", r[0], r[1], err)
		}
	}
	headers, _ := c["headers"].(map[string]any)
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

type header struct{ name, value string }

type instance struct {
	uri      string
	re       *regexp.Regexp
	template string
	host     string
	method   string
	scheme   string
	headers  []header
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
	}
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	in := &instance{uri: c.URI, host: c.Host, method: c.Method, scheme: c.Scheme}
	if len(c.RegexURI) == 2 {
		re, err := regexp.Compile(c.RegexURI[0])
		if err != nil {
			return nil, err
		}
		in.re, in.template = re, nginxre.Template(c.RegexURI[1])
	}
	for k, v := range c.Headers {
		var value string
		if json.Unmarshal(v, &value) != nil {
			value = string(v) // a number, as APISIX sends it
		}
		in.headers = append(in.headers, header{k, value})
	}
	return in, nil
}

// Rewrite changes the upstream request.
func (in *instance) Rewrite(c gateway.Ctx) gateway.Reply {
	switch {
	case in.uri != "":
		uri := in.uri
		if strings.Contains(uri, "$") {
			uri = c.Expand(uri)
		}
		c.SetUpstreamURI(withArgs(c, uri))
	case in.re != nil:
		path := c.Var("uri")
		if m := in.re.FindStringSubmatchIndex(path); m != nil {
			c.SetUpstreamURI(withArgs(c, string(in.re.ExpandString(nil, in.template, path, m))))
		}
	}
	if in.host != "" {
		c.SetUpstreamHost(in.host)
	}
	if in.scheme != "" {
		c.SetUpstreamScheme(in.scheme)
	}
	for _, h := range in.headers {
		v := h.value
		if strings.Contains(v, "$") {
			v = c.Expand(v)
		}
		c.SetUpstreamHeader(h.name, v)
	}
	if in.method != "" {
		c.SetUpstreamMethod(in.method)
	}
	return gateway.Reply{}
}

// withArgs appends the client's query string as APISIX does: after "&"
// when the new uri has a query of its own.
func withArgs(c gateway.Ctx, uri string) string {
	q := c.Var("query_string")
	if q == "" && c.Var("is_args") != "?" {
		return uri
	}
	if strings.Contains(uri, "?") {
		return uri + "&" + q
	}
	return uri + "?" + q
}
