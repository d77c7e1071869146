// Package redirect is APISIX's redirect plugin: it answers with a redirect
// to a URI built from a template of variables, to the request's URI
// rewritten by a regex, or from http to https.
package redirect

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"unsafe"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/internal/nginxre"
	"github.com/linkgate/linkgate/gateway/plugin/internal/nginxuri"
)

// Name and Priority as APISIX.
const (
	Name     = "redirect"
	Priority = 900
)

// Factory makes redirect instances.
type Factory struct {
	httpsPort int
	v3        bool
}

var (
	_ gateway.Factory     = (*Factory)(nil)
	_ gateway.ConfChecker = (*Factory)(nil)
)

// New returns the plugin factory with 2.14's rules. httpsPort is the
// port http_to_https redirects to (APISIX's plugin_attr.redirect.https_port,
// else its TLS listener); 0 or 443 leaves it out of the URL.
func New(httpsPort int) *Factory { return &Factory{httpsPort: httpsPort} }

// Options configure the factory.
type Options struct {
	HTTPSPort int // as New's httpsPort
	// V3 applies APISIX 3.x's rules: http_to_https redirects every
	// request whose scheme (X-Forwarded-Proto first) is not https (2.14:
	// only http), and refuses append_query_string beside it.
	V3 bool
}

// NewWithOptions returns the plugin factory configured by o.
func NewWithOptions(o Options) *Factory { return &Factory{httpsPort: o.HTTPSPort, v3: o.V3} }

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

// templatePattern is APISIX's: escaped \$var, ${var}, $var, or other text.
var templatePattern = regexp.MustCompile(`(\\\$[0-9a-zA-Z_]+)|\$\{([0-9a-zA-Z_]+)\}|\$([0-9a-zA-Z_]+)|(\$|[^$\\]+)`)

var schema = &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
	"ret_code":            {Type: "integer", Minimum: gateway.Num(200), Default: 302},
	"uri":                 {Type: "string", MinLength: 2, Pattern: templatePattern},
	"regex_uri":           {Type: "array", MinItems: 2, MaxItems: 2, Items: &gateway.Schema{Type: "string"}},
	"http_to_https":       {Type: "boolean"},
	"encode_uri":          {Type: "boolean", Default: false},
	"append_query_string": {Type: "boolean", Default: false},
}, OneOf: []*gateway.Schema{{Required: []string{"uri"}}, {Required: []string{"regex_uri"}}, {Required: []string{"http_to_https"}}}}

// Schema is APISIX 2.14's.
func (*Factory) Schema() *gateway.Schema { return schema }

// CheckConf compiles regex_uri as APISIX does: on a sample URI.
func (f *Factory) CheckConf(c map[string]any) error {
	if f.v3 && c["http_to_https"] == true && c["append_query_string"] == true {
		return errors.New("only one of `http_to_https` and `append_query_string` can be configured.") //lint:ignore ST1005 APISIX's message, as its clients see it
	}
	if r, ok := c["regex_uri"].([]any); ok && len(r) == 2 {
		if _, err := nginxre.Compile(r[0].(string), "jo"); err != nil {
			return fmt.Errorf("invalid regex_uri (%s, %s), err:%v", r[0], r[1], err)
		}
	}
	return nil
}

// segment is a piece of a uri template: literal text or a variable.
type segment struct {
	text  string
	isVar bool
}

// ParseTemplate splits a uri template as APISIX's gmatch over its
// pattern: "\$name" stays as it is, ${name} and $name are variables, a
// lone "$" is text, and a backslash not starting "\$name" is dropped.
func ParseTemplate(t string) []segment {
	var segs []segment
	for _, m := range templatePattern.FindAllStringSubmatch(t, -1) {
		switch {
		case m[2] != "":
			segs = append(segs, segment{m[2], true})
		case m[3] != "":
			segs = append(segs, segment{m[3], true})
		case m[1] != "":
			segs = append(segs, segment{m[1], false})
		default:
			segs = append(segs, segment{m[4], false})
		}
	}
	return segs
}

