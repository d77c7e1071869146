// Package limitkey is what the rate-limiting plugins (limit-count,
// limit-req, limit-conn) share about the key they count a request under:
// the configured variable (key_type var), template (var_combination) or
// constant, the client address when that is empty, and a prefix naming
// the plugin instance stably — the resource it is configured on and a
// hash of its configuration, or a group — never a node-local version, so
// every node counts the same key (APISIX #6760). And their rejection,
// and for limit-req and limit-conn the rest of an instance's plumbing:
// their common configuration, the redis client and its failure reply.
package limitkey

import (
	"encoding/json"
	"log/slog"
	"strconv"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/redis"
)

// Key builds the counter key of a request.
type Key struct {
	prefix string
	typ    string // var, var_combination, constant
	key    string
}

// New returns the key of an instance configured with raw on scope; group,
// if set, replaces the instance's identity (limit-count's shared groups).
func New(scope gateway.Scope, raw json.RawMessage, keyType, key, group string) Key {
	k := Key{typ: keyType, key: key}
	if group != "" {
		k.prefix = "group:" + group + ":"
	} else {
		k.prefix = scope.String() + ":" + strconv.FormatUint(uint64(gateway.ConfHash(raw)), 16) + ":"
	}
	return k
}

// Append appends the request's key to dst: into a stack buffer, it costs
// no allocation unless key_type is var_combination.
func (k Key) Append(dst []byte, c gateway.Ctx) []byte {
	var v string
	switch k.typ {
	case "constant":
		v = k.key
	case "var_combination":
		// As resolve_var's n_resolved: no variable set, no key.
		if s, n := gateway.ExpandVarsN(k.key, c); n > 0 {
			v = s
		}
	default:
		v = c.Var(k.key)
	}
	if v == "" {
		v = c.Var("remote_addr")
	}
	return append(append(dst, k.prefix...), v...)
}

// Rejected is the reply over the limit: rejected_code, with
// {"error_msg": rejected_msg} when one is set.
func Rejected(code int, msg string) gateway.Reply {
	if msg != "" {
		return gateway.JSONReply(code, "error_msg", msg)
	}
	return gateway.Reply{Status: code}
}

// Conf is the configuration limit-req and limit-conn share.
type Conf struct {
	Key              string `json:"key"`
	KeyType          string `json:"key_type"`
	RejectedCode     int    `json:"rejected_code"`
	RejectedMsg      string `json:"rejected_msg"`
	AllowDegradation bool   `json:"allow_degradation"`
	redis.Conf
}

// Defaults is Conf's schema defaults: key_type var, rejected_code 503.
var Defaults = Conf{KeyType: "var", RejectedCode: 503}

// Limiter is a limit-req or limit-conn instance's plumbing: its key, its
// rejection and, for a shared policy, its redis client.
type Limiter struct {
	Key      Key
	Rejected gateway.Reply
	Redis    *redis.Client // nil: the counts are local
	plugin   string
	log      *slog.Logger
	c        Conf
}

// NewLimiter returns the plumbing of plugin's instance configured with
// raw (decoded as c) on scope; a shared policy takes its client from pool.
func NewLimiter(plugin string, log *slog.Logger, pool *redis.Pool, scope gateway.Scope, raw json.RawMessage, c Conf) (Limiter, error) {
	l := Limiter{Key: New(scope, raw, c.KeyType, c.Key, ""), Rejected: Rejected(c.RejectedCode, c.RejectedMsg),
		plugin: plugin, log: log, c: c}
	if c.Shared() {
		rc, err := pool.Client(c.Conf)
		if err != nil {
			return Limiter{}, err
		}
		l.Redis = rc
	}
	return l, nil
}

// Failed logs a redis failure and returns the reply to it: none (the
// request passes uncounted) with allow_degradation, else a 500.
func (l *Limiter) Failed(err error) gateway.Reply {
	l.log.Error(l.plugin+" failed", "policy", l.c.Policy, "err", err)
	if l.c.AllowDegradation {
		return gateway.Reply{}
	}
	return gateway.Reply{Status: 500}
}
