// Package keyauth is APISIX's key-auth plugin: a consumer is identified by
// the key it sends in a header (apikey) or query argument.
package keyauth

import (
	"encoding/json"
	"errors"

	"github.com/linkgate/linkgate/gateway"
)

// Name and Priority as APISIX.
const (
	Name     = "key-auth"
	Priority = 2500
)

// Factory makes key-auth instances.
type Factory struct{ v3 bool }

// Options configure the factory.
type Options struct {
	// V3 answers a request without a key in APISIX 3.x's words ("Missing
	// API key in request"; 2.14: "Missing API key found in request").
	V3 bool
}

var (
	_ gateway.Factory       = (*Factory)(nil)
	_ gateway.Authenticator = (*Factory)(nil)
)

// New returns the plugin factory, with 2.14's answers.
func New() *Factory { return &Factory{} }

// NewWithOptions returns the plugin factory configured by o.
func NewWithOptions(o Options) *Factory { return &Factory{v3: o.V3} }

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

var (
	schema = &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
		"header":           {Type: "string", Default: "apikey"},
		"query":            {Type: "string", Default: "apikey"},
		"hide_credentials": {Type: "boolean", Default: false},
	}}
	consumerSchema = &gateway.Schema{Type: "object", Required: []string{"key"}, Properties: map[string]*gateway.Schema{
		"key": {Type: "string"},
	}}
)

// Schema is the route-side configuration.
func (*Factory) Schema() *gateway.Schema { return schema }

// ConsumerSchema is the consumer-side configuration: {key}.
func (*Factory) ConsumerSchema() *gateway.Schema { return consumerSchema }

// Credential reads a consumer's key.
func (*Factory) Credential(raw json.RawMessage) (string, error) {
	var c struct {
		Key string `json:"key"`
	}
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return "", err
	}
	if c.Key == "" {
		return "", errors.New("key-auth: empty key")
	}
	return c.Key, nil
}

type instance struct {
	headerVar, queryVar, header string
	hide                        bool
	missing                     gateway.Reply
}

var (
	missing   = gateway.Reply{Status: 401, Body: []byte(`{"message":"Missing API key found in request"}` + "\n")}
	missingV3 = gateway.JSONReply(401, "message", "Missing API key in request")
	invalid   = gateway.Reply{Status: 401, Body: []byte(`{"message":"Invalid API key in request"}` + "\n")}
)

// New builds an instance.
func (f *Factory) New(raw json.RawMessage, _ gateway.Scope) (any, error) {
	c := struct {
		Header string `json:"header"`
		Query  string `json:"query"`
		Hide   bool   `json:"hide_credentials"`
	}{Header: "apikey", Query: "apikey"}
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	in := &instance{headerVar: "http_" + c.Header, queryVar: "arg_" + c.Query, header: c.Header, hide: c.Hide, missing: missing}
	if f.v3 {
		in.missing = missingV3
	}
	return in, nil
}

// Rewrite authenticates the request.
func (in *instance) Rewrite(c gateway.Ctx) gateway.Reply {
	key := c.Var(in.headerVar)
	fromHeader := key != ""
	if !fromHeader {
		key = c.Var(in.queryVar)
	}
	if key == "" {
		return in.missing
	}
	con := c.LookupConsumer(Name, key)
	if con == nil {
		return invalid
	}
	c.SetConsumer(con)
	if in.hide && fromHeader {
		c.SetUpstreamHeader(in.header, "")
	}
	return gateway.Reply{}
}
