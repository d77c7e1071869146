// Package iprestriction is APISIX's ip-restriction plugin: requests from
// addresses outside the whitelist, or inside the blacklist, get 403.
package iprestriction

import (
	"encoding/json"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/internal/ipmatch"
)

// Name and Priority as APISIX.
const (
	Name     = "ip-restriction"
	Priority = 3000
)

// Factory makes ip-restriction instances.
type Factory struct{}

var (
	_ gateway.Factory     = (*Factory)(nil)
	_ gateway.ConfChecker = (*Factory)(nil)
)

// New returns the plugin factory.
func New() *Factory { return &Factory{} }

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

var schema = &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
	"message":   {Type: "string", MinLength: 1, MaxLength: 1024, Default: "Your IP address is not allowed"},
	"whitelist": {Type: "array", Items: ipmatch.Def, MinItems: 1},
	"blacklist": {Type: "array", Items: ipmatch.Def, MinItems: 1},
}, OneOf: []*gateway.Schema{{Required: []string{"whitelist"}}, {Required: []string{"blacklist"}}}}

// Schema is APISIX 2.14's.
func (*Factory) Schema() *gateway.Schema { return schema }

// CheckConf validates every address strictly.
func (*Factory) CheckConf(c map[string]any) error {
	for _, k := range []string{"whitelist", "blacklist"} {
		list, _ := c[k].([]any)
		for _, v := range list {
			if _, err := ipmatch.Parse(v.(string)); err != nil {
				return err
			}
		}
	}
	return nil
}

type instance struct {
	white, black *ipmatch.Matcher
	rejected     gateway.Reply
}

// New builds an instance; its matchers are built once.
func (*Factory) New(raw json.RawMessage, _ gateway.Scope) (any, error) {
	var c struct {
		Message   string   `json:"message"`
		Whitelist []string `json:"whitelist"`
		Blacklist []string `json:"blacklist"`
	}
	c.Message = "Your IP address is not allowed"
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	in := &instance{}
	var err error
	if c.Whitelist != nil {
		if in.white, err = ipmatch.New(c.Whitelist); err != nil {
			return nil, err
		}
	}
	if c.Blacklist != nil {
		if in.black, err = ipmatch.New(c.Blacklist); err != nil {
			return nil, err
		}
	}
	in.rejected = gateway.JSONReply(403, "message", c.Message)
	return in, nil
}

// Access rejects the request by the client address.
func (in *instance) Access(c gateway.Ctx) gateway.Reply {
	a := c.RemoteAddr()
	block := false
	if in.black != nil {
		block = in.black.Match(a)
	}
	if in.white != nil {
		block = !in.white.Match(a)
	}
	if block {
		return in.rejected
	}
	return gateway.Reply{}
}
