package httpapi

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Connection timeouts without a deadline per request.
//
// fasthttp enforces ReadTimeout, WriteTimeout and IdleTimeout by setting
// the connection's read or write deadline three times per request; each
// call re-arms a runtime timer, about 0.7 µs of a 6.6 µs redirect
// (docs/serve-benchmarks.md). So the Server runs fasthttp without
// timeouts and enforces them itself: its listener wraps every connection
// in a timedConn, which notes around each Read and Write, with an atomic
// store of a coarse clock, the moment that call must be done by; one
// watchdog goroutine per Server checks every connection each tick and
// expires a read or write that is still blocked past its limit by setting
// its deadline to the past. fasthttp then sees the very error its own
// deadline would have given (a timeout on a half-read request answers 408;
// on an idle connection it closes silently).
//
// The limits are fasthttp's:
//
//   - ReadTimeout: from a connection's accept, or from the first byte of a
//     later request, until the whole request (headers and body) is read;
//   - IdleTimeout: from the answer of a request until the first byte of
//     the next one;
//   - WriteTimeout: from the first write of an answer until the next
//     request is handled (so the whole answer, however many writes).
//
// Each is enforced to within two ticks, never early: the clock lags by up
// to a tick, so every deadline gets one tick of slack, and the watchdog
// looks once a tick. A tick is the shortest limit / 16, at most 250 ms.

// aLongTimeAgo is a deadline in the past: it fails a blocked call at once.
var aLongTimeAgo = time.Unix(1, 0)

// watchdog tracks a Server's connections and expires overdue calls.
type watchdog struct {
	read, write, idle int64 // limits in ns, each > 0
	tick              time.Duration
	start             time.Time
	clock             atomic.Int64 // ns since start, refreshed every tick

	mu     sync.Mutex
	conns  map[*timedConn]struct{}
	closed bool // no more connections: stop once conns is empty
	done   chan struct{}

	// live counts the connections accepted and not yet closed for good
	// (lingering closes included): fasthttp's Shutdown may return before
	// it has closed its last connections.
	live atomic.Int64
}

func newWatchdog(read, write, idle time.Duration) *watchdog {
	tick := min(read, write, idle) / 16
	tick = max(min(tick, 250*time.Millisecond), time.Millisecond)
	w := &watchdog{
		read: int64(read), write: int64(write), idle: int64(idle),
		tick: tick, start: time.Now(),
		conns: make(map[*timedConn]struct{}),
		done:  make(chan struct{}),
	}
	go w.run()
	return w
}

// deadline returns the coarse-clock deadline of a limit starting now.
func (w *watchdog) deadline(limit int64) int64 {
	return w.clock.Load() + int64(w.tick) + limit
}

func (w *watchdog) run() {
	defer close(w.done)
	t := time.NewTicker(w.tick)
	defer t.Stop()
	for range t.C {
		now := int64(time.Since(w.start))
		w.clock.Store(now)
		w.mu.Lock()
		for c := range w.conns {
			c.expire(now)
		}
		stop := w.closed && len(w.conns) == 0
		w.mu.Unlock()
		if stop {
			return
		}
	}
}

func (w *watchdog) add(c *timedConn) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.conns[c] = struct{}{}
	w.live.Add(1)
	return true
}

func (w *watchdog) remove(c *timedConn) {
	w.mu.Lock()
	delete(w.conns, c)
	w.mu.Unlock()
}

// close stops watching once the connections open now are closed.
func (w *watchdog) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// timedListener hands out timedConns.
type timedListener struct {
	net.Listener
	w *watchdog
}

func (l *timedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &timedConn{Conn: c, w: l.w, armed: ^uint64(0)}
	tc.readDeadline = l.w.deadline(l.w.read)
	if !l.w.add(tc) {
		c.Close()
		return nil, net.ErrClosed
	}
	return tc, nil
}

// timedConn is a connection under the watchdog. fasthttp serves a
// connection from one goroutine, so only readBy and writeBy, which the
// watchdog reads, are shared.
type timedConn struct {
	net.Conn
	w *watchdog

	readBy  atomic.Int64 // deadline of the Read in progress; 0: none
	writeBy atomic.Int64 // deadline of the Write in progress; 0: none

	readDeadline  int64  // of the request being read, or of the idle wait
	writeDeadline int64  // of the answer being written
	requests      uint64 // requests handed to the handler
	idleFrom      uint64 // requests when the last idle wait began
	armed         uint64 // requests when writeDeadline was set
	idle          bool   // waiting for the first byte of a request

	closing atomic.Bool
}

// handling is called as each request is handed to the handler: the next
// read waits for another request.
func (c *timedConn) handling() { c.requests++ }

func (c *timedConn) Read(p []byte) (int, error) {
	if c.requests != c.idleFrom { // the last request is answered
		c.idleFrom, c.idle = c.requests, true
		c.readDeadline = c.w.deadline(c.w.idle)
	}
	if c.w.clock.Load() > c.readDeadline {
		c.Conn.SetReadDeadline(aLongTimeAgo) // overdue between two reads
	}
	c.readBy.Store(c.readDeadline)
	n, err := c.Conn.Read(p)
	c.readBy.Store(0)
	if c.idle && n > 0 { // a request begins: it has ReadTimeout to arrive
		c.idle = false
		c.readDeadline = c.w.deadline(c.w.read)
	}
	return n, err
}

func (c *timedConn) Write(p []byte) (int, error) {
	if c.armed != c.requests { // the first write of an answer
		c.armed = c.requests
		c.writeDeadline = c.w.deadline(c.w.write)
	}
	if c.w.clock.Load() > c.writeDeadline {
		c.Conn.SetWriteDeadline(aLongTimeAgo)
	}
	c.writeBy.Store(c.writeDeadline)
	n, err := c.Conn.Write(p)
	c.writeBy.Store(0)
	return n, err
}

// Bounds of a lingering close.
const (
	lingerTimeout = 3 * time.Second
	lingerBytes   = 512 << 10
)

// Close closes the connection as RFC 9112 §9.6 asks: it shuts down the
// sending side first, so the client receives everything written (an
// error answer, the last response), then reads and discards what the
// client still sends — the rest of a body too large to be read, a request
// sent while the server was closing an idle connection — until the client
// closes its side, at most lingerBytes or lingerTimeout, and only then
// closes. Closing at once with unread data would make the kernel send a
// reset, and a client still sending would lose the answer. It returns at
// once; Server.Shutdown waits for lingering closes.
func (c *timedConn) Close() error {
	if !c.closing.CompareAndSwap(false, true) {
		return nil // fasthttp may close an idle connection twice
	}
	c.w.remove(c)
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		defer c.w.live.Add(-1)
		return c.Conn.Close()
	}
	go func() {
		defer c.w.live.Add(-1)
		c.Conn.SetReadDeadline(time.Now().Add(lingerTimeout))
		io.CopyN(io.Discard, c.Conn, lingerBytes)
		c.Conn.Close()
	}()
	return nil
}

// expire fails a call blocked past its deadline. The call may have
// returned meanwhile; the connection was overdue all the same, and its
// next call fails.
func (c *timedConn) expire(now int64) {
	if d := c.readBy.Load(); d != 0 && now > d {
		c.Conn.SetReadDeadline(aLongTimeAgo)
	}
	if d := c.writeBy.Load(); d != 0 && now > d {
		c.Conn.SetWriteDeadline(aLongTimeAgo)
	}
}

// markHandling wraps a handler to tell each request's timedConn that it
// is being handled.
func markHandling(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if c, ok := ctx.Conn().(*timedConn); ok {
			c.handling()
		}
		h(ctx)
	}
}
