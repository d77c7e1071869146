// Package cors is APISIX's cors plugin: it answers preflight (OPTIONS)
// requests itself and adds the Access-Control-* headers to every response
// whose Origin is allowed — listed, matched by a regex, named in the
// plugin metadata's allow_origins (allow_origins_by_metadata), or any.
package cors

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"unsafe"

	"github.com/linkgate/linkgate/gateway"
)

// Name and Priority as APISIX.
const (
	Name     = "cors"
	Priority = 4000
)

// Factory makes cors instances.
type Factory struct{ v3 bool }

// Options choose the APISIX version whose headers the plugin sends.
type Options struct {
	// V3 sends APISIX 3.x's: expose_headers has no default (no
	// Access-Control-Expose-Headers unless set), and Vary: Origin goes
	// with every response when allow_origins is not "*", whether or not
	// the origin is allowed. Without it, 2.14's.
	V3 bool
}

var (
	_ gateway.Factory      = (*Factory)(nil)
	_ gateway.ConfChecker  = (*Factory)(nil)
	_ gateway.MetadataUser = (*Factory)(nil)
)

// New returns the plugin factory, with APISIX 2.14's headers.
func New() *Factory { return &Factory{} }

// NewWithOptions returns the plugin factory configured by o.
func NewWithOptions(o Options) *Factory { return &Factory{v3: o.V3} }

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

var originsPattern = regexp.MustCompile(`^(\*|\*\*|null|\w+://[^,]+(,\w+://[^,]+)*)$`)

var schema = &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
	"allow_origins":             {Type: "string", Pattern: originsPattern, Default: "*"},
	"allow_methods":             {Type: "string", Default: "*"},
	"allow_headers":             {Type: "string", Default: "*"},
	"expose_headers":            {Type: "string", Default: "*"},
	"max_age":                   {Type: "integer", Default: 5},
	"allow_credential":          {Type: "boolean", Default: false},
	"allow_origins_by_regex":    {Type: "array", MinItems: 1, UniqueItems: true, Items: &gateway.Schema{Type: "string", MinLength: 1, MaxLength: 4096}},
	"allow_origins_by_metadata": {Type: "array", MinItems: 1, UniqueItems: true, Items: &gateway.Schema{Type: "string", MinLength: 1, MaxLength: 4096}},
}}

// schemaV3 is 3.x's: expose_headers without a default.
var schemaV3 = func() *gateway.Schema {
	c := *schema
	c.Properties = maps.Clone(schema.Properties)
	c.Properties["expose_headers"] = &gateway.Schema{Type: "string"}
	return &c
}()

// Schema is APISIX 2.14's, or 3.x's with Options.V3.
func (f *Factory) Schema() *gateway.Schema {
	if f.v3 {
		return schemaV3
	}
	return schema
}

// metadataSchema is APISIX 3.x's: named origin lists, each as allow_origins.
var metadataSchema = &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
	"allow_origins": {Type: "object", Values: &gateway.Schema{Type: "string", Pattern: originsPattern}},
}}

// MetadataSchema is APISIX 3.x's metadata_schema.
func (*Factory) MetadataSchema() *gateway.Schema { return metadataSchema }

