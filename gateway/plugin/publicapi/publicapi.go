// Package publicapi is APISIX's public-api plugin: a route carrying it
// serves the APIs plugins offer (jwt-auth's /apisix/plugin/jwt/sign) at
// the request's path, or at the configured uri — so an operator decides
// where, and behind which other plugins, they are reachable.
package publicapi

import (
	"encoding/json"

	"github.com/linkgate/linkgate/gateway"
)

// Name and Priority as APISIX.
const (
	Name     = "public-api"
	Priority = 501
)

// Factory makes public-api instances over the APIs of providers.
type Factory struct {
	apis map[string]map[string]gateway.API // method → path
}

var _ gateway.Factory = (*Factory)(nil)

// New returns the plugin factory serving providers' APIs.
func New(providers ...gateway.APIProvider) *Factory {
	f := &Factory{apis: map[string]map[string]gateway.API{}}
	for _, p := range providers {
		for _, a := range p.APIs() {
			if f.apis[a.Method] == nil {
				f.apis[a.Method] = map[string]gateway.API{}
			}
			f.apis[a.Method][a.Path] = a
		}
	}
	return f
}

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

var schema = &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
	"uri": {Type: "string"},
}}

// Schema is APISIX 2.14's.
func (*Factory) Schema() *gateway.Schema { return schema }

type instance struct {
	f   *Factory
	uri string
}

// New builds an instance.
func (f *Factory) New(raw json.RawMessage, _ gateway.Scope) (any, error) {
	var c struct {
		URI string `json:"uri"`
	}
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return &instance{f: f, uri: c.URI}, nil
}

var notFound = gateway.Reply{Status: 404}

// Access serves the API at the path, or 404.
func (in *instance) Access(c gateway.Ctx) gateway.Reply {
	path := in.uri
	if path == "" {
		path = c.Var("uri")
	}
	a, ok := in.f.apis[c.Var("request_method")][path]
	if !ok {
		return notFound
	}
	return a.Serve(c)
}
