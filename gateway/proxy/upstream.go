package proxy

import (
	"hash/crc32"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/internal/deadline"
)

// Defaults as APISIX 2.14 (nginx): 60 s timeouts, keepalive 320 connections,
// 1000 requests and 60 s idle per connection.
const (
	defaultTimeout   = 60 * time.Second
	defaultPoolSize  = 320
	defaultIdle      = 60 * time.Second
	defaultConnReqs  = 1000
	maxResponseBytes = 256 << 20
)

// clientKey identifies a connection pool: pools outlive config snapshots,
// so a reload keeps warm keepalive connections.
type clientKey struct {
	addr                   string
	tls                    bool
	connect, send, read    time.Duration
	size, requests         int
	idle                   time.Duration
	insecureSkipVerifyHost bool
}

// pools holds the state that survives config reloads: connection pools per
// node and health per (upstream, node).
type pools struct {
	dogs    *deadline.Watchdogs
	mu      sync.Mutex
	clients map[clientKey]*nodePool
	health  map[string]*nodeHealth // key: upstream key + " " + node addr
	active  map[string]*atomic.Int64
}

func newPools(dogs *deadline.Watchdogs) *pools {
	return &pools{dogs: dogs, clients: map[clientKey]*nodePool{}, health: map[string]*nodeHealth{}, active: map[string]*atomic.Int64{}}
}

func (p *pools) client(k clientKey) *nodePool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[k]; ok {
		return c
	}
	c := newNodePool(k, p.dogs.For(k.send, k.read))
	p.clients[k] = c
	return c
}

// close closes every pool's idle connections.
func (p *pools) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.clients {
		c.close()
	}
}

func (p *pools) nodeHealth(key string) *nodeHealth {
	p.mu.Lock()
	defer p.mu.Unlock()
	h, ok := p.health[key]
	if !ok {
		h = &nodeHealth{}
		p.health[key] = h
	}
	return h
}

func (p *pools) activeCounter(key string) *atomic.Int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.active[key]
	if !ok {
		c = new(atomic.Int64)
		p.active[key] = c
	}
	return c
}

// nodeRT is one upstream node in a snapshot.
type nodeRT struct {
	addr     string // host:port
	host     string // for pass_host=node and the prometheus node label
	hostPort string // Host header for pass_host=node (port omitted when default)
	weight   int
	priority int
	client   *nodePool
	health   *nodeHealth
	active   *atomic.Int64 // requests in flight (least_conn)
}

// upstreamRT is an upstream ready to balance over, built per snapshot.
type upstreamRT struct {
	key          string
	u            *gateway.Upstream
	nodes        []*nodeRT
	retries      int
	retryTimeout time.Duration
	passHost     string
	upstreamHost string
	timeout      time.Duration // whole attempt (connect+send+read), for error mapping only

	rotate  atomic.Uint64 // least_conn tie breaking
	mu      sync.Mutex
	current []int // smooth weighted round robin state
	ring    []ringPoint
	checks  *gateway.Checks
}

type ringPoint struct {
	hash uint32
	node int
}

