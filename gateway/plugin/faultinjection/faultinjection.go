// Package faultinjection is APISIX's fault-injection plugin: for a share
// of requests (percentage), or those matching vars, it delays them and/or
// answers them itself with a status and body instead of the upstream.
package faultinjection

import (
	"encoding/json"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/linkgate/linkgate/gateway"
)

// Name and Priority as APISIX.
const (
	Name     = "fault-injection"
	Priority = 11000
)

// Factory makes fault-injection instances.
type Factory struct {
	sleep  func(time.Duration)
	random func() int // 1..100
	v3     bool
}

// Options configure the factory.
type Options struct {
	// V3 adds APISIX 3.x's abort.headers: response headers of an abort,
	// their $variables resolved (2.14 has none and ignores the field).
	V3 bool
}

var (
	_ gateway.Factory     = (*Factory)(nil)
	_ gateway.ConfChecker = (*Factory)(nil)
)

// New returns the plugin factory.
func New() *Factory { return NewWithOptions(Options{}) }

// NewWithOptions returns the plugin factory configured by o.
func NewWithOptions(o Options) *Factory {
	return &Factory{sleep: time.Sleep, random: func() int { return 1 + rand.IntN(100) }, v3: o.V3}
}

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

var (
	varsDef  = &gateway.Schema{Type: "array", MaxItems: 20, Items: &gateway.Schema{Type: "array"}}
	pctDef   = &gateway.Schema{Type: "integer", Minimum: gateway.Num(0), Maximum: gateway.Num(100)}
	schemaOf = func(abortHeaders *gateway.Schema) *gateway.Schema {
		abort := map[string]*gateway.Schema{
			"http_status": {Type: "integer", Minimum: gateway.Num(200)},
			"body":        {Type: "string", MinLength: 0},
			"percentage":  pctDef,
			"vars":        varsDef,
		}
		if abortHeaders != nil {
			abort["headers"] = abortHeaders
		}
		return &gateway.Schema{Type: "object", MinProperties: 1, Properties: map[string]*gateway.Schema{
			"abort": {Type: "object", Required: []string{"http_status"}, Properties: abort},
			"delay": {Type: "object", Required: []string{"duration"}, Properties: map[string]*gateway.Schema{
				"duration":   {Type: "number", Minimum: gateway.Num(0)},
				"percentage": pctDef,
				"vars":       varsDef,
			}},
		}}
	}
	schema   = schemaOf(nil)
	schemaV3 = schemaOf(&gateway.Schema{Type: "object", MinProperties: 1, PatternProperties: map[string]*gateway.Schema{
		"^[^:]+$": {OneOf: []*gateway.Schema{{Type: "string"}, {Type: "number"}}},
	}})
)

// Schema is APISIX 2.14's; under v3, 3.x's (abort.headers).
func (f *Factory) Schema() *gateway.Schema {
	if f.v3 {
		return schemaV3
	}
	return schema
}

// CheckConf compiles the vars expressions.
func (*Factory) CheckConf(c map[string]any) error {
	for _, k := range []string{"abort", "delay"} {
		m, _ := c[k].(map[string]any)
		vars, _ := m["vars"].([]any)
		for _, v := range vars {
			if _, err := gateway.ParseVars(v.([]any)); err != nil {
				return err
			}
		}
	}
	return nil
}

// when is a fault's trigger: a percentage (-1: always) and vars.
type when struct {
	percentage int
	vars       []*gateway.Expr // any holds; none: always
}

type instance struct {
	f       *Factory
	abort   *when
	status  int
	body    []byte
	expand  bool // body holds $variables
	headers []header
	delay   *when
	seconds time.Duration
}

// header is one of an abort's response headers (v3).
type header struct {
	name, value string
	expand      bool // value holds $variables
}

// New builds an instance.
func (f *Factory) New(raw json.RawMessage, _ gateway.Scope) (any, error) {
	type trigger struct {
		Percentage *int              `json:"percentage"`
		Vars       []json.RawMessage `json:"vars"`
	}
	var c struct {
		Abort *struct {
			trigger
			HTTPStatus int                        `json:"http_status"`
			Body       *string                    `json:"body"`
			Headers    map[string]json.RawMessage `json:"headers"`
		} `json:"abort"`
		Delay *struct {
			trigger
			Duration float64 `json:"duration"`
		} `json:"delay"`
	}
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	mk := func(t trigger) (*when, error) {
		w := &when{percentage: -1}
		if t.Percentage != nil {
			w.percentage = *t.Percentage
		}
		for _, v := range t.Vars {
			d, err := gateway.DecodeJSON(v)
			if err != nil {
				return nil, err
			}
			arr, _ := d.([]any)
			e, err := gateway.ParseVars(arr)
			if err != nil {
				return nil, err
			}
			w.vars = append(w.vars, e)
		}
		return w, nil
	}
	in := &instance{f: f}
	var err error
	if a := c.Abort; a != nil {
		if in.abort, err = mk(a.trigger); err != nil {
			return nil, err
		}
		in.status = a.HTTPStatus
		if a.Body != nil {
			in.body, in.expand = []byte(*a.Body), strings.Contains(*a.Body, "$")
		}
		if f.v3 {
			for _, name := range slices.Sorted(maps.Keys(a.Headers)) {
				// A string's $variables are resolved; a number is
				// sent as written.
				h := header{name: name, value: string(a.Headers[name])}
				var str string
				if json.Unmarshal(a.Headers[name], &str) == nil {
					h.value, h.expand = str, strings.Contains(str, "$")
				}
				in.headers = append(in.headers, h)
			}
		}
	}
	if d := c.Delay; d != nil {
		if in.delay, err = mk(d.trigger); err != nil {
			return nil, err
		}
		in.seconds = time.Duration(d.Duration * float64(time.Second))
	}
	return in, nil
}

// varsHold reports whether any vars expression holds (true without vars).
func (w *when) varsHold(c gateway.Ctx) bool {
	if w.vars == nil {
		return true
	}
	for _, e := range w.vars {
		if e.Eval(c) {
			return true
		}
	}
	return false
}

// sampled draws the percentage (always, without one).
func (w *when) sampled(f *Factory) bool { return w.percentage < 0 || f.random() <= w.percentage }

// Rewrite delays and/or aborts the request. Both faults' vars are read
// before either happens, as APISIX does.
func (in *instance) Rewrite(c gateway.Ctx) gateway.Reply {
	abortVars := in.abort == nil || in.abort.varsHold(c)
	delayVars := in.delay == nil || in.delay.varsHold(c)
	if in.delay != nil && in.delay.sampled(in.f) && delayVars {
		in.f.sleep(in.seconds)
	}
	if in.abort == nil || !in.abort.sampled(in.f) || !abortVars {
		return gateway.Reply{}
	}
	for _, h := range in.headers {
		v := h.value
		if h.expand {
			v = c.Expand(v)
		}
		c.SetResponseHeader(h.name, v)
	}
	body := in.body
	if in.expand {
		body = []byte(c.Expand(string(in.body)))
	}
	return gateway.Reply{Status: in.status, Body: body, ContentType: "text/plain; charset=utf-8"}
}
