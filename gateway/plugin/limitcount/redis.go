package limitcount

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
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

// redisPool shares one client per redis address, database and password
// across instances and reloads.
type redisPool struct {
	mu      sync.Mutex
	clients map[string]*redisCounter
}

type redisCounter struct {
	c       redis.Scripter
	closer  func() error
	timeout time.Duration
}

func newRedisPool() *redisPool { return &redisPool{clients: map[string]*redisCounter{}} }

func (p *redisPool) get(c Conf) (*redisCounter, error) {
	timeout := time.Duration(c.RedisTimeout) * time.Millisecond
	if timeout <= 0 {
		timeout = time.Second
	}
	var id string
	if c.Policy == "redis-cluster" {
		id = "cluster " + strings.Join(c.RedisClusterNodes, ",") + " " + c.RedisPassword + " " + timeout.String()
	} else {
		port := c.RedisPort
		if port == 0 {
			port = 6379
		}
		id = net.JoinHostPort(c.RedisHost, strconv.Itoa(port)) + " " + strconv.Itoa(c.RedisDatabase) + " " + c.RedisPassword + " " + timeout.String()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if rc, ok := p.clients[id]; ok {
		return rc, nil
	}
	rc := &redisCounter{timeout: timeout}
	if c.Policy == "redis-cluster" {
		if len(c.RedisClusterNodes) < 2 {
			return nil, fmt.Errorf("redis_cluster_nodes needs at least 2 nodes")
		}
		cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.RedisClusterNodes, Password: c.RedisPassword,
			DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolSize: 100})
		rc.c, rc.closer = cl, cl.Close
	} else {
		port := c.RedisPort
		if port == 0 {
			port = 6379
		}
		cl := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(c.RedisHost, strconv.Itoa(port)), Password: c.RedisPassword,
			DB: c.RedisDatabase, DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolSize: 100})
		rc.c, rc.closer = cl, cl.Close
	}
	p.clients[id] = rc
	return rc, nil
}

func (p *redisPool) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first error
	for id, rc := range p.clients {
		if err := rc.closer(); err != nil && first == nil {
			first = err
		}
		delete(p.clients, id)
	}
	return first
}

func (rc *redisCounter) incoming(key string, limit int64, win time.Duration) (int64, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), rc.timeout)
	defer cancel()
	res, err := script.Run(ctx, rc.c, []string{keyPrefix + key}, limit-1, win.Milliseconds()).Slice()
	if err != nil {
		return 0, 0, fmt.Errorf("redis: %w", err)
	}
	if len(res) != 2 {
		return 0, 0, fmt.Errorf("redis: unexpected script reply %v", res)
	}
	remaining, err1 := toInt(res[0])
	ttl, err2 := toInt(res[1])
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("redis: unexpected script reply %v", res)
	}
	return remaining, time.Duration(ttl) * time.Millisecond, nil
}

func toInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, fmt.Errorf("unexpected %T", v)
}
