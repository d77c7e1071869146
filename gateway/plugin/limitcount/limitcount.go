// Package limitcount is APISIX's limit-count plugin: at most count requests
// per key in a fixed window of time_window seconds that starts at the
// key's first request. Counters are kept locally (policy local) or in
// redis (policy redis, redis-cluster), where every gateway node shares
// them exactly: one atomic script per request, keys built from the stable
// id of the resource the plugin is configured on plus a hash of its
// configuration — never from a node-local config version (APISIX #6760).
package limitcount

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/internal/limitkey"
	"github.com/linkgate/linkgate/gateway/plugin/redis"
)

// Name and Priority as APISIX.
const (
	Name     = "limit-count"
	Priority = 1002
)

// Factory makes limit-count instances; it owns the counters, which outlive
// configuration reloads.
type Factory struct {
	log   *slog.Logger
	local *localStore
	redis *redis.Pool
	now   func() time.Time

	mu     sync.Mutex
	groups map[string]groupConf // the first configuration checked per group
	v3     bool                 // Options.V3
}

// Options configure the factory.
type Options struct {
	// V3 checks configurations with APISIX 3.x's schema wording: count and
	// time_window are each "one of" (3.x also takes a variable's name, and
	// a rules list instead of both: neither is supported, so both are
	// refused, as 3.x words the refusal).
	V3 bool
}

// groupConf is a group's configuration as first checked, remembered for
// groupTTL as APISIX's plugin lrucache keeps it.
type groupConf struct {
	conf map[string]any
	at   time.Time
}

const groupTTL = 5 * time.Minute

var _ gateway.Factory = (*Factory)(nil)

// New returns the plugin factory; its redis policies use pool's clients.
func New(logger *slog.Logger, pool *redis.Pool) *Factory {
	return NewWithOptions(logger, pool, Options{})
}

// NewWithOptions returns the plugin factory configured by o.
func NewWithOptions(logger *slog.Logger, pool *redis.Pool, o Options) *Factory {
	return &Factory{log: logger, local: newLocalStore(), redis: pool, now: time.Now, v3: o.V3}
}

func (f *Factory) Name() string  { return Name }
func (f *Factory) Priority() int { return Priority }

var schema = redis.Schema(&gateway.Schema{Type: "object", Required: []string{"count", "time_window"}, Properties: map[string]*gateway.Schema{
	"count":                   {Type: "integer", Minimum: gateway.Num(0), ExclusiveMin: true},
	"time_window":             {Type: "integer", Minimum: gateway.Num(0), ExclusiveMin: true},
	"group":                   {Type: "string"},
	"key_type":                {Type: "string", Enum: []any{"var", "var_combination", "constant"}, Default: "var"},
	"key":                     {Type: "string", Default: "remote_addr"},
	"rejected_code":           {Type: "integer", Minimum: gateway.Num(200), Maximum: gateway.Num(599), Default: 503},
	"rejected_msg":            {Type: "string", MinLength: 1},
	"allow_degradation":       {Type: "boolean", Default: false},
	"show_limit_quota_header": {Type: "boolean", Default: true},
}})

var schemaV3 = redis.OneOfRequired(schema, "count", "time_window")

// Schema is APISIX 2.14's, or with Options.V3 3.x's wording of it.
func (f *Factory) Schema() *gateway.Schema {
	if f.v3 {
		return schemaV3
	}
	return schema
}

var groupPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// CheckConf checks the group's name, and that every configuration of a
// group is the same as APISIX's check_schema does: the first one checked
// is remembered for five minutes, and one that differs from it in any
// schema field is "group conf mismatched".
func (f *Factory) CheckConf(c map[string]any) error {
	g, ok := c["group"].(string)
	if !ok {
		return nil
	}
	if !groupPattern.MatchString(g) {
		return fmt.Errorf("property \"group\" validation failed: failed to match pattern %q with %q", groupPattern.String(), g)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	prev, ok := f.groups[g]
	if !ok || now.Sub(prev.at) >= groupTTL {
		if f.groups == nil {
			f.groups = map[string]groupConf{}
		}
		f.groups[g] = groupConf{conf: c, at: now}
		return nil
	}
	for _, field := range groupFields {
		if !reflect.DeepEqual(prev.conf[field], c[field]) {
			return errors.New("group conf mismatched")
		}
	}
	return nil
}

// groupFields are the fields compared within a group: the schema's
// properties and the redis policies'.
var groupFields = func() []string {
	var out []string
	var walk func(s *gateway.Schema)
	walk = func(s *gateway.Schema) {
		if s == nil {
			return
		}
		for k := range s.Properties {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
		walk(s.Then)
		walk(s.Else)
	}
	walk(schema)
	slices.Sort(out)
	return out
}()

// Conf is a validated configuration.
type Conf struct {
	Count                int64  `json:"count"`
	TimeWindow           int64  `json:"time_window"`
	Group                string `json:"group"`
	KeyType              string `json:"key_type"`
	Key                  string `json:"key"`
	RejectedCode         int    `json:"rejected_code"`
	RejectedMsg          string `json:"rejected_msg"`
	AllowDegradation     bool   `json:"allow_degradation"`
	ShowLimitQuotaHeader *bool  `json:"show_limit_quota_header"`
	redis.Conf
}

type instance struct {
	f           *Factory
	c           Conf
	key         limitkey.Key
	window      time.Duration
	rejected    gateway.Reply
	failed      gateway.Reply
	showHeaders bool
	local       *localStore   // policy local
	redis       *redis.Client // policy redis, redis-cluster
}

// New builds an instance for scope.
func (f *Factory) New(raw json.RawMessage, scope gateway.Scope) (any, error) {
	var c Conf
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	if c.KeyType == "" {
		c.KeyType = "var"
	}
	if c.Key == "" {
		c.Key = "remote_addr"
	}
	if c.RejectedCode == 0 {
		c.RejectedCode = 503
	}
	in := &instance{f: f, c: c, window: time.Duration(c.TimeWindow) * time.Second,
		showHeaders: c.ShowLimitQuotaHeader == nil || *c.ShowLimitQuotaHeader}
	in.key = limitkey.New(scope, raw, c.KeyType, c.Key, c.Group)
	in.rejected = limitkey.Rejected(c.RejectedCode, c.RejectedMsg)
	in.failed = gateway.JSONReply(500, "error_msg", "failed to limit count")
	if c.Shared() {
		rc, err := f.redis.Client(c.Conf)
		if err != nil {
			return nil, err
		}
		in.redis = rc
	} else {
		in.local = f.local
	}
	return in, nil
}

const (
	headerLimit     = "X-RateLimit-Limit"
	headerRemaining = "X-RateLimit-Remaining"
	headerReset     = "X-RateLimit-Reset"
)

// Access counts the request and rejects it over the limit.
func (in *instance) Access(c gateway.Ctx) gateway.Reply {
	var (
		remaining int64
		reset     time.Duration
		err       error
	)
	// The key in a stack buffer: the local store copies it only when it
	// creates a counter, so counting allocates nothing.
	var arr [128]byte
	key := in.key.Append(arr[:0], c)
	if in.local != nil {
		remaining, reset = in.local.incoming(b2s(key), in.c.Count, in.window, in.f.now())
	} else {
		remaining, reset, err = incomingRedis(in.redis, string(key), in.c.Count, in.window)
	}
	if err != nil {
		if in.c.AllowDegradation {
			return gateway.Reply{}
		}
		in.f.log.Error("limit-count failed", "policy", in.c.Policy, "err", err)
		return in.failed
	}
	if in.showHeaders {
		c.SetResponseHeaderInt(headerLimit, in.c.Count)
		c.SetResponseHeaderInt(headerRemaining, max(remaining, 0))
		c.SetResponseHeaderInt(headerReset, int64((reset+time.Second-1)/time.Second))
	}
	if remaining < 0 {
		return in.rejected
	}
	return gateway.Reply{}
}
