// Package redis is what linkgate's rate-limiting plugins (limit-count,
// limit-req, limit-conn) share to keep their state in redis, so that every
// gateway node counts exactly the same: the configuration (APISIX's
// "policy" and redis_* fields, their schema and defaults), and a pool of
// clients shared by every plugin instance with the same connection
// options, across configuration reloads. Connection options live here
// only: a new one is added once for all three plugins.
//
// TLS and ACL users are APISIX 3.x's redis_ssl, redis_ssl_verify and
// redis_username (redis_cluster_ssl, redis_cluster_ssl_verify for a
// cluster), with its defaults: TLS off, and when on, the certificate not
// verified unless asked. A verified certificate must chain to the pool's
// roots (the gateway's --ssl-trusted-certificate, APISIX's
// apisix.ssl.ssl_trusted_certificate) or, without them, the system roots,
// and name the host dialled.
package redis

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/linkgate/linkgate/gateway"
)

// Policies.
const (
	Local   = "local"
	Redis   = "redis"
	Cluster = "redis-cluster"
)

// Conf is the policy and connection part of a plugin's configuration, as
// validated by a schema made with Schema (defaults filled in).
type Conf struct {
	Policy            string   `json:"policy"`
	RedisHost         string   `json:"redis_host"`
	RedisPort         int      `json:"redis_port"`
	RedisUsername     string   `json:"redis_username"`
	RedisPassword     string   `json:"redis_password"`
	RedisDatabase     int      `json:"redis_database"`
	RedisTimeout      int      `json:"redis_timeout"` // milliseconds
	RedisClusterNodes []string `json:"redis_cluster_nodes"`
	RedisClusterName  string   `json:"redis_cluster_name"`
	RedisSSL          bool     `json:"redis_ssl"`
	RedisSSLVerify    bool     `json:"redis_ssl_verify"`
	ClusterSSL        bool     `json:"redis_cluster_ssl"`
	ClusterSSLVerify  bool     `json:"redis_cluster_ssl_verify"`
}

// Shared reports whether the policy keeps state in redis.
func (c Conf) Shared() bool { return c.Policy == Redis || c.Policy == Cluster }

// OneOfRequired returns s as APISIX 3.x's limit plugins word it: its
// required list moved into a one-branch oneOf (3.x's second branch,
// "rules", is not supported) and each of props a oneOf of its own schema
// (3.x's other branch, a variable's name, is not supported either), so a
// missing or invalid value is "value should match only one schema, but
// matches none" as in 3.x.
func OneOfRequired(s *gateway.Schema, props ...string) *gateway.Schema {
	c := *s
	c.Properties = maps.Clone(s.Properties)
	for _, p := range props {
		c.Properties[p] = &gateway.Schema{OneOf: []*gateway.Schema{s.Properties[p]}}
	}
	c.OneOf = []*gateway.Schema{{Required: s.Required}}
	c.Required = nil
	return &c
}

// Schema returns s with the "policy" property and, as APISIX's if/then/else,
// the redis_* properties each policy requires, with their defaults.
func Schema(s *gateway.Schema) *gateway.Schema {
	s.Properties = maps.Clone(s.Properties)
	s.Properties["policy"] = &gateway.Schema{Type: "string", Enum: []any{Local, Redis, Cluster}, Default: Local}
	s.If = policyIs(Redis)
	s.Then = &gateway.Schema{Required: []string{"redis_host"}, Properties: map[string]*gateway.Schema{
		"redis_host":       {Type: "string", MinLength: 2},
		"redis_port":       {Type: "integer", Minimum: gateway.Num(1), Default: 6379},
		"redis_username":   {Type: "string", MinLength: 1},
		"redis_password":   {Type: "string", MinLength: 0},
		"redis_database":   {Type: "integer", Minimum: gateway.Num(0), Default: 0},
		"redis_timeout":    {Type: "integer", Minimum: gateway.Num(1), Default: 1000},
		"redis_ssl":        {Type: "boolean", Default: false},
		"redis_ssl_verify": {Type: "boolean", Default: false},
	}}
	s.Else = &gateway.Schema{If: policyIs(Cluster), Then: &gateway.Schema{
		Required: []string{"redis_cluster_nodes", "redis_cluster_name"},
		Properties: map[string]*gateway.Schema{
			"redis_cluster_nodes":      {Type: "array", MinItems: 2, Items: &gateway.Schema{Type: "string", MinLength: 2, MaxLength: 100}},
			"redis_password":           {Type: "string", MinLength: 0},
			"redis_timeout":            {Type: "integer", Minimum: gateway.Num(1), Default: 1000},
			"redis_cluster_name":       {Type: "string"},
			"redis_cluster_ssl":        {Type: "boolean", Default: false},
			"redis_cluster_ssl_verify": {Type: "boolean", Default: false},
		},
	}}
	return s
}