type instance struct {
	code     int
	segs     []segment
	static   string // the whole Location when segs has no variable
	re       *nginxre.Regexp
	template []byte
	toHTTPS  bool
	encode   bool
	appendQS bool
	v3       bool // any scheme but https goes to https
}

var httpsTemplate = ParseTemplate("https://$host$request_uri")

// New builds an instance.
func (f *Factory) New(raw json.RawMessage, _ gateway.Scope) (any, error) {
	var c struct {
		RetCode     int      `json:"ret_code"`
		URI         string   `json:"uri"`
		RegexURI    []string `json:"regex_uri"`
		HTTPToHTTPS bool     `json:"http_to_https"`
		EncodeURI   bool     `json:"encode_uri"`
		AppendQS    bool     `json:"append_query_string"`
	}
	c.RetCode = 302
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	in := &instance{code: c.RetCode, toHTTPS: c.HTTPToHTTPS, encode: c.EncodeURI, appendQS: c.AppendQS, v3: f.v3}
	switch {
	case c.HTTPToHTTPS:
		in.segs = httpsTemplate
		if p := f.httpsPort; p > 0 && p != 443 && p <= 65535 {
			in.segs = ParseTemplate("https://$host:" + strconv.Itoa(p) + "$request_uri")
		}
	case c.URI != "":
		in.segs = ParseTemplate(c.URI)
	case len(c.RegexURI) == 2:
		re, err := nginxre.Compile(c.RegexURI[0], "jo")
		if err != nil {
			return nil, err
		}
		in.re, in.template = re, []byte(nginxre.Template(c.RegexURI[1]))
	}
	if !in.toHTTPS && in.re == nil && !in.encode && !in.appendQS {
		static := true
		var b strings.Builder
		for _, s := range in.segs {
			static = static && !s.isVar
			b.WriteString(s.text)
		}
		if static {
			in.static = b.String()
		}
	}
	return in, nil
}

// Rewrite answers with the redirect.
func (in *instance) Rewrite(c gateway.Ctx) gateway.Reply {
	code := in.code
	if in.toHTTPS {
		scheme := c.Var("http_x_forwarded_proto")
		if scheme == "" {
			scheme = c.Var("scheme")
		}
		if scheme == "https" || !in.v3 && scheme != "http" {
			return gateway.Reply{}
		}
		code = http.StatusPermanentRedirect
		if m := c.Var("request_method"); m == "GET" || m == "HEAD" {
			code = http.StatusMovedPermanently
		}
	}
	if in.static != "" {
		c.SetResponseHeader("Location", in.static)
		return gateway.Reply{Status: code}
	}
	var loc []byte
	if in.re != nil {
		uri := c.Var("uri")
		// Room for the rewrite, its encoding and the query string.
		buf := c.Buffer(3*(len(uri)+len(in.template)) + len(c.Var("args")) + 2)[:0]
		out, ok := nginxre.Sub(in.re, buf, unsafe.Slice(unsafe.StringData(uri), len(uri)), in.template)
		if !ok {
			return gateway.Reply{}
		}
		loc = out
	} else {
		n := len(c.Var("args")) + 2
		for _, s := range in.segs {
			if s.isVar {
				n += 3 * len(c.Var(s.text))
			} else {
				n += 3 * len(s.text)
			}
		}
		loc = c.Buffer(n)[:0]
		for _, s := range in.segs {
			if s.isVar {
				loc = append(loc, c.Var(s.text)...)
			} else {
				loc = append(loc, s.text...)
			}
		}
	}
	q := strings.IndexByte(b2s(loc), '?')
	if in.encode {
		loc = nginxuri.Encode(loc, q)
	}
	if in.appendQS && c.Var("is_args") == "?" {
		if q >= 0 {
			loc = append(loc, '&')
		} else {
			loc = append(loc, '?')
		}
		loc = append(loc, c.Var("args")...)
	}
	c.SetResponseHeader("Location", b2s(loc))
	return gateway.Reply{Status: code}
}

func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
