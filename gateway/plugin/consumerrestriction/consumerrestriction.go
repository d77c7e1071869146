// Package consumerrestriction is APISIX's consumer-restriction plugin: it
// lets a request through, or rejects it, by the consumer an auth plugin
// identified (or its consumer group, or the route or service that
// matched), with a blacklist, a whitelist and per-value allowed methods.
package consumerrestriction

import (
	"encoding/json"
	"slices"

	"github.com/linkgate/linkgate/gateway"
)

// Name and Priority as APISIX.
const (
	Name     = "consumer-restriction"
	Priority = 2400
)

// Factory makes consumer-restriction instances.
type Factory struct{}

var (
	_ gateway.Factory  = (*Factory)(nil)
	_ gateway.Accessor = (*instance)(nil)
)

// New returns the plugin factory.
func New() *Factory { return &Factory{} }

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

var methodSchema, _ = gateway.NamedSchema("method_schema")

var schema = &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
	"type":      {Type: "string", Enum: []any{"consumer_name", "service_id", "route_id", "consumer_group_id"}, Default: "consumer_name"},
	"blacklist": {Type: "array", MinItems: 1, Items: &gateway.Schema{Type: "string"}},
	"whitelist": {Type: "array", MinItems: 1, Items: &gateway.Schema{Type: "string"}},
	"allowed_by_methods": {Type: "array", Items: &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
		"user":    {Type: "string"},
		"methods": {Type: "array", MinItems: 1, Items: methodSchema},
	}}},
	"rejected_code": {Type: "integer", Minimum: gateway.Num(200), Default: 403},
	"rejected_msg":  {Type: "string"},
}, AnyOf: []*gateway.Schema{{Required: []string{"blacklist"}}, {Required: []string{"whitelist"}}, {Required: []string{"allowed_by_methods"}}}}

// Schema is APISIX 3.x's.
func (*Factory) Schema() *gateway.Schema { return schema }

type allowed struct {
	user    string
	methods []string
}

type instance struct {
	value       func(c gateway.Ctx) string
	black       []string
	white       []string
	byMethods   []allowed
	rejected    gateway.Reply // the list's verdict
	unknown     gateway.Reply // 401: the request has no such value
	checkWhite  bool
	checkMethod bool
}

// values reads what type names, "" when the request has none.
var values = map[string]func(c gateway.Ctx) string{
	"consumer_name": func(c gateway.Ctx) string {
		if u := c.Consumer(); u != nil {
			return u.Username
		}
		return ""
	},
	"consumer_group_id": func(c gateway.Ctx) string {
		if u := c.Consumer(); u != nil {
			return u.GroupID
		}
		return ""
	},
	"route_id":   func(c gateway.Ctx) string { return c.Var("route_id") },
	"service_id": func(c gateway.Ctx) string { return c.Var("service_id") },
}

// New builds an instance; its replies are built once.
func (*Factory) New(raw json.RawMessage, _ gateway.Scope) (any, error) {
	var c struct {
		Type             string   `json:"type"`
		Blacklist        []string `json:"blacklist"`
		Whitelist        []string `json:"whitelist"`
		AllowedByMethods []struct {
			User    string   `json:"user"`
			Methods []string `json:"methods"`
		} `json:"allowed_by_methods"`
		RejectedCode int     `json:"rejected_code"`
		RejectedMsg  *string `json:"rejected_msg"`
	}
	c.Type, c.RejectedCode = "consumer_name", 403
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	in := &instance{
		value:       values[c.Type],
		black:       c.Blacklist,
		white:       c.Whitelist,
		checkWhite:  len(c.Whitelist) > 0,
		checkMethod: len(c.AllowedByMethods) > 0,
		unknown:     gateway.JSONReply(401, "message", "The request is rejected, please check the "+c.Type+" for this request"),
	}
	for _, a := range c.AllowedByMethods {
		in.byMethods = append(in.byMethods, allowed{user: a.User, methods: a.Methods})
	}
	msg := "The " + c.Type + " is forbidden."
	if c.RejectedMsg != nil {
		msg = *c.RejectedMsg
	}
	in.rejected = gateway.JSONReply(c.RejectedCode, "message", msg)
	return in, nil
}

// Access applies the blacklist first: a listed value is rejected whatever
// the other lists say; then a value must be whitelisted (when there is a
// whitelist) and, unless whitelisted, its method allowed.
func (in *instance) Access(c gateway.Ctx) gateway.Reply {
	v := in.value(c)
	if v == "" {
		return in.unknown
	}
	if slices.Contains(in.black, v) {
		return in.rejected
	}
	whitelisted := false
	block := false
	if in.checkWhite {
		whitelisted = slices.Contains(in.white, v)
		block = !whitelisted
	}
	if in.checkMethod && !whitelisted && !in.methodAllowed(c.Var("request_method"), v) {
		block = true
	}
	if block {
		return in.rejected
	}
	return gateway.Reply{}
}

// methodAllowed is APISIX's is_method_allowed: the first entry for the
// value decides; a value without an entry may use any method.
func (in *instance) methodAllowed(method, v string) bool {
	for _, a := range in.byMethods {
		if a.user == v {
			return slices.Contains(a.methods, method)
		}
	}
	return true
}
