// Package proxyrewrite is APISIX's proxy-rewrite plugin: it rewrites the
// upstream request's uri (plain or by regex), Host and headers.
package proxyrewrite

import (
	"encoding/json"
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

var schema = &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
	"uri":       {Type: "string", MinLength: 1, MaxLength: 4096, Pattern: regexp.MustCompile(`^\/.*`)},
	"regex_uri": {Type: "array", MinItems: 2, MaxItems: 2, Items: &gateway.Schema{Type: "string"}},
	"host":      {Type: "string", Pattern: regexp.MustCompile(`^[0-9a-zA-Z-.]+(:\d{1,5})?$`)},
	"scheme":    {Type: "string", Enum: []any{"http", "https"}},
	"headers":   {Type: "object", Values: &gateway.Schema{Type: "string"}},
}}

// Schema is APISIX 2.14's.
func (*Factory) Schema() *gateway.Schema { return schema }

// CheckConf compiles regex_uri.
func (*Factory) CheckConf(c map[string]any) error {
	if r, ok := c["regex_uri"].([]any); ok && len(r) == 2 {
		if _, err := regexp.Compile(r[0].(string)); err != nil {
			return fmt.Errorf("invalid regex_uri(%s) : %v", r[0], err)
		}
	}
	if _, ok := c["scheme"]; ok {
		return gateway.Unsupported("scheme rewriting is not supported by linkgate; set the upstream's scheme")
	}
	return nil
}

type header struct{ name, value string }

type instance struct {
	uri      string
	re       *regexp.Regexp
	template string
	host     string
	headers  []header
}

// New builds an instance.
func (*Factory) New(raw json.RawMessage, _ gateway.Scope) (any, error) {
	var c struct {
		URI      string            `json:"uri"`
		RegexURI []string          `json:"regex_uri"`
		Host     string            `json:"host"`
		Headers  map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	in := &instance{uri: c.URI, host: c.Host}
	if len(c.RegexURI) == 2 {
		re, err := regexp.Compile(c.RegexURI[0])
		if err != nil {
			return nil, err
		}
		in.re, in.template = re, nginxre.Template(c.RegexURI[1])
	}
	for k, v := range c.Headers {
		in.headers = append(in.headers, header{k, v})
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
		if q := c.Var("query_string"); q != "" && !strings.Contains(uri, "?") {
			uri += "?" + q
		}
		c.SetUpstreamURI(uri)
	case in.re != nil:
		path := c.Var("uri")
		if m := in.re.FindStringSubmatchIndex(path); m != nil {
			uri := string(in.re.ExpandString(nil, in.template, path, m))
			if q := c.Var("query_string"); q != "" {
				uri += "?" + q
			}
			c.SetUpstreamURI(uri)
		}
	}
	if in.host != "" {
		c.SetUpstreamHost(in.host)
	}
	for _, h := range in.headers {
		v := h.value
		if strings.Contains(v, "$") {
			v = c.Expand(v)
		}
		c.SetUpstreamHeader(h.name, v)
	}
	return gateway.Reply{}
}
