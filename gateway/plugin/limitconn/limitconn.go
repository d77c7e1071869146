// Package limitconn is APISIX's limit-conn plugin: at most conn requests
// in flight per key, burst more delayed (by default_conn_delay per conn
// over, adapted to the measured latency unless only_use_default_delay),
// the rest rejected (resty.limit.conn). A request counts from its access
// phase to its log phase. Counts are kept locally, or in redis (policy
// redis, redis-cluster, as APISIX 3.x) where every gateway node shares
// them exactly, each key expiring key_ttl seconds after its last request
// in case a node died with requests in flight.
package limitconn

import (
	"encoding/json"
	"log/slog"
	"math"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/internal/limitkey"
	"github.com/linkgate/linkgate/gateway/plugin/internal/shardmap"
	"github.com/linkgate/linkgate/gateway/plugin/redis"
)

// Name and Priority as APISIX.
const (
	Name     = "limit-conn"
	Priority = 1003
)

// Factory makes limit-conn instances; it owns the counts, which outlive
// configuration reloads.
type Factory struct {
	log   *slog.Logger
	local *shardmap.Map[count]
	redis *redis.Pool
	sleep func(time.Duration)
	v3    bool // Options.V3
}

// Options configure the factory.
type Options struct {
	// V3 checks configurations with APISIX 3.x's schema wording: conn and
	// burst are each "one of" (3.x also takes a variable's name, and rules
	// instead of conn and burst: neither is supported, so both are
	// refused, as 3.x words the refusal).
	V3 bool
}

var _ gateway.Factory = (*Factory)(nil)

// New returns the plugin factory; its redis policies use pool's clients.
func New(logger *slog.Logger, pool *redis.Pool) *Factory {
	return NewWithOptions(logger, pool, Options{})
}

// NewWithOptions returns the plugin factory configured by o.
func NewWithOptions(logger *slog.Logger, pool *redis.Pool, o Options) *Factory {
	return &Factory{log: logger, redis: pool, sleep: time.Sleep, v3: o.V3,
		local: shardmap.New(func(c *count, _ int64) bool { return c.n <= 0 })}
}

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

var schema = redis.Schema(&gateway.Schema{Type: "object", Required: []string{"conn", "burst", "default_conn_delay", "key"}, Properties: map[string]*gateway.Schema{
	"conn":                   {Type: "integer", Minimum: gateway.Num(0), ExclusiveMin: true},
	"burst":                  {Type: "integer", Minimum: gateway.Num(0)},
	"default_conn_delay":     {Type: "number", Minimum: gateway.Num(0), ExclusiveMin: true},
	"only_use_default_delay": {Type: "boolean", Default: false},
	"key":                    {Type: "string"},
	"key_type":               {Type: "string", Enum: []any{"var", "var_combination"}, Default: "var"},
	"rejected_code":          {Type: "integer", Minimum: gateway.Num(200), Maximum: gateway.Num(599), Default: 503},
	"rejected_msg":           {Type: "string", MinLength: 1},
	"allow_degradation":      {Type: "boolean", Default: false},
	"key_ttl":                {Type: "integer", Default: 3600},
}})

var schemaV3 = redis.OneOfRequired(schema, "conn", "burst")

// Schema is APISIX 2.14's, with 3.x's policy, redis options and key_ttl;
// with Options.V3, 3.x's wording of it.
func (f *Factory) Schema() *gateway.Schema {
	if f.v3 {
		return schemaV3
	}
	return schema
}

// Conf is a validated configuration.
type Conf struct {
	Conn                int64   `json:"conn"`
	Burst               int64   `json:"burst"`
	DefaultConnDelay    float64 `json:"default_conn_delay"`
	OnlyUseDefaultDelay bool    `json:"only_use_default_delay"`
	KeyTTL              int     `json:"key_ttl"`
	limitkey.Conf
}

type instance struct {
	f *Factory
	c Conf
	limitkey.Limiter
	// unitDelay (float64 seconds, as bits) is the delay per conn over the
	// limit: default_conn_delay, moved halfway to each request's latency.
	unitDelay atomic.Uint64
}

type count struct{ n int64 }

