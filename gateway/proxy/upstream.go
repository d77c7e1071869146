package proxy

import (
	"encoding/binary"
	"hash/crc32"
	"net"
	"slices"
	"strconv"
	"strings"
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
	alt      *nodePool // the other scheme's (proxy-rewrite's scheme); nil for a node without port
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
	tls          bool
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
	rt.tls = tls
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
		var alt *nodePool
		if n.Port != 0 {
			ak := k
			ak.tls = !tls
			alt = p.client(ak) // connects only when a request asks for it
		}
		rt.nodes = append(rt.nodes, &nodeRT{
			addr: addr, host: n.Host, hostPort: hostPort, weight: n.Weight, priority: n.Priority,
			client: p.client(k), alt: alt,
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
		rt.ring = chashRing(rt.nodes)
	}
	rt.timeout = ck.connect + ck.send + ck.read
	return rt
}

// anyVarSet reports whether some $name of tmpl is a variable with a value
// (resolve_var's n_resolved > 0).
func anyVarSet(rc *reqCtx, tmpl string) bool {
	for i := 0; i < len(tmpl); i++ {
		if tmpl[i] != '$' {
			continue
		}
		j := i + 1
		if j < len(tmpl) && tmpl[j] == '{' {
			if end := strings.IndexByte(tmpl[j:], '}'); end > 0 {
				if rc.Var(tmpl[j+1:j+end]) != "" {
					return true
				}
				i = j + end
			}
			continue
		}
		for j < len(tmpl) && (tmpl[j] == '_' || 'a' <= tmpl[j] && tmpl[j] <= 'z' || 'A' <= tmpl[j] && tmpl[j] <= 'Z' || '0' <= tmpl[j] && tmpl[j] <= '9') {
			j++
		}
		if j > i+1 && rc.Var(tmpl[i+1:j]) != "" {
			return true
		}
		i = j - 1
	}
	return false
}

// chashRing is lua-resty-balancer's resty.chash ring, so a key picks the
// node APISIX's chash balancer picks: 160 points per unit of weight for
// the node id "host\x00port", point i's hash the CRC32 of the id followed
// by point i-1's hash (little endian, 0 for the first), sorted by hash.
func chashRing(nodes []*nodeRT) []ringPoint {
	var ring []ringPoint
	for i, n := range nodes {
		host, port, _ := net.SplitHostPort(n.addr)
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		base := crc32.ChecksumIEEE([]byte(host + "\x00" + port))
		var prev [4]byte
		for range n.weight * 160 {
			h := crc32.Update(base, crc32.IEEETable, prev[:])
			ring = append(ring, ringPoint{hash: h, node: i})
			binary.LittleEndian.PutUint32(prev[:], h)
		}
	}
	return chashSort(ring)
}

// chashSort orders the points as resty.chash's chash_point_sort does:
// each point goes into a table of m > 1.6n slots at hash/(2^32/m), moving
// neighbours to keep slots in order. Its order can differ from a plain
// sort where slots overflow, and a key's node depends on it, so this is
// the same placement, not sort.Slice. Slot occupancy uses node+1 as the
// C code uses 1-based ids.
func chashSort(arr []ringPoint) []ringPoint {
	n := len(arr)
	minSz := uint32(float64(n) * 1.6)
	m := uint32(2)
	for m <= minSz {
		m *= 2
	}
	step := uint32((1 << 32) / uint64(m))
	type slot struct {
		hash uint32
		id   int // node+1; 0 is empty
	}
	points := make([]slot, m)
	for _, p := range arr {
		id := p.node + 1
		index := int(p.hash / step)
		end := index
		for ; end >= 0; end-- {
			if points[end].id == 0 {
				goto insert
			}
			if p.hash >= points[end].hash {
				break
			}
		}
		for start := end - 1; start >= 0; start-- {
			if points[start].id == 0 {
				copy(points[start:end], points[start+1:end+1]) // left shift before end
				for end+1 < int(m) && points[end+1].id != 0 && points[end+1].hash < p.hash {
					points[end] = points[end+1]
					end++
				}
				goto insert
			}
		}
		// full before index: append after it
		for end = end + 1; end < int(m); end++ {
			if points[end].id == 0 {
				goto insert
			}
			if p.hash < points[end].hash {
				break
			}
		}
		{
			start := end + 1
			for ; start < int(m); start++ {
				if points[start].id == 0 {
					break
				}
			}
			for j := start; j > end; j-- {
				points[j] = points[j-1]
			}
		}
	insert:
		points[end] = slot{p.hash, id}
	}
	out := arr[:0]
	for _, s := range points {
		if s.id != 0 {
			out = append(out, ringPoint{hash: s.hash, node: s.id - 1})
		}
	}
	return out
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// usable reports whether node i may be picked: not yet tried in this
// request, and healthy unless no node is (then, as APISIX's
// fetch_health_nodes, every node is used).
func (rt *upstreamRT) usable(i int, tried uint64, allDown bool) bool {
	if i < 64 && tried&(1<<uint(i)) != 0 {
		return false
	}
	return allDown || rt.nodes[i].health.healthy()
}

// allDown reports whether no node is healthy.
func (rt *upstreamRT) allDown() bool {
	for _, n := range rt.nodes {
		if n.health.healthy() {
			return false
		}
	}
	return true
}

// pick chooses a node, or -1 when none is usable. rc supplies the hash key
// for chash. Among the usable nodes of the highest priority that has any,
// nodes with a positive weight are balanced by it; a weight of 0 is only
// picked when no usable node has more (resty.roundrobin's behaviour when
// health checks leave only it).
func (rt *upstreamRT) pick(rc *reqCtx, tried uint64) int {
	allDown := rt.checks != nil && rt.allDown()
	if len(rt.nodes) == 1 {
		if rt.usable(0, tried, allDown) {
			return 0
		}
		return -1
	}
	// Restrict to the highest priority group that has a usable node.
	lo, hi := 0, 0
	weighted := false
	for lo < len(rt.nodes) {
		hi = lo
		for hi < len(rt.nodes) && rt.nodes[hi].priority == rt.nodes[lo].priority {
			hi++
		}
		found := false
		for i := lo; i < hi; i++ {
			if rt.usable(i, tried, allDown) {
				found = true
				weighted = weighted || rt.nodes[i].weight > 0
			}
		}
		if found {
			break
		}
		lo = hi
	}
	if lo >= len(rt.nodes) {
		return -1
	}
	if !weighted {
		if rt.u.Type == "chash" {
			return -1 // resty.chash puts no point of a weight-0 node on its ring
		}
		// Only weight-0 nodes are left: take them in turn.
		start := int(rt.rotate.Add(1))
		for k := 0; k < hi-lo; k++ {
			if i := lo + (start+k)%(hi-lo); rt.eligible(i, tried, allDown, weighted) {
				return i
			}
		}
		return -1
	}
	switch rt.u.Type {
	case "chash":
		return rt.pickHash(rc, lo, hi, tried, allDown)
	case "least_conn":
		// Fewest requests in flight per weight; ties rotate, as nginx's
		// least_conn falls back to round robin.
		best, bestScore := -1, 0.0
		start := int(rt.rotate.Add(1))
		for k := 0; k < hi-lo; k++ {
			i := lo + (start+k)%(hi-lo)
			if !rt.eligible(i, tried, allDown, weighted) {
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
		if !rt.eligible(i, tried, allDown, weighted) {
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

// eligible: usable, and of positive weight when some usable node has one.
func (rt *upstreamRT) eligible(i int, tried uint64, allDown, weighted bool) bool {
	return rt.usable(i, tried, allDown) && (!weighted || rt.nodes[i].weight > 0)
}

func (rt *upstreamRT) pickHash(rc *reqCtx, lo, hi int, tried uint64, allDown bool) int {
	var key string
	switch rt.u.HashOn {
	case "header":
		key = b2s(rc.fc.Request.Header.Peek(rt.u.Key))
	case "cookie":
		key = b2s(rc.fc.Request.Header.Cookie(rt.u.Key))
	case "consumer":
		key = rc.Var("consumer_name")
	case "vars_combinations":
		if anyVarSet(rc, rt.u.Key) { // else APISIX hashes remote_addr
			key = rc.expand(rt.u.Key)
		}
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
		if p.node >= lo && p.node < hi && rt.eligible(p.node, tried, allDown, true) {
			return p.node
		}
	}
	return -1
}