// CheckConf enforces what the schema cannot say.
func (*Factory) CheckConf(c map[string]any) error {
	if c["allow_credential"] == true {
		for _, k := range []string{"allow_origins", "allow_methods", "allow_headers", "expose_headers"} {
			if c[k] == "*" {
				return fmt.Errorf("you can not set '*' for other option when 'allow_credential' is true")
			}
		}
	}
	if list, ok := c["allow_origins_by_regex"].([]any); ok {
		for _, r := range list {
			if _, err := regexp.Compile(r.(string)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Conf is a validated configuration.
type Conf struct {
	AllowOrigins        string   `json:"allow_origins"`
	AllowMethods        string   `json:"allow_methods"`
	AllowHeaders        string   `json:"allow_headers"`
	ExposeHeaders       string   `json:"expose_headers"`
	MaxAge              *int     `json:"max_age"`
	AllowCredential     bool     `json:"allow_credential"`
	AllowOriginsByRegex []string `json:"allow_origins_by_regex"`
	// AllowOriginsByMetadata names lists of the metadata's allow_origins.
	AllowOriginsByMetadata []string `json:"allow_origins_by_metadata"`
}

type instance struct {
	v3      bool // Options.V3
	origins Origins
	any     bool // allow_origins is "*"
	// byMeta: the metadata's lists named by allow_origins_by_metadata, in
	// order (a name the metadata lacks matches nothing); nil without it.
	byMeta   []Origins
	re       *regexp.Regexp // allow_origins_by_regex, joined with |
	methods  string
	headers  string
	reqHdrs  bool // allow_headers "**": echo Access-Control-Request-Headers
	expose   string
	maxAge   string
	withCred bool
}

// New builds an instance without plugin metadata.
func (f *Factory) New(raw json.RawMessage, scope gateway.Scope) (any, error) {
	return f.NewWithMetadata(raw, nil, scope)
}

// NewWithMetadata builds an instance: origins parsed (the metadata's too),
// regexes compiled, header values formatted once.
func (f *Factory) NewWithMetadata(raw, metadata json.RawMessage, _ gateway.Scope) (any, error) {
	c := Conf{AllowOrigins: "*", AllowMethods: "*", AllowHeaders: "*", ExposeHeaders: "*"}
	if f.v3 {
		c.ExposeHeaders = ""
	}
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	var md struct {
		AllowOrigins map[string]string `json:"allow_origins"`
	}
	if len(c.AllowOriginsByMetadata) > 0 && metadata != nil {
		if err := gateway.Unmarshal(metadata, &md); err != nil {
			return nil, err
		}
	}
	in := &instance{v3: f.v3, origins: ParseOrigins(c.AllowOrigins), any: c.AllowOrigins == "*", methods: c.AllowMethods, headers: c.AllowHeaders,
		reqHdrs: c.AllowHeaders == "**", expose: c.ExposeHeaders, maxAge: "5", withCred: c.AllowCredential}
	if c.MaxAge != nil {
		in.maxAge = strconv.Itoa(*c.MaxAge)
	}
	if in.methods == "**" {
		in.methods = "GET,POST,PUT,DELETE,PATCH,HEAD,OPTIONS,CONNECT,TRACE"
	}
	if len(c.AllowOriginsByRegex) > 0 {
		re, err := regexp.Compile(strings.Join(c.AllowOriginsByRegex, "|"))
		if err != nil {
			return nil, err
		}
		in.re = re
	}
	if len(c.AllowOriginsByMetadata) > 0 {
		in.byMeta = make([]Origins, 0, len(c.AllowOriginsByMetadata))
		for _, name := range c.AllowOriginsByMetadata {
			o := Origins{none: true}
			if list, ok := md.AllowOrigins[name]; ok {
				o = ParseOrigins(list)
			}
			in.byMeta = append(in.byMeta, o)
		}
	}
	return in, nil
}

// Rewrite keeps the request's Origin as the client sent it (a later
// plugin may change the header) and answers preflight requests.
func (in *instance) Rewrite(c gateway.Ctx) gateway.Reply {
	if o := c.Var("http_origin"); o != "" {
		b := c.Buffer(len(o))
		copy(b, o)
		c.SetText(in, unsafe.String(unsafe.SliceData(b), len(b)))
	}
	if c.Var("request_method") == "OPTIONS" {
		return gateway.Reply{Status: 200}
	}
	return gateway.Reply{}
}

// FilterHeaders adds the CORS headers when the origin is allowed.
func (in *instance) FilterHeaders(c gateway.Ctx) {
	origin, saved := c.Text(in)
	if !saved {
		origin = c.Var("http_origin") // an earlier plugin answered before our rewrite
	}
	allow := in.allow(origin)
	if in.v3 && !in.any {
		c.AddResponseHeader("Vary", "Origin") // 3.x: by the configuration, allowed or not
	}
	if allow == "" {
		return
	}
	c.SetResponseHeader("Access-Control-Allow-Origin", allow)
	if !in.v3 && allow != "*" {
		c.AddResponseHeader("Vary", "Origin")
	}
	c.SetResponseHeader("Access-Control-Allow-Methods", in.methods)
	c.SetResponseHeader("Access-Control-Max-Age", in.maxAge)
	if !in.v3 || in.expose != "" {
		c.SetResponseHeader("Access-Control-Expose-Headers", in.expose)
	}
	if in.reqHdrs {
		c.SetResponseHeader("Access-Control-Allow-Headers", c.Var("http_access_control_request_headers"))
	} else {
		c.SetResponseHeader("Access-Control-Allow-Headers", in.headers)
	}
	if in.withCred {
		c.SetResponseHeader("Access-Control-Allow-Credentials", "true")
	}
}

// allow is the Access-Control-Allow-Origin value for origin, "" for none:
// APISIX 3.x's header_filter. With allow_origins_by_metadata the
// metadata's lists come first, and the route's own allow_origins (or
// regexes) only when it is not "*". Under v3 allow_origins_by_regex,
// when set, replaces allow_origins; 2.14 tried it after.
func (in *instance) allow(origin string) string {
	local, allow := true, ""
	if in.byMeta != nil {
		allow = in.metaAllow(origin)
		local = !matches(origin, allow) && !in.any
	}
	if local {
		var ok bool
		switch {
		case in.v3 && in.re != nil:
			// 3.x: the regexes alone decide when there are any.
			allow = ""
			if origin != "" && in.re.MatchString(origin) {
				allow = origin
			}
		default:
			if allow, ok = in.origins.Allow(origin); !ok {
				allow = ""
				if in.re != nil && origin != "" && in.re.MatchString(origin) {
					allow = origin
				}
			}
		}
	}
	if !matches(origin, allow) {
		allow = in.metaAllow(origin)
	}
	return allow
}

// matches is APISIX's match_origins ("" stands for no Origin).
func matches(origin, allow string) bool { return origin == allow || allow == "*" }

// metaAllow is origin when one of the metadata's lists allows it, else "".
func (in *instance) metaAllow(origin string) string {
	for _, o := range in.byMeta {
		if got, _ := o.Allow(origin); matches(origin, got) {
			return origin
		}
	}
	return ""
}

// Origins is a parsed allow_origins: "*" (any), "**" (any, echoed back
// even with credentials), one origin, or a comma-separated list.
type Origins struct {
	any, echo bool
	none      bool // a metadata list that does not exist: allows nothing
	one       string
	list      map[string]struct{}
}

// ParseOrigins parses allow_origins as APISIX does: a value with commas is
// a list of exact origins, anything else is taken as one.
func ParseOrigins(s string) Origins {
	switch {
	case s == "*":
		return Origins{any: true}
	case s == "**":
		return Origins{echo: true}
	case strings.Contains(s, ","):
		o := Origins{list: map[string]struct{}{}}
		for _, e := range strings.Split(s, ",") {
			if e != "" {
				o.list[e] = struct{}{}
			}
		}
		return o
	}
	return Origins{one: s}
}

// Allow returns the Access-Control-Allow-Origin value for a request's
// origin ("" if it sent none) and whether allow_origins decided it; when
// it did not, the regexes get their turn. A decided "" sends no headers.
func (o Origins) Allow(origin string) (string, bool) {
	switch {
	case o.none:
		return "", false
	case o.any:
		return "*", true
	case o.echo:
		if origin == "" {
			return "*", true
		}
		return origin, true
	case o.list != nil:
		if _, ok := o.list[origin]; ok && origin != "" {
			return origin, true
		}
		// APISIX compares a missing origin with a missing match: equal.
		return "", origin == ""
	}
	return o.one, origin == o.one
}
