// Package deadline enforces connection timeouts without arming a runtime
// timer per request. Both fasthttp servers (the shortener's httpapi and
// the gateway's data plane) and the gateway's upstream connections use it.
//
// fasthttp, net/http and connection pools move a connection's read and
// write deadlines several times per request, and each move re-arms a
// runtime timer: about 0.7 µs of a 6.6 µs redirect
// (docs/serve-benchmarks.md). A Conn keeps its deadlines as numbers in
// atomics, on a clock that a Watchdog refreshes every tick; the Watchdog
// looks at its connections every tick and expires a Read or Write still
// blocked past its deadline by setting the real deadline to the past, so
// the caller gets the very error (os.ErrDeadlineExceeded) a deadline of
// its own would have given. A Watchdog runs one goroutine while it has
// connections, none otherwise.
//
// Deadlines come from three places, all cheap:
//
//   - net.Conn's SetDeadline, SetReadDeadline and SetWriteDeadline, with
//     their contract: a deadline applies to pending and future calls, one
//     in the past fails them at once, the zero time clears it (net/http,
//     x/net/http2 and crypto/tls use these);
//   - SetReadTimeout and SetWriteTimeout, relative to now, for callers
//     that would otherwise build a time.Time per request (the upstream
//     pool);
//   - Limits, a server connection's timeouts applied by the Conn itself
//     around its Reads and Writes, for a fasthttp server run without its
//     own timeouts; the handler calls Handling once per request.
//
// Precision: a deadline never fires early (deadlines are taken from the
// monotonic clock; a call's own check before it starts compares them with
// the coarse clock, which only lags) and at most a tick late, the
// watchdog's goroutine permitting. TickFor picks a tick of 1/16 of the
// shortest timeout, at most 250 ms: a 1 s timeout fires within 1.0625 s,
// a 60 s one within 60.25 s.
//
// Written here because no library does it: deadlines are the only way to
// bound a blocked net.Conn call, and both the runtime's timers and the
// libraries that wrap them (fasthttp's, net/http's) set them per request.
package deadline

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// aLongTimeAgo is a deadline in the past: it fails a blocked call at once.
var aLongTimeAgo = time.Unix(1, 0)

// MaxTick bounds a watchdog's tick.
const MaxTick = 250 * time.Millisecond

// TickFor is the tick that enforces timeouts ts (zeros ignored) within
// 1/16 of the shortest: 1/16 of it, rounded down to a power of two
// milliseconds (so connections with similar timeouts share a watchdog),
// at least 1 ms, at most MaxTick.
func TickFor(ts ...time.Duration) time.Duration {
	tick := MaxTick
	for _, t := range ts {
		if t > 0 {
			tick = min(tick, t/16)
		}
	}
	if tick >= MaxTick {
		return MaxTick
	}
	p := time.Millisecond
	for p*2 <= tick {
		p *= 2
	}
	return p
}

// Watchdog expires the overdue calls of its connections.
type Watchdog struct {
	tick   time.Duration
	start  time.Time
	now    func() int64 // ns since start
	manual bool         // tests: no goroutine, they call check
	clock  atomic.Int64 // ns since start, refreshed every tick

	mu      sync.Mutex
	conns   map[*Conn]struct{}
	running bool // a goroutine ticks while conns is not empty
	// quiet, once Drain was called: how long a connection may wait for
	// its next request (ns); 0 before.
	quiet atomic.Int64
}

// New returns a watchdog that looks at its connections every tick.
func New(tick time.Duration) *Watchdog { return newWatchdog(tick, nil) }

func newWatchdog(tick time.Duration, now func() int64) *Watchdog {
	w := &Watchdog{tick: max(tick, time.Millisecond), start: time.Now(), now: now, conns: map[*Conn]struct{}{}}
	if now == nil {
		w.now = func() int64 { return int64(time.Since(w.start)) }
	} else {
		w.manual = true
	}
	return w
}

// after is the deadline of a timeout d starting now. It reads the
// monotonic clock (a few ns, no timer): the coarse clock may lag by more
// than a tick when the watchdog's goroutine runs late on a busy machine,
// and a deadline taken from it would then fire early.
func (w *Watchdog) after(d time.Duration) int64 {
	return w.now() + int64(d)
}

// past is the clock value of every time before the watchdog's start.
const past = 1

// overdue reports whether deadline v has passed at now.
func overdue(v, now int64) bool { return v != 0 && v <= max(now, past) }

