// Package faultinjection is APISIX's fault-injection plugin: for a share
// of requests (percentage), or those matching vars, it delays them and/or
// answers them itself with a status and body instead of the upstream.
package faultinjection

import (
	"encoding/json"
	"math/rand/v2"
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
}

var (
	_ gateway.Factory     = (*Factory)(nil)
	_ gateway.ConfChecker = (*Factory)(nil)
)

// New returns the plugin factory.
func New() *Factory {
	return &Factory{sleep: time.Sleep, random: func() int { return 1 + rand.IntN(100) }}
}

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

var (
	varsDef = &gateway.Schema{Type: "array", MaxItems: 20, Items: &gateway.Schema{Type: "array"}}
	pctDef  = &gateway.Schema{Type: "integer", Minimum: gateway.Num(0), Maximum: gateway.Num(100)}
	schema  = &gateway.Schema{Type: "object", MinProperties: 1, Properties: map[string]*gateway.Schema{
		"abort": {Type: "object", Required: []string{"http_status"}, Properties: map[string]*gateway.Schema{
			"http_status": {Type: "integer", Minimum: gateway.Num(200)},
			"body":        {Type: "string", MinLength: 0},
			"percentage":  pctDef,
			"vars":        varsDef,
		}},
		"delay": {Type: "object", Required: []string{"duration"}, Properties: map[string]*gateway.Schema{
			"duration":   {Type: "number", Minimum: gateway.Num(0)},
			"percentage": pctDef,
			"vars":       varsDef,
		}},
	}}
)

// Schema is APISIX 2.14's.
func (*Factory) Schema() *gateway.Schema { return schema }

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
	delay   *when
	seconds time.Duration
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
			HTTPStatus int     `json:"http_status"`
			Body       *string `json:"body"`
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
	body := in.body
	if in.expand {
		body = []byte(c.Expand(string(in.body)))
	}
	return gateway.Reply{Status: in.status, Body: body, ContentType: "text/plain; charset=utf-8"}
}