func policyIs(p string) *gateway.Schema {
	return &gateway.Schema{Properties: map[string]*gateway.Schema{"policy": {Enum: []any{p}}}}
}

// Pool shares one client per set of connection options.
type Pool struct {
	roots   *x509.CertPool // nil: the system roots
	mu      sync.Mutex
	clients map[string]*Client
}

// NewPool returns an empty pool verifying TLS servers against the system roots.
func NewPool() *Pool { return NewPoolWithRoots(nil) }

// NewPoolWithRoots returns an empty pool verifying TLS servers against
// roots (nil: the system roots).
func NewPoolWithRoots(roots *x509.CertPool) *Pool {
	return &Pool{roots: roots, clients: map[string]*Client{}}
}

// tlsConfig is the client TLS configuration for ssl and verify, nil
// without TLS. The server name is the host dialled (crypto/tls takes it
// from the address).
func (p *Pool) tlsConfig(ssl, verify bool) *tls.Config {
	if !ssl {
		return nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: p.roots, InsecureSkipVerify: !verify}
}

// Client runs scripts on one redis server or cluster.
type Client struct {
	c       goredis.Scripter
	closer  func() error
	timeout time.Duration
}

// Client returns the shared client for c's connection options.
func (p *Pool) Client(c Conf) (*Client, error) {
	timeout := time.Duration(c.RedisTimeout) * time.Millisecond
	if timeout <= 0 {
		timeout = time.Second
	}
	port := c.RedisPort
	if port == 0 {
		port = 6379
	}
	addr := net.JoinHostPort(c.RedisHost, strconv.Itoa(port))
	var id string
	switch c.Policy {
	case Cluster:
		if len(c.RedisClusterNodes) < 2 {
			return nil, fmt.Errorf("redis_cluster_nodes needs at least 2 nodes")
		}
		id = fmt.Sprintf("cluster %s %q %v %t %t", strings.Join(c.RedisClusterNodes, ","), c.RedisPassword, timeout, c.ClusterSSL, c.ClusterSSLVerify)
	case Redis:
		id = fmt.Sprintf("%s %d %q %q %v %t %t", addr, c.RedisDatabase, c.RedisUsername, c.RedisPassword, timeout, c.RedisSSL, c.RedisSSLVerify)
	default:
		return nil, fmt.Errorf("policy %q keeps no state in redis", c.Policy)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if cl, ok := p.clients[id]; ok {
		return cl, nil
	}
	cl := &Client{timeout: timeout}
	if c.Policy == Cluster {
		rc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.RedisClusterNodes, Password: c.RedisPassword,
			TLSConfig:   p.tlsConfig(c.ClusterSSL, c.ClusterSSLVerify),
			DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolSize: 100})
		cl.c, cl.closer = rc, rc.Close
	} else {
		rc := goredis.NewClient(&goredis.Options{Addr: addr, Username: c.RedisUsername, Password: c.RedisPassword, DB: c.RedisDatabase,
			TLSConfig:   p.tlsConfig(c.RedisSSL, c.RedisSSLVerify),
			DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, PoolSize: 100})
		cl.c, cl.closer = rc, rc.Close
	}
	p.clients[id] = cl
	return cl, nil
}

// Close closes every client.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first error
	for id, cl := range p.clients {
		if err := cl.closer(); err != nil && first == nil {
			first = err
		}
		delete(p.clients, id)
	}
	return first
}

// Script is a Lua script run atomically in redis (EVALSHA, loaded on first use).
type Script struct{ s *goredis.Script }

// NewScript wraps src.
func NewScript(src string) *Script { return &Script{goredis.NewScript(src)} }

// Ints runs s with the client's timeout and returns its reply, which must
// be an array of integers.
func (c *Client) Ints(s *Script, keys []string, args ...any) ([]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	res, err := s.s.Run(ctx, c.c, keys, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	out := make([]int64, len(res))
	for i, v := range res {
		switch x := v.(type) {
		case int64:
			out[i] = x
		case string:
			n, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("redis: unexpected script reply %v", res)
			}
			out[i] = n
		default:
			return nil, fmt.Errorf("redis: unexpected script reply %v", res)
		}
	}
	return out, nil
}

// ErrUnexpected is a script reply of the wrong shape.
var ErrUnexpected = errors.New("redis: unexpected script reply")