// at converts t to the clock's units; 0 for the zero time.
func (w *Watchdog) at(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return max(int64(t.Sub(w.start)), past)
}

func (w *Watchdog) run() {
	t := time.NewTicker(w.tick)
	defer t.Stop()
	for range t.C {
		if !w.check() {
			return
		}
	}
}

// check refreshes the clock and expires overdue calls; false when no
// connection is left (the goroutine then stops).
func (w *Watchdog) check() bool {
	now := w.now()
	w.clock.Store(now)
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.conns {
		c.expireBlocked(now)
	}
	if len(w.conns) == 0 {
		w.running = false
		return false
	}
	return true
}

func (w *Watchdog) add(c *Conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.conns[c] = struct{}{}
	if !w.running {
		// The clock stood still while nothing was watched.
		w.clock.Store(w.now())
		w.running = true
		if !w.manual {
			go w.run()
		}
	}
}

func (w *Watchdog) remove(c *Conn) {
	w.mu.Lock()
	delete(w.conns, c)
	w.mu.Unlock()
}

// Limits are a server connection's timeouts, with fasthttp's meaning:
//
//   - Read: from the connection's accept, or from the first byte of a
//     later request, until the whole request (headers and body) is read,
//     so a client trickling bytes cannot stretch it;
//   - Idle: from the answer of a request until the first byte of the
//     next one;
//   - Write: from the first write of an answer until the next request is
//     handled (so the whole answer, however many writes).
//
// Each must be positive.
type Limits struct {
	Read, Write, Idle time.Duration
}

// Wrap watches c. With limits, the Conn applies them around its Reads
// and Writes (the server's handler calls Handling for each request);
// without, only the deadlines its user sets apply.
func (w *Watchdog) Wrap(c net.Conn, limits *Limits) *Conn {
	dc := &Conn{Conn: c, w: w, limits: limits, armed: ^uint64(0)}
	dc.limited.Store(limits != nil)
	w.add(dc)
	if limits != nil {
		dc.rd.Store(w.after(limits.Read))
		dc.boundary.Store(true)
		dc.drainWait()
	}
	return dc
}

// Drain makes every connection with limits that waits for a request
// (idle between two, or new and silent) wait for it at most quiet from
// now, and every one that begins to wait from now on at most quiet: a
// draining server closes its idle keep-alive connections at a request
// boundary, and only once they have been quiet that long, so that a
// client sending its next request as soon as it has its answer is
// answered (with Connection: close) rather than closed on. A connection
// whose wait so ends is closed as by its read timeout.
func (w *Watchdog) Drain(quiet time.Duration) {
	w.quiet.Store(int64(max(quiet, 1)))
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.conns {
		if c.limited.Load() && c.boundary.Load() {
			c.drainWait()
		}
	}
}

// drainWait shortens the read deadline of a connection waiting for a
// request to the Watchdog's quiet time from now, once it drains.
func (c *Conn) drainWait() {
	q := c.w.quiet.Load()
	if q == 0 {
		return
	}
	v := c.w.after(time.Duration(q))
	if d := c.rd.Load(); d != 0 && d <= v {
		return
	}
	c.set(read, &c.rd, v)
}

// Listener wraps every connection ln accepts with limits.
func (w *Watchdog) Listener(ln net.Listener, limits Limits) net.Listener {
	return &listener{Listener: ln, w: w, limits: limits}
}

type listener struct {
	net.Listener
	w      *Watchdog
	limits Limits
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.w.Wrap(c, &l.limits), nil
}

// Which call a state bit is about.
const (
	read  = 1
	write = 2
)

// Conn is a connection under a watchdog. Deadlines and the state the
// watchdog reads are atomics; the Limits bookkeeping (requests, phases)
// belongs to the goroutine serving the connection, as in fasthttp.
type Conn struct {
	net.Conn
	w      *Watchdog
	limits *Limits

	rd, wd atomic.Int64 // deadlines on the watchdog's clock; 0: none
	// perRead, perWrite (ns), when set, give each Read or Write its own
	// deadline from its start (SetCallTimeouts).
	perRead, perWrite atomic.Int64
	busy              atomic.Uint32 // read|write: a call is in progress
	expired           atomic.Uint32 // read|write: the real deadline is in the past
	mu                sync.Mutex    // orders expiring and reviving the real deadline

	requests uint64 // requests handed to the handler
	idleFrom uint64 // requests when the last idle wait began
	armed    uint64 // requests when the write deadline was set
	idle     bool   // waiting for the first byte of a request
	// began is the clock when the Read that ended the last idle wait
	// returned, while no other Read has followed it; 0 otherwise.
	// Handling hands it to the request it begins.
	began int64
	// boundary: waiting for the first byte of a request (Drain reads it).
	boundary atomic.Bool
	// limited: limits is set. Drain, on another goroutine, reads this and
	// not limits, which SetLimits may be replacing meanwhile.
	limited atomic.Bool
}