// New builds an instance for scope.
func (f *Factory) New(raw json.RawMessage, scope gateway.Scope) (any, error) {
	c := Conf{Conf: limitkey.Defaults, KeyTTL: 3600}
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	l, err := limitkey.NewLimiter(Name, f.log, f.redis, scope, raw, c.Conf)
	if err != nil {
		return nil, err
	}
	in := &instance{f: f, c: c, Limiter: l}
	in.unitDelay.Store(math.Float64bits(c.DefaultConnDelay))
	return in, nil
}

// Access counts the request in, and delays or rejects it over the limit.
func (in *instance) Access(c gateway.Ctx) gateway.Reply {
	var arr [128]byte
	key := in.Key.Append(arr[:0], c)
	var conn int64
	var ok bool
	if in.Redis != nil {
		var err error
		if conn, ok, err = in.incomingRedis(string(key)); err != nil {
			return in.Failed(err)
		}
	} else {
		conn, ok = in.incoming(unsafe.String(unsafe.SliceData(key), len(key)))
	}
	if !ok {
		return in.Rejected
	}
	var delay time.Duration
	if conn > in.c.Conn {
		unit := math.Float64frombits(in.unitDelay.Load())
		delay = time.Duration(unit * float64((conn-1)/in.c.Conn) * float64(time.Second))
	}
	c.SetValue(in, int64(delay)) // counted in: the log phase counts it out
	if delay >= time.Millisecond {
		in.f.sleep(delay)
	}
	return gateway.Reply{}
}

func (in *instance) incoming(key string) (conn int64, ok bool) {
	limit := in.c.Conn + in.c.Burst
	in.f.local.Update(key, time.Now().UnixNano(), func(ct *count, _ bool) bool {
		if ct.n+1 <= limit {
			ct.n++
			conn, ok = ct.n, true
		}
		return true
	})
	return conn, ok
}

// Log counts a request counted in out, and learns its latency.
func (in *instance) Log(c gateway.Ctx, e *gateway.LogEntry) {
	delay, counted := c.Value(in)
	if !counted {
		return
	}
	var arr [128]byte
	key := in.Key.Append(arr[:0], c)
	if in.Redis != nil {
		if err := in.leavingRedis(string(key)); err != nil {
			in.f.log.Error("limit-conn failed to count a request out", "policy", in.c.Policy, "err", err)
		}
	} else {
		// A count at 0 stays for the next request; sweeps remove idle ones.
		in.f.local.Update(unsafe.String(unsafe.SliceData(key), len(key)), 0, func(ct *count, found bool) bool {
			ct.n--
			return found
		})
	}
	if in.c.OnlyUseDefaultDelay {
		return
	}
	latency := e.UpstreamTime
	if latency <= 0 {
		latency = e.RequestTime - time.Duration(delay)
	}
	for {
		old := in.unitDelay.Load()
		next := (latency.Seconds() + math.Float64frombits(old)) / 2
		if in.unitDelay.CompareAndSwap(old, math.Float64bits(next)) {
			return
		}
	}
}

// Scripts: count in (refusing over limit, refreshing the key's ttl) and out.
var (
	inScript = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n > tonumber(ARGV[1]) then
  redis.call('DECR', KEYS[1])
  return {0, n - 1}
end
redis.call('EXPIRE', KEYS[1], ARGV[2])
return {1, n}
`)
	outScript = redis.NewScript(`
local n = redis.call('DECR', KEYS[1])
if n <= 0 then
  redis.call('DEL', KEYS[1])
end
return {n}
`)
)

// keyPrefix namespaces linkgate's counts in redis.
const keyPrefix = "linkgate:limit-conn:v1:"

func (in *instance) incomingRedis(key string) (int64, bool, error) {
	res, err := in.Redis.Ints(inScript, []string{keyPrefix + key}, in.c.Conn+in.c.Burst, max(in.c.KeyTTL, 1))
	if err != nil {
		return 0, false, err
	}
	if len(res) != 2 {
		return 0, false, redis.ErrUnexpected
	}
	return res[1], res[0] == 1, nil
}

func (in *instance) leavingRedis(key string) error {
	_, err := in.Redis.Ints(outScript, []string{keyPrefix + key})
	return err
}
