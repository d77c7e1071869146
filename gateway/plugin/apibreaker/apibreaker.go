// Package apibreaker is APISIX's api-breaker plugin: a circuit breaker
// keyed by the request's host and URI. Upstream answers with an
// unhealthy status are counted; every unhealthy.failures of them opens
// the breaker for 2^(count/failures) seconds (at most max_breaker_sec),
// during which requests get break_response_code without reaching the
// upstream; healthy.successes healthy answers in a row close it and
// forget the count.
//
// As APISIX's shared dictionary, the state is the process's, not the
// route's: routes with the plugin share it for the same host and URI, and
// it survives reloads. APISIX's dictionary evicts its least recently used
// keys when full; here a key untouched for an hour, whose breaker is
// closed, is dropped.
package apibreaker

import (
	"encoding/json"
	"slices"
	"time"
	"unsafe"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/internal/shardmap"
)

// Name and Priority as APISIX.
const (
	Name     = "api-breaker"
	Priority = 1005
)

// idle is how long an untouched key with a closed breaker is kept.
const idle = int64(time.Hour)

// Factory makes api-breaker instances; it holds the breakers' state.
type Factory struct {
	now   func() time.Time
	state *shardmap.Map[breaker]
}

var (
	_ gateway.Factory  = (*Factory)(nil)
	_ gateway.Accessor = (*instance)(nil)
	_ gateway.Logger   = (*instance)(nil)
)

// breaker is one host and URI's state: APISIX's unhealthy-, healthy- and
// unhealthy-lasttime keys.
type breaker struct {
	unhealthy, healthy int64
	// opened is when the breaker last opened (unix seconds), valid until
	// openedTTL (APISIX sets lasttime with max_breaker_sec as its TTL).
	opened, openedTTL int64
	touched           int64 // unix nanoseconds
}

// New returns the plugin factory; now is the clock (time.Now if nil).
func New(now func() time.Time) *Factory {
	if now == nil {
		now = time.Now
	}
	return &Factory{now: now, state: shardmap.New(func(b *breaker, now int64) bool {
		return now-b.touched > idle && now/int64(time.Second) > b.openedTTL
	})}
}

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

func statuses(min, max float64, def int) *gateway.Schema {
	return &gateway.Schema{Type: "array", MinItems: 1, UniqueItems: true, Default: []any{def},
		Items: &gateway.Schema{Type: "integer", Minimum: gateway.Num(min), Maximum: gateway.Num(max)}}
}

var schema = &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
	"break_response_code": {Type: "integer", Minimum: gateway.Num(200), Maximum: gateway.Num(599)},
	"break_response_body": {Type: "string"},
	"break_response_headers": {Type: "array", Items: &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
		"key":   {Type: "string", MinLength: 1},
		"value": {Type: "string", MinLength: 1},
	}, Required: []string{"key", "value"}}},
	"max_breaker_sec": {Type: "integer", Minimum: gateway.Num(3), Default: 300},
	"unhealthy": {Type: "object", Properties: map[string]*gateway.Schema{
		"http_statuses": statuses(500, 599, 500),
		"failures":      {Type: "integer", Minimum: gateway.Num(1), Default: 3},
	}, Default: map[string]any{"http_statuses": []any{500}, "failures": 3}},
	"healthy": {Type: "object", Properties: map[string]*gateway.Schema{
		"http_statuses": statuses(200, 499, 200),
		"successes":     {Type: "integer", Minimum: gateway.Num(1), Default: 3},
	}, Default: map[string]any{"http_statuses": []any{200}, "successes": 3}},
}, Required: []string{"break_response_code"}}

// Schema is APISIX 3.x's.
func (*Factory) Schema() *gateway.Schema { return schema }

type header struct{ key, value string }

type instance struct {
	f          *Factory
	maxBreaker int64
	failures   int64
	successes  int64
	unhealthy  []int
	healthy    []int
	headers    []header
	broken     gateway.Reply
}

