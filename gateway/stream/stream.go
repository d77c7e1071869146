// Package stream is linkgate gateway's L4 proxy (APISIX's stream_proxy):
// TCP connections, and TLS ones it terminates, matched to a stream route
// (gateway.MatchStream) and relayed byte for byte to a node of the
// route's upstream.
//
// Its limits: at most Options.MaxConns client connections at once (one
// more is closed as soon as it is accepted), a connection idle in both
// directions for the idle timeout is closed, and Close ends every
// connection and returns once their goroutines have. A half-close (the
// client's FIN) reaches the upstream as a half-close, and the answer
// still flows back until the upstream closes.
package stream

import (
	"context"
	"crypto/tls"
	"errors"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkgate/linkgate/gateway"
)

// Options configure the proxy.
type Options struct {
	Logger *slog.Logger
	// MaxConns bounds the client connections proxied at once (0: 10,000).
	MaxConns int
	// IdleTimeout closes a connection on which nothing moved, either way,
	// for that long, unless its upstream's timeout.read says otherwise
	// (0: 10 minutes, nginx's proxy_timeout).
	IdleTimeout time.Duration
	// ConnectTimeout bounds a dial to a node unless the upstream's
	// timeout.connect says otherwise (0: 60 s, nginx's proxy_connect_timeout).
	ConnectTimeout time.Duration
	// TLS is the configuration of ServeTLS listeners (certificates by SNI).
	TLS *tls.Config
}

// Stats are the proxy's counters.
type Stats struct {
	Active, Accepted, Refused, NoRoute, UpstreamFailed int64
}

// Proxy serves stream routes on any number of listeners.
type Proxy struct {
	opts  Options
	log   *slog.Logger
	state atomic.Pointer[snapshot]
	slots chan struct{} // one per connection proxied

	mu     sync.Mutex
	lns    map[net.Listener]struct{}
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup

	accepted, refused, noRoute, upstreamFailed atomic.Int64
}

// snapshot is one loaded configuration: immutable, swapped whole.
type snapshot struct {
	routes    []*gateway.StreamRouteEntry
	balancers map[string]*balancer // by UpstreamKey
}

// New returns a proxy serving no routes until Load.
func New(opts Options) *Proxy {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 10000
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 10 * time.Minute
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 60 * time.Second
	}
	p := &Proxy{opts: opts, log: opts.Logger, slots: make(chan struct{}, opts.MaxConns),
		lns: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{}}
	p.state.Store(&snapshot{})
	return p
}

// Load swaps in a compiled configuration's stream routes; connections
// already proxied keep their upstream. A balancer is kept while its
// upstream is the same value, so round-robin goes on across reloads.
func (p *Proxy) Load(c *gateway.Compiled) {
	old := p.state.Load()
	next := &snapshot{routes: c.StreamRoutes, balancers: make(map[string]*balancer, len(c.StreamRoutes))}
	for _, r := range c.StreamRoutes {
		if b := old.balancers[r.UpstreamKey]; b != nil && b.up == r.Upstream {
			next.balancers[r.UpstreamKey] = b
			continue
		}
		if next.balancers[r.UpstreamKey] == nil {
			next.balancers[r.UpstreamKey] = newBalancer(r.Upstream)
		}
	}
	p.state.Store(next)
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	return Stats{Active: int64(len(p.slots)), Accepted: p.accepted.Load(), Refused: p.refused.Load(),
		NoRoute: p.noRoute.Load(), UpstreamFailed: p.upstreamFailed.Load()}
}

// Serve proxies plain TCP connections accepted on ln until Close.
func (p *Proxy) Serve(ln net.Listener) error { return p.serve(ln, false) }

// ServeTLS terminates TLS on ln with Options.TLS; the client's SNI then
// selects among the stream routes that name one.
func (p *Proxy) ServeTLS(ln net.Listener) error {
	if p.opts.TLS == nil {
		return errors.New("stream: ServeTLS without Options.TLS")
	}
	return p.serve(ln, true)
}