// SetCallTimeouts bounds each Read and each Write from its start, instead
// of a deadline over several calls: nginx's client_body_timeout,
// send_timeout and proxy_read_timeout, for a body streamed through the
// connection for longer than any whole-request limit. They replace the
// limits' read and write phases until the next request is handled
// (Handling) or they are set to zero.
func (c *Conn) SetCallTimeouts(r, w time.Duration) {
	c.perRead.Store(int64(max(r, 0)))
	c.perWrite.Store(int64(max(w, 0)))
}

// Handling tells c's Conn (c itself, or the Conn under a *tls.Conn or any
// wrapper with a NetConn method) that a request is being handled: its
// next Read waits for another request. No-op for other connections.
//
// It returns when the request arrived, if the Conn knows without a clock
// read of its own: the time the Read that ended the idle wait before it
// returned, when that one Read brought the whole request (no other Read
// followed it, so only parsing came between). Otherwise (the first
// request of a connection, a request that took several Reads, a
// pipelined one already buffered, another kind of connection) it
// returns the zero Time, and the caller reads the clock itself. A server
// that times its requests saves a clock read per request: the Conn reads
// the clock at that moment anyway, for the request's Read limit.
func Handling(c net.Conn) (arrived time.Time) {
	for {
		switch x := c.(type) {
		case *Conn:
			x.requests++
			if x.perRead.Load() != 0 || x.perWrite.Load() != 0 {
				x.perRead.Store(0)
				x.perWrite.Store(0)
			}
			if b := x.began; b != 0 {
				x.began = 0
				return x.w.start.Add(time.Duration(b))
			}
			return time.Time{}
		case interface{ NetConn() net.Conn }:
			c = x.NetConn()
		default:
			return time.Time{}
		}
	}
}

// Unwrap returns the Conn under c (as Handling finds it), or nil.
func Unwrap(c net.Conn) *Conn {
	for {
		switch x := c.(type) {
		case *Conn:
			return x
		case interface{ NetConn() net.Conn }:
			c = x.NetConn()
		default:
			return nil
		}
	}
}

// SetLimits replaces the connection's limits (nil: none, only the
// deadlines its user sets), for a connection taken over from the server
// (a WebSocket, a streamed body with its own timeouts). The deadlines in
// force are cleared.
func (c *Conn) SetLimits(l *Limits) {
	c.limits = l
	c.limited.Store(l != nil)
	c.set(read, &c.rd, 0)
	c.set(write, &c.wd, 0)
	if l != nil {
		c.idleFrom, c.idle = c.requests, false
		c.rd.Store(c.w.after(l.Read))
	}
}

func (c *Conn) Read(p []byte) (int, error) {
	if l := c.limits; l != nil && c.requests != c.idleFrom {
		// The last request is answered: the next one has Idle to begin.
		c.idleFrom, c.idle = c.requests, true
		c.boundary.Store(true)
		c.rd.Store(c.w.after(l.Idle))
		c.drainWait()
	}
	if d := c.perRead.Load(); d > 0 {
		c.rd.Store(c.w.after(time.Duration(d)))
	}
	c.before(read, &c.rd)
	c.busy.Or(read)
	n, err := c.Conn.Read(p)
	c.busy.And(^uint32(read))
	c.began = 0 // this Read does not end an idle wait, or it was not the only one
	if n > 0 && c.limits != nil && c.boundary.Load() {
		c.boundary.Store(false)
	}
	if c.idle && n > 0 && c.perRead.Load() == 0 {
		// A request begins: it has Read to arrive whole.
		c.idle = false
		now := c.w.now()
		c.rd.Store(now + int64(c.limits.Read))
		c.began = max(now, past)
	}
	return n, err
}