func newUpstreamRT(p *pools, key string, u *gateway.Upstream, t *gateway.Timeout) *upstreamRT {
	rt := &upstreamRT{key: key, u: u, passHost: u.PassHost, upstreamHost: u.UpstreamHost, checks: u.Checks}
	tls := u.Scheme == "https"
	ck := clientKey{tls: tls, connect: defaultTimeout, send: defaultTimeout, read: defaultTimeout,
		size: defaultPoolSize, requests: defaultConnReqs, idle: defaultIdle, insecureSkipVerifyHost: true}
	if t != nil {
		ck.connect, ck.send, ck.read = seconds(t.Connect), seconds(t.Send), seconds(t.Read)
	}
	if kp := u.Keepalive; kp != nil {
		ck.size, ck.requests, ck.idle = kp.Size, kp.Requests, seconds(kp.IdleTimeout)
	}
	for _, n := range u.Nodes {
		port := n.Port
		hostPort := n.Host
		if port == 0 {
			port = 80
			if tls {
				port = 443
			}
		} else if !(port == 80 && !tls) && !(port == 443 && tls) {
			hostPort = net.JoinHostPort(n.Host, strconv.Itoa(port))
		}
		addr := net.JoinHostPort(n.Host, strconv.Itoa(port))
		k := ck
		k.addr = addr
		rt.nodes = append(rt.nodes, &nodeRT{
			addr: addr, host: n.Host, hostPort: hostPort, weight: n.Weight, priority: n.Priority,
			client: p.client(k),
			health: p.nodeHealth(key + " " + addr),
			active: p.activeCounter(key + " " + addr),
		})
	}
	// Highest priority nodes first; lower ones are only used when all higher are down.
	slices.SortStableFunc(rt.nodes, func(a, b *nodeRT) int { return b.priority - a.priority })
	rt.retries = len(rt.nodes) - 1
	if u.Retries != nil {
		rt.retries = *u.Retries
	}
	rt.retryTimeout = seconds(u.RetryTimeout)
	rt.current = make([]int, len(rt.nodes))
	if u.Type == "chash" {
		for i, n := range rt.nodes {
			for v := 0; v < n.weight*40; v++ {
				rt.ring = append(rt.ring, ringPoint{hash: crc32.ChecksumIEEE([]byte(n.addr + "#" + strconv.Itoa(v))), node: i})
			}
		}
		slices.SortFunc(rt.ring, func(a, b ringPoint) int {
			switch {
			case a.hash < b.hash:
				return -1
			case a.hash > b.hash:
				return 1
			}
			return 0
		})
	}
	rt.timeout = ck.connect + ck.send + ck.read
	return rt
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// usable reports whether node i may be picked: healthy, positive weight,
// not yet tried in this request, and of the highest priority still available.
func (rt *upstreamRT) usable(i int, tried uint64) bool {
	n := rt.nodes[i]
	if n.weight <= 0 || (i < 64 && tried&(1<<uint(i)) != 0) {
		return false
	}
	return n.health.healthy()
}

// pick chooses a node, or -1 when none is usable. rc supplies the hash key for chash.
func (rt *upstreamRT) pick(rc *reqCtx, tried uint64) int {
	if len(rt.nodes) == 1 {
		if rt.usable(0, tried) {
			return 0
		}
		return -1
	}
	// Restrict to the highest priority group that has a usable node.
	lo, hi := 0, 0
	for lo < len(rt.nodes) {
		hi = lo
		for hi < len(rt.nodes) && rt.nodes[hi].priority == rt.nodes[lo].priority {
			hi++
		}
		for i := lo; i < hi; i++ {
			if rt.usable(i, tried) {
				goto found
			}
		}
		lo = hi
	}
	return -1
found:
	switch rt.u.Type {
	case "chash":
		return rt.pickHash(rc, tried, lo, hi)
	case "least_conn":
		// Fewest requests in flight per weight; ties rotate, as nginx's
		// least_conn falls back to round robin.
		best, bestScore := -1, 0.0
		start := int(rt.rotate.Add(1))
		for k := 0; k < hi-lo; k++ {
			i := lo + (start+k)%(hi-lo)
			if !rt.usable(i, tried) {
				continue
			}
			score := float64(rt.nodes[i].active.Load()+1) / float64(rt.nodes[i].weight)
			if best < 0 || score < bestScore {
				best, bestScore = i, score
			}
		}
		return best
	}
	// Smooth weighted round robin (nginx's algorithm).
	rt.mu.Lock()
	total, best := 0, -1
	for i := lo; i < hi; i++ {
		if !rt.usable(i, tried) {
			continue
		}
		w := rt.nodes[i].weight
		rt.current[i] += w
		total += w
		if best < 0 || rt.current[i] > rt.current[best] {
			best = i
		}
	}
	if best >= 0 {
		rt.current[best] -= total
	}
	rt.mu.Unlock()
	return best
}

func (rt *upstreamRT) pickHash(rc *reqCtx, tried uint64, lo, hi int) int {
	var key string
	switch rt.u.HashOn {
	case "header":
		key = b2s(rc.fc.Request.Header.Peek(rt.u.Key))
	case "cookie":
		key = b2s(rc.fc.Request.Header.Cookie(rt.u.Key))
	case "consumer":
		key = rc.Var("consumer_name")
	case "vars_combinations":
		key = rc.expand(rt.u.Key)
	default:
		key = rc.Var(rt.u.Key)
	}
	if key == "" {
		key = b2s(rc.remoteStr)
	}
	h := crc32.ChecksumIEEE(unsafeBytes(key))
	i, _ := slices.BinarySearchFunc(rt.ring, h, func(p ringPoint, t uint32) int {
		switch {
		case p.hash < t:
			return -1
		case p.hash > t:
			return 1
		}
		return 0
	})
	for n := 0; n < len(rt.ring); n++ {
		p := rt.ring[(i+n)%len(rt.ring)]
		if p.node >= lo && p.node < hi && rt.usable(p.node, tried) {
			return p.node
		}
	}
	return -1
}