func (p *Proxy) serve(ln net.Listener, withTLS bool) error {
	if !p.track(ln) {
		ln.Close()
		return net.ErrClosed
	}
	defer p.untrack(ln)
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue // a transient accept failure (EMFILE is not one)
			}
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		p.accepted.Add(1)
		select {
		case p.slots <- struct{}{}:
		default:
			p.refused.Add(1)
			c.Close() // over MaxConns
			continue
		}
		if !p.addConn(c) {
			<-p.slots
			c.Close()
			return nil
		}
		go func() {
			defer p.wg.Done()
			defer func() { <-p.slots }()
			defer p.removeConn(c)
			p.handle(c, withTLS)
		}()
	}
}

func (p *Proxy) track(ln net.Listener) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.lns[ln] = struct{}{}
	return true
}

func (p *Proxy) untrack(ln net.Listener) {
	p.mu.Lock()
	delete(p.lns, ln)
	p.mu.Unlock()
}

// addConn registers a connection for Close (and one more goroutine for
// it to wait for: the caller's p.wg.Done); false once closed.
func (p *Proxy) addConn(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	p.wg.Add(1)
	return true
}

func (p *Proxy) removeConn(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// Close stops every listener, closes every connection and waits for
// their goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for ln := range p.lns {
		ln.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// handle proxies one client connection.
func (p *Proxy) handle(c net.Conn, withTLS bool) {
	client, sni := c, ""
	if withTLS {
		tc := tls.Server(c, p.opts.TLS)
		_ = c.SetDeadline(time.Now().Add(min(p.opts.IdleTimeout, 10*time.Second)))
		if err := tc.Handshake(); err != nil {
			p.log.Debug("stream: TLS handshake failed", "remote", c.RemoteAddr().String(), "err", err)
			return
		}
		_ = c.SetDeadline(time.Time{})
		client, sni = tc, tc.ConnectionState().ServerName
	}
	remote, local := addrPort(c.RemoteAddr()), addrPort(c.LocalAddr())
	st := p.state.Load()
	r := gateway.MatchStream(st.routes, remote, local, sni)
	if r == nil {
		p.noRoute.Add(1)
		p.log.Debug("stream: no route", "remote", remote.String(), "local", local.String(), "sni", sni)
		return
	}
	b := st.balancers[r.UpstreamKey]
	up, err := p.dial(b, remote, local)
	if err != nil {
		p.upstreamFailed.Add(1)
		p.log.Warn("stream: no upstream node answered", "route", r.ID, "err", err)
		return
	}
	if !p.addConn(up) { // Close ends it too: a relay may wait on either side
		up.Close()
		return
	}
	defer p.wg.Done()
	defer p.removeConn(up)
	idle := p.opts.IdleTimeout
	if t := r.Upstream.Timeout; t != nil && t.Read > 0 {
		idle = seconds(t.Read)
	}
	relay(client, up, idle)
}

// dial connects to a node of b, trying the next node on failure up to
// the upstream's retries (default: every node once), within its
// retry_timeout when set.
func (p *Proxy) dial(b *balancer, remote, local netip.AddrPort) (net.Conn, error) {
	u := b.up
	connect := p.opts.ConnectTimeout
	if u.Timeout != nil && u.Timeout.Connect > 0 {
		connect = seconds(u.Timeout.Connect)
	}
	tries := len(u.Nodes)
	if u.Retries != nil {
		tries = *u.Retries + 1
	}
	var stop time.Time
	if u.RetryTimeout > 0 {
		stop = time.Now().Add(seconds(u.RetryTimeout))
	}
	var tried []int
	var errs []error
	for range max(tries, 1) {
		i := b.pick(remote, local, tried)
		if i < 0 {
			break
		}
		tried = append(tried, i)
		c, err := dialNode(u, u.Nodes[i], connect)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if !stop.IsZero() && time.Now().After(stop) {
			break
		}
	}
	if len(errs) == 0 {
		return nil, errors.New("upstream has no node")
	}
	return nil, errors.Join(errs...)
}

func dialNode(u *gateway.Upstream, n gateway.Node, connect time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), connect)
	defer cancel()
	addr := n.Addr()
	if u.Scheme != "tls" {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	// As nginx's proxy_ssl_verify (off), APISIX's default for stream
	// upstreams: the upstream's certificate is not verified.
	d := tls.Dialer{Config: &tls.Config{ServerName: n.Host, InsecureSkipVerify: true}} //nolint:gosec // APISIX does not verify stream upstreams
	return d.DialContext(ctx, "tcp", addr)
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

func addrPort(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.AddrPort()
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}

// relay copies both ways until both sides have finished sending or the
// connection has been idle, both ways, for idle. A side's end of input
// (EOF) is passed on as a half-close; an error closes both.
func relay(client, up net.Conn, idle time.Duration) {
	var last atomic.Int64 // unix nanoseconds of the last byte moved either way
	last.Store(time.Now().UnixNano())
	done := make(chan struct{}, 2)
	abort := func() {
		client.Close()
		up.Close()
	}
	go func() { pipe(up, client, idle, &last, abort); done <- struct{}{} }()
	pipe(client, up, idle, &last, abort)
	<-done
}

// pipe copies src to dst. A read that times out while the other direction
// moved bytes within idle is retried with a later deadline.
func pipe(dst, src net.Conn, idle time.Duration, last *atomic.Int64, abort func()) {
	buf := bufPool.Get().(*[]byte)
	defer bufPool.Put(buf)
	for {
		_ = src.SetReadDeadline(time.Unix(0, last.Load()).Add(idle))
		n, err := src.Read(*buf)
		if n > 0 {
			last.Store(time.Now().UnixNano())
			if _, werr := dst.Write((*buf)[:n]); werr != nil {
				abort()
				return
			}
		}
		var ne net.Error
		switch {
		case err == nil:
		case errors.As(err, &ne) && ne.Timeout() && time.Since(time.Unix(0, last.Load())) < idle:
			// the other direction moved: not idle yet
		case errors.Is(err, io.EOF):
			if !closeWrite(dst) {
				abort()
			}
			return
		default:
			abort()
			return
		}
	}
}

// closeWrite half-closes c (TCP FIN, or TLS close_notify then FIN).
func closeWrite(c net.Conn) bool {
	type closeWriter interface{ CloseWrite() error }
	if cw, ok := c.(closeWriter); ok {
		return cw.CloseWrite() == nil
	}
	return false
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// balancer picks a node of one upstream: weighted round-robin (nginx's
// smooth one), or chash of a connection variable (rendezvous hashing
// weighted by the nodes' weights).
type balancer struct {
	up *gateway.Upstream
	mu sync.Mutex
	cw []int // round-robin's current weights
}

func newBalancer(u *gateway.Upstream) *balancer {
	return &balancer{up: u, cw: make([]int, len(u.Nodes))}
}

// pick returns a node index not in tried with a weight above 0, or -1.
func (b *balancer) pick(remote, local netip.AddrPort, tried []int) int {
	if b.up.Type == "chash" {
		return b.pickHash(hashKey(b.up.Key, remote, local), tried)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	best, total := -1, 0
	for i, n := range b.up.Nodes {
		if n.Weight <= 0 || slices.Contains(tried, i) {
			continue
		}
		b.cw[i] += n.Weight
		total += n.Weight
		if best < 0 || b.cw[i] > b.cw[best] {
			best = i
		}
	}
	if best >= 0 {
		b.cw[best] -= total
	}
	return best
}

func (b *balancer) pickHash(key string, tried []int) int {
	best, bestScore := -1, math.Inf(-1)
	for i, n := range b.up.Nodes {
		if n.Weight <= 0 || slices.Contains(tried, i) {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(key))
		h.Write([]byte{0})
		h.Write([]byte(n.Addr()))
		// a uniform (0,1) from the hash; -w/ln(u) is weighted rendezvous
		u := (float64(h.Sum64()>>11) + 0.5) / (1 << 53)
		if s := -float64(n.Weight) / math.Log(u); s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// hashKey is the chash key's value for a connection: APISIX's stream
// variables remote_addr (the default), remote_port, server_addr,
// server_port; any other name hashes as "" (every connection alike).
func hashKey(name string, remote, local netip.AddrPort) string {
	switch name {
	case "", "remote_addr":
		return remote.Addr().Unmap().String()
	case "remote_port":
		return strconv.Itoa(int(remote.Port()))
	case "server_addr":
		return local.Addr().Unmap().String()
	case "server_port":
		return strconv.Itoa(int(local.Port()))
	}
	return ""
}