func (c *Conn) Write(p []byte) (int, error) {
	if l := c.limits; l != nil && c.armed != c.requests {
		// The first write of an answer.
		c.armed = c.requests
		c.wd.Store(c.w.after(l.Write))
	}
	if d := c.perWrite.Load(); d > 0 {
		c.wd.Store(c.w.after(time.Duration(d)))
	}
	c.before(write, &c.wd)
	c.busy.Or(write)
	n, err := c.Conn.Write(p)
	c.busy.And(^uint32(write))
	return n, err
}

// before makes the real deadline agree with d before a call: in the past
// when d is overdue, cleared when an expired deadline was moved.
func (c *Conn) before(which uint32, d *atomic.Int64) {
	switch now := c.w.clock.Load(); {
	case overdue(d.Load(), now):
		c.expire(which, d, now)
	case c.expired.Load()&which != 0:
		c.revive(which, d)
	}
}

// expire sets the real deadline of which to the past if d is still
// overdue at now.
func (c *Conn) expire(which uint32, d *atomic.Int64, now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !overdue(d.Load(), now) || c.expired.Load()&which != 0 {
		return
	}
	c.expired.Or(which)
	c.setReal(which, aLongTimeAgo)
}

// revive clears the real deadline of which if d is no longer overdue.
func (c *Conn) revive(which uint32, d *atomic.Int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.expired.Load()&which == 0 || overdue(d.Load(), c.w.clock.Load()) {
		return
	}
	c.expired.And(^which)
	c.setReal(which, time.Time{})
}

func (c *Conn) setReal(which uint32, t time.Time) {
	if which == read {
		_ = c.Conn.SetReadDeadline(t)
	} else {
		_ = c.Conn.SetWriteDeadline(t)
	}
}

// expireBlocked fails the calls blocked past their deadline (watchdog).
func (c *Conn) expireBlocked(now int64) {
	busy := c.busy.Load()
	if busy&read != 0 && overdue(c.rd.Load(), now) {
		c.expire(read, &c.rd, now)
	}
	if busy&write != 0 && overdue(c.wd.Load(), now) {
		c.expire(write, &c.wd, now)
	}
}

// set stores deadline v for which and applies it to a call in progress.
func (c *Conn) set(which uint32, d *atomic.Int64, v int64) {
	d.Store(v)
	switch now := c.w.clock.Load(); {
	case overdue(v, now):
		c.expire(which, d, now)
	case c.expired.Load()&which != 0:
		c.revive(which, d)
	}
}

// SetReadDeadline implements net.Conn.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.set(read, &c.rd, c.w.at(t))
	return nil
}

// SetWriteDeadline implements net.Conn.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.set(write, &c.wd, c.w.at(t))
	return nil
}

// SetDeadline implements net.Conn.
func (c *Conn) SetDeadline(t time.Time) error {
	v := c.w.at(t)
	c.set(read, &c.rd, v)
	c.set(write, &c.wd, v)
	return nil
}

// SetReadTimeout sets the read deadline d from now; 0 clears it.
func (c *Conn) SetReadTimeout(d time.Duration) { c.set(read, &c.rd, c.timeout(d)) }

// SetWriteTimeout sets the write deadline d from now; 0 clears it.
func (c *Conn) SetWriteTimeout(d time.Duration) { c.set(write, &c.wd, c.timeout(d)) }

func (c *Conn) timeout(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return c.w.after(d)
}

// Close stops watching the connection and closes it. A connection one of
// whose deadlines expired is closed by the CloseTimedOut method of the
// connection it wraps, if it has one (internal/linger: a timed-out
// client gets no long lingering close).
func (c *Conn) Close() error {
	c.w.remove(c)
	if e := c.expired.Load(); e != 0 {
		if tc, ok := c.Conn.(interface{ CloseTimedOut(write bool) error }); ok {
			return tc.CloseTimedOut(e&write != 0)
		}
	}
	return c.Conn.Close()
}

// NetConn returns the wrapped connection.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Watchdogs hands out one watchdog per tick, so that connections with
// similar timeouts share one. The zero value is ready to use.
type Watchdogs struct {
	mu sync.Mutex
	m  map[time.Duration]*Watchdog
}

// For returns the watchdog that enforces timeouts ts (TickFor).
func (ws *Watchdogs) For(ts ...time.Duration) *Watchdog {
	tick := TickFor(ts...)
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w, ok := ws.m[tick]
	if !ok {
		if ws.m == nil {
			ws.m = map[time.Duration]*Watchdog{}
		}
		w = New(tick)
		ws.m[tick] = w
	}
	return w
}