// New builds an instance.
func (f *Factory) New(raw json.RawMessage, _ gateway.Scope) (any, error) {
	var c struct {
		Code      int     `json:"break_response_code"`
		Body      *string `json:"break_response_body"`
		MaxSec    int64   `json:"max_breaker_sec"`
		Unhealthy struct {
			Statuses []int `json:"http_statuses"`
			Failures int64 `json:"failures"`
		} `json:"unhealthy"`
		Healthy struct {
			Statuses  []int `json:"http_statuses"`
			Successes int64 `json:"successes"`
		} `json:"healthy"`
	}
	c.MaxSec = 300
	c.Unhealthy.Statuses, c.Unhealthy.Failures = []int{500}, 3
	c.Healthy.Statuses, c.Healthy.Successes = []int{200}, 3
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	var hdr struct {
		Headers []struct {
			Key   string `json:"key"`
			Value string `json:"value"`
		} `json:"break_response_headers"`
	}
	if err := gateway.Unmarshal(raw, &hdr); err != nil {
		return nil, err
	}
	in := &instance{f: f, maxBreaker: c.MaxSec, failures: c.Unhealthy.Failures, successes: c.Healthy.Successes,
		unhealthy: c.Unhealthy.Statuses, healthy: c.Healthy.Statuses, broken: gateway.Reply{Status: c.Code}}
	if c.Body != nil {
		// APISIX sends the body as given, and the headers only with one.
		in.broken.Body, in.broken.ContentType = []byte(*c.Body), "text/plain"
		for _, h := range hdr.Headers {
			in.headers = append(in.headers, header{h.Key, h.Value})
		}
	}
	return in, nil
}

// key is APISIX's "<host><uri>", kept for the log phase (a later plugin
// may change the URI sent upstream).
func (in *instance) key(c gateway.Ctx) string {
	if k, ok := c.Text(in); ok {
		return k
	}
	host, uri := c.Var("host"), c.Var("uri")
	b := c.Buffer(len(host) + len(uri))[:0]
	b = append(append(b, host...), uri...)
	k := unsafe.String(unsafe.SliceData(b), len(b)) // the request's buffer; shardmap copies a key it keeps
	c.SetText(in, k)
	return k
}

// Access answers break_response_code while the breaker is open.
func (in *instance) Access(c gateway.Ctx) gateway.Reply {
	now := in.f.now()
	sec := now.Unix()
	open := false
	in.f.state.UpdateExisting(in.key(c), func(b *breaker) bool {
		if b.unhealthy == 0 || b.opened == 0 || sec > b.openedTTL {
			return true
		}
		times := max(b.unhealthy/in.failures, 1)
		window := in.maxBreaker
		if times < 62 && int64(1)<<times < window {
			window = int64(1) << times
		}
		open = b.opened+window >= sec
		return true
	})
	if !open {
		return gateway.Reply{}
	}
	for _, h := range in.headers {
		c.AddResponseHeader(h.key, c.Expand(h.value))
	}
	return in.broken
}

// Log counts the upstream's answer.
func (in *instance) Log(c gateway.Ctx, e *gateway.LogEntry) {
	status := e.UpstreamStatus
	if status == 0 {
		return
	}
	bad := slices.Contains(in.unhealthy, status)
	if !bad && !slices.Contains(in.healthy, status) {
		return
	}
	now := in.f.now()
	if bad {
		in.f.state.Update(in.key(c), now.UnixNano(), func(b *breaker, _ bool) bool {
			b.unhealthy++
			b.healthy = 0
			b.touched = now.UnixNano()
			if b.unhealthy%in.failures == 0 {
				b.opened, b.openedTTL = now.Unix(), now.Unix()+in.maxBreaker
			}
			return true
		})
		return
	}
	in.f.state.UpdateExisting(in.key(c), func(b *breaker) bool {
		b.healthy++
		b.touched = now.UnixNano()
		// enough successes: back to normal, the key forgotten
		return b.healthy < in.successes
	})
}
