// Package trafficsplit is APISIX's traffic-split plugin: the first rule
// whose match (any of its vars expressions) holds — or that has no match —
// sends the request to one of its weighted upstreams: an upstream by id,
// an inline one, or the route's own. Weights are honoured exactly per
// cycle (smooth weighted round robin), as resty.roundrobin does, without
// a lock on the request path.
package trafficsplit

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/linkgate/linkgate/gateway"
)

// Name and Priority as APISIX.
const (
	Name     = "traffic-split"
	Priority = 966
)

// Factory makes traffic-split instances.
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
	upstreamSchema = gateway.SchemaOf(gateway.KindUpstream)
	schema         = &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
		"rules": {Type: "array", Items: &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
			"match": {Type: "array", Items: &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
				"vars": {Type: "array"},
			}}},
			"weighted_upstreams": {Type: "array", MinItems: 1, MaxItems: 20, Default: []any{map[string]any{"weight": 1}},
				Items: &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
					"upstream_id": upstreamSchema.Properties["id"],
					"upstream":    upstreamSchema,
					"weight":      {Type: "integer", Minimum: gateway.Num(0), Default: 1},
				}}},
		}}},
	}}
)

// Schema is APISIX 2.14's; an inline upstream has the upstream resource's schema.
func (*Factory) Schema() *gateway.Schema { return schema }

// CheckConf compiles the match expressions and checks inline upstreams as
// upstream resources are checked.
func (*Factory) CheckConf(c map[string]any) error {
	rules, _ := c["rules"].([]any)
	for _, r := range rules {
		rule := r.(map[string]any)
		matches, _ := rule["match"].([]any)
		for _, m := range matches {
			vars, _ := m.(map[string]any)["vars"].([]any)
			if _, err := gateway.ParseVars(vars); err != nil {
				return fmt.Errorf("failed to validate the 'vars' expression: %v", err)
			}
		}
		ups, _ := rule["weighted_upstreams"].([]any)
		for _, u := range ups {
			if up, ok := u.(map[string]any)["upstream"].(map[string]any); ok {
				if err := gateway.Check(gateway.KindUpstream, up, nil, nil); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

type rule struct {
	match []*gateway.Expr // nil: the rule always applies
	pick  *picker
}

type instance struct {
	rules []rule
	refs  []*gateway.UpstreamRef
}

var _ gateway.UpstreamChooser = (*instance)(nil)

// inlineTimeout is what APISIX gives a plugin upstream without a timeout.
var inlineTimeout = &gateway.Timeout{Connect: 15, Send: 15, Read: 15}

// New builds an instance for scope.
func (*Factory) New(raw json.RawMessage, scope gateway.Scope) (any, error) {
	var c struct {
		Rules []struct {
			Match []struct {
				Vars json.RawMessage `json:"vars"`
			} `json:"match"`
			WeightedUpstreams []struct {
				UpstreamID gateway.FlexID    `json:"upstream_id"`
				Upstream   *gateway.Upstream `json:"upstream"`
				Weight     *int              `json:"weight"`
			} `json:"weighted_upstreams"`
		} `json:"rules"`
	}
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	in := &instance{}
	for ri, r := range c.Rules {
		var ru rule
		for _, m := range r.Match {
			var vars []any
			if len(m.Vars) > 0 {
				v, err := gateway.DecodeJSON(m.Vars)
				if err != nil {
					return nil, err
				}
				vars, _ = v.([]any)
			}
			e, err := gateway.ParseVars(vars)
			if err != nil {
				return nil, err
			}
			ru.match = append(ru.match, e)
		}
		var choices []*gateway.UpstreamRef
		var weights []int
		wus := r.WeightedUpstreams
		if len(wus) == 0 {
			choices, weights = []*gateway.UpstreamRef{nil}, []int{1}
		}
		for ui, wu := range wus {
			var ref *gateway.UpstreamRef // nil: the route's
			switch {
			case wu.UpstreamID != "":
				ref = &gateway.UpstreamRef{ID: string(wu.UpstreamID), Key: "upstreams/" + string(wu.UpstreamID)}
			case wu.Upstream != nil:
				u := wu.Upstream
				if u.Timeout == nil {
					u.Timeout = inlineTimeout
				}
				ref = &gateway.UpstreamRef{Inline: u, Key: scope.String() + "#" + Name + "/" + strconv.Itoa(ri) + "/" + strconv.Itoa(ui)}
			}
			if ref != nil {
				in.refs = append(in.refs, ref)
			}
			w := 1
			if wu.Weight != nil {
				w = *wu.Weight
			}
			choices, weights = append(choices, ref), append(weights, w)
		}
		ru.pick = newPicker(choices, weights)
		in.rules = append(in.rules, ru)
	}
	return in, nil
}

// Upstreams lists every upstream the instance may choose.
func (in *instance) Upstreams() []*gateway.UpstreamRef { return in.refs }

// Access chooses the upstream of the first rule that applies.
func (in *instance) Access(c gateway.Ctx) gateway.Reply {
	for i := range in.rules {
		r := &in.rules[i]
		if r.match != nil && !anyHolds(r.match, c) {
			continue
		}
		c.SetUpstream(r.pick.next())
		return gateway.Reply{}
	}
	return gateway.Reply{}
}

func anyHolds(es []*gateway.Expr, c gateway.Ctx) bool {
	for _, e := range es {
		if e.Eval(c) {
			return true
		}
	}
	return false
}

// picker is smooth weighted round robin. Its cycle (one pick per unit of
// the weights' sum, after dividing by their gcd) is computed once when it
// is short enough, so a pick is one atomic add; longer cycles take a lock.
type picker struct {
	choices  []*gateway.UpstreamRef
	schedule []int32 // indexes into choices, one cycle
	n        atomic.Uint64

	mu      sync.Mutex
	weights []int
	current []int
	total   int
}

const maxSchedule = 4096

func newPicker(choices []*gateway.UpstreamRef, weights []int) *picker {
	p := &picker{choices: choices, weights: weights, current: make([]int, len(weights))}
	g := 0
	for _, w := range weights {
		g = gcd(g, w)
	}
	for i := range weights {
		if g > 1 {
			p.weights[i] /= g
		}
		p.total += p.weights[i]
	}
	if p.total > 0 && p.total <= maxSchedule {
		for range p.total {
			p.schedule = append(p.schedule, int32(p.smooth()))
		}
		clear(p.current)
	}
	return p
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// smooth is one step of nginx's smooth weighted round robin.
func (p *picker) smooth() int {
	best := -1
	for i, w := range p.weights {
		if w <= 0 {
			continue
		}
		p.current[i] += w
		if best < 0 || p.current[i] > p.current[best] {
			best = i
		}
	}
	if best >= 0 {
		p.current[best] -= p.total
	}
	return best
}

// next returns the chosen upstream (nil: the route's).
func (p *picker) next() *gateway.UpstreamRef {
	if p.schedule != nil {
		return p.choices[p.schedule[(p.n.Add(1)-1)%uint64(len(p.schedule))]]
	}
	p.mu.Lock()
	i := p.smooth()
	p.mu.Unlock()
	if i < 0 {
		return nil // every weight is 0: the route's upstream
	}
	return p.choices[i]
}
