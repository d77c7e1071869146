// Package limitreq is APISIX's limit-req plugin: a leaky bucket per key
// (resty.limit.req) admitting rate requests per second, delaying up to
// burst more so they leave at that rate (or not, with nodelay), and
// rejecting beyond. Buckets are kept locally, or in redis (policy redis,
// redis-cluster, as APISIX 3.x) where every gateway node shares them
// exactly: one atomic script per request on redis's own clock.
package limitreq

import (
	"encoding/json"
	"log/slog"
	"math"
	"time"
	"unsafe"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/internal/limitkey"
	"github.com/linkgate/linkgate/gateway/plugin/internal/shardmap"
	"github.com/linkgate/linkgate/gateway/plugin/redis"
)

// Name and Priority as APISIX.
const (
	Name     = "limit-req"
	Priority = 1001
)

// Factory makes limit-req instances; it owns the buckets, which outlive
// configuration reloads.
type Factory struct {
	log   *slog.Logger
	local *shardmap.Map[bucket]
	redis *redis.Pool
	now   func() time.Time
	sleep func(time.Duration)
	// redisNow: when set, redis scripts use this clock instead of redis's (tests).
	redisNow func() time.Time
}

var _ gateway.Factory = (*Factory)(nil)

// New returns the plugin factory; its redis policies use pool's clients.
func New(logger *slog.Logger, pool *redis.Pool) *Factory {
	return &Factory{log: logger, redis: pool, now: time.Now, sleep: time.Sleep,
		local: shardmap.New(func(b *bucket, now int64) bool { return now >= b.empty })}
}

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

var schema = redis.Schema(&gateway.Schema{Type: "object", Required: []string{"rate", "burst", "key"}, Properties: map[string]*gateway.Schema{
	"rate":              {Type: "number", Minimum: gateway.Num(0), ExclusiveMin: true},
	"burst":             {Type: "number", Minimum: gateway.Num(0)},
	"key":               {Type: "string"},
	"key_type":          {Type: "string", Enum: []any{"var", "var_combination"}, Default: "var"},
	"rejected_code":     {Type: "integer", Minimum: gateway.Num(200), Maximum: gateway.Num(599), Default: 503},
	"rejected_msg":      {Type: "string", MinLength: 1},
	"nodelay":           {Type: "boolean", Default: false},
	"allow_degradation": {Type: "boolean", Default: false},
}})

// Schema is APISIX 2.14's, with 3.x's policy and redis options.
func (*Factory) Schema() *gateway.Schema { return schema }

// Conf is a validated configuration.
type Conf struct {
	Rate    float64 `json:"rate"`
	Burst   float64 `json:"burst"`
	NoDelay bool    `json:"nodelay"`
	limitkey.Conf
}

type instance struct {
	f *Factory
	c Conf
	limitkey.Limiter
}

// New builds an instance for scope.
func (f *Factory) New(raw json.RawMessage, scope gateway.Scope) (any, error) {
	c := Conf{Conf: limitkey.Defaults}
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	l, err := limitkey.NewLimiter(Name, f.log, f.redis, scope, raw, c.Conf)
	if err != nil {
		return nil, err
	}
	return &instance{f: f, c: c, Limiter: l}, nil
}

// bucket is one key's state: how many requests over the rate are queued
// (excess, in requests) as of last, and when it drains empty.
type bucket struct {
	excess float64
	last   int64 // unix nanoseconds
	empty  int64
}

// Leak is resty.limit.req's step: the bucket drains at rate per second
// since last; the request adds one. It reports the new excess, and false
// when that is over burst (the request is rejected and the bucket kept).
func Leak(excess float64, elapsed time.Duration, rate, burst float64) (float64, bool) {
	e := max(excess-rate*math.Abs(elapsed.Seconds())+1, 0)
	return e, e <= burst
}

// Access admits, delays or rejects the request.
func (in *instance) Access(c gateway.Ctx) gateway.Reply {
	var arr [128]byte
	key := in.Key.Append(arr[:0], c)
	var excess float64
	var ok bool
	if in.Redis != nil {
		var err error
		if excess, ok, err = in.incomingRedis(string(key)); err != nil {
			return in.Failed(err)
		}
	} else {
		excess, ok = in.incoming(unsafe.String(unsafe.SliceData(key), len(key)))
	}
	if !ok {
		return in.Rejected
	}
	if delay := time.Duration(excess / in.c.Rate * float64(time.Second)); delay >= time.Millisecond && !in.c.NoDelay {
		in.f.sleep(delay)
	}
	return gateway.Reply{}
}

func (in *instance) incoming(key string) (excess float64, ok bool) {
	now := in.f.now().UnixNano()
	in.f.local.Update(key, now, func(b *bucket, found bool) bool {
		if found {
			excess, ok = Leak(b.excess, time.Duration(now-b.last), in.c.Rate, in.c.Burst)
		} else {
			excess, ok = 0, true
		}
		if ok {
			b.excess, b.last = excess, now
			b.empty = now + int64(excess/in.c.Rate*float64(time.Second))
		}
		return ok || found
	})
	return excess, ok
}

// script is Leak in redis, in resty.limit.req's units (thousandths of a
// request): the bucket is a hash {excess, last} expiring when drained.
// now is redis's clock (ARGV[3] < 0) or the caller's, in milliseconds.
var script = redis.NewScript(`
local rate, burst, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
local v = redis.call('HMGET', KEYS[1], 'excess', 'last')
local excess = 0
if v[1] and v[2] then
  excess = math.max(tonumber(v[1]) - rate * math.abs(now - tonumber(v[2])) / 1000 + 1000, 0)
  if excess > burst then
    return {0, math.floor(excess)}
  end
end
redis.call('HSET', KEYS[1], 'excess', tostring(excess), 'last', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.floor(excess * 1000 / rate) + 1000)
return {1, math.floor(excess)}
`)

// keyPrefix namespaces linkgate's buckets in redis.
const keyPrefix = "linkgate:limit-req:v1:"

func (in *instance) incomingRedis(key string) (float64, bool, error) {
	now := int64(-1)
	if in.f.redisNow != nil {
		now = in.f.redisNow().UnixMilli()
	}
	res, err := in.Redis.Ints(script, []string{keyPrefix + key}, in.c.Rate*1000, in.c.Burst*1000, now)
	if err != nil {
		return 0, false, err
	}
	if len(res) != 2 {
		return 0, false, redis.ErrUnexpected
	}
	return float64(res[1]) / 1000, res[0] == 1, nil
}
