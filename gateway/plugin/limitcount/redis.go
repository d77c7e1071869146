package limitcount

import (
	"fmt"
	"time"

	"github.com/linkgate/linkgate/gateway/plugin/redis"
)

// script counts one request atomically: the first request of a window
// sets the counter to limit-1 with the window's expiry; later ones
// decrement. It returns the remaining count and the milliseconds left.
var script = redis.NewScript(`
local ttl = redis.call('pttl', KEYS[1])
if ttl < 0 then
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {ARGV[1], ARGV[2]}
end
return {redis.call('decr', KEYS[1]), ttl}
`)

// keyPrefix namespaces linkgate's counters in redis.
const keyPrefix = "linkgate:limit-count:v1:"

func incomingRedis(c *redis.Client, key string, limit int64, win time.Duration) (int64, time.Duration, error) {
	res, err := c.Ints(script, []string{keyPrefix + key}, limit-1, win.Milliseconds())
	if err != nil {
		return 0, 0, err
	}
	if len(res) != 2 {
		return 0, 0, fmt.Errorf("redis: unexpected script reply %v", res)
	}
	return res[0], time.Duration(res[1]) * time.Millisecond, nil
}
