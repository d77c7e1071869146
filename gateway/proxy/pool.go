package proxy

import (
	"bufio"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/internal/deadline"
)

// nodePool sends requests to one upstream node over keep-alive
// connections, with nginx's upstream keepalive semantics (APISIX's
// keepalive_pool): idle connections are reused most recently used first,
// at most size of them are kept (the least recently used one is closed
// beyond that; open connections are not capped), one is closed after
// serving requests requests or after idle without use. A request that
// fails on a reused connection before any byte of the response arrived
// (the node closed it while idle) is sent again on a new connection,
// unless it is non-idempotent, as nginx does for cached connections.
//
// Each connection owns its buffers and a conn wrapper (yield before
// reading the answer) over a deadline.Conn (send and read timeouts without
// a runtime timer per request); a request costs one write and usually one
// read system call, no allocation and no URI parsing.
type nodePool struct {
	addr                string
	tls                 *tls.Config // nil: plain TCP
	connect, send, read time.Duration
	idle                time.Duration
	size, requests      int
	dog                 *deadline.Watchdog

	mu      sync.Mutex
	free    []*upConn // idle connections, least recently used first
	sweeper bool      // a goroutine closes idle connections while free is not empty
	closed  bool
}

// upConn is one upstream connection with its buffers.
type upConn struct {
	c      net.Conn       // *conn, or a *tls.Conn over one
	dc     *deadline.Conn // under c: its timeouts
	br     *bufio.Reader
	bw     *bufio.Writer
	served int       // requests sent on it
	used   time.Time // when it was last put back
}

func newNodePool(k clientKey, dog *deadline.Watchdog) *nodePool {
	p := &nodePool{addr: k.addr, connect: k.connect, send: k.send, read: k.read, idle: k.idle,
		size: k.size, requests: k.requests, dog: dog}
	if k.tls {
		host, _, _ := net.SplitHostPort(k.addr)
		p.tls = &tls.Config{ServerName: host, InsecureSkipVerify: k.insecureSkipVerifyHost} //nolint:gosec // APISIX does not verify upstream certificates by default
	}
	return p
}

var errPoolClosed = errors.New("upstream connection pool closed")

// exchange is what one proxied request may do beyond the buffered fast
// path (stream.go).
type exchange struct {
	stream bool          // the response may stream to the client
	rb     *reqBody      // the request body streams (nil: buffered)
	sent   bool          // a connection took the request: a streamed body is spent
	body   *upstreamBody // set when the response streams
}

// do sends req and reads the answer into resp.
func (p *nodePool) do(req *fasthttp.Request, resp *fasthttp.Response, ex *exchange) error {
	for {
		uc, reused, err := p.get()
		if err != nil {
			return err
		}
		ex.sent = true
		early, err := p.roundTrip(uc, req, resp, ex)
		if err == nil {
			return nil
		}
		// The node may have closed an idle connection just as it was
		// reused: try again on another one, without counting a retry.
		// Bounded: every failed connection is closed, and a new one is
		// not retried. A streamed body cannot be sent twice.
		if !reused || !early || isTimeout(err) || !idempotent(&req.Header) || ex.rb != nil {
			return err
		}
	}
}

// roundTrip writes req and reads resp on uc, then returns uc to the pool
// or closes it. early reports a failure before any response byte arrived.
func (p *nodePool) roundTrip(uc *upConn, req *fasthttp.Request, resp *fasthttp.Response, ex *exchange) (early bool, err error) {
	uc.dc.SetWriteTimeout(p.send)
	if ex.rb != nil {
		uc.dc.SetCallTimeouts(0, p.send) // each write of the upload, as proxy_send_timeout
	}
	if err = req.Write(uc.bw); err == nil {
		err = uc.bw.Flush()
	}
	if ex.rb != nil {
		uc.dc.SetCallTimeouts(0, 0)
	}
	if err != nil {
		p.discard(uc)
		return true, err
	}
	uc.dc.SetReadTimeout(p.read)
	resp.Reset()
	resp.Header.SetNoDefaultContentType(true)
	resp.Header.DisableNormalizing()
	if _, err := uc.br.Peek(1); err != nil {
		p.discard(uc)
		return true, err
	}
	resp.SkipBody = true // the header first (1xx skipped), then the body as it is
	if err := resp.ReadLimitBody(uc.br, maxResponseBytes); err != nil {
		p.discard(uc)
		return false, err
	}
	head := req.Header.IsHead()
	resp.SkipBody = head
	uc.served++
	keep := !resp.ConnectionClose() && !req.Header.ConnectionClose() && (p.requests <= 0 || uc.served < p.requests)
	if sc := resp.StatusCode(); !head && sc != fasthttp.StatusNoContent && sc != fasthttp.StatusNotModified {
		cl := resp.Header.ContentLength()
		if ex.stream && (cl > bufferedBodyMax || cl == -2 || cl == -1 && !bufferedChunks(uc.br)) {
			ex.body = p.streamBody(uc, resp, keep)
			resp.SetBodyStream(ex.body, max(cl, -1))
			return false, nil
		}
		if err := resp.ReadBody(uc.br, maxResponseBytes); err != nil {
			p.discard(uc)
			return false, err
		}
		if cl == -1 {
			if err := resp.Header.ReadTrailer(uc.br); err != nil {
				p.discard(uc)
				return false, err
			}
		}
	}
	if !keep {
		p.discard(uc)
		return false, nil
	}
	p.put(uc, time.Now())
	return false, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// idempotent is nginx's rule for passing a request on after it was sent:
// not POST, LOCK or PATCH.
func idempotent(h *fasthttp.RequestHeader) bool {
	return !h.IsPost() && !h.IsPatch() && string(h.Method()) != "LOCK"
}

// get returns the most recently used idle connection, or a new one.
func (p *nodePool) get() (uc *upConn, reused bool, err error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, false, errPoolClosed
	}
	if n := len(p.free); n > 0 {
		uc = p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return uc, true, nil
	}
	p.mu.Unlock()
	uc, err = p.dial()
	return uc, false, err
}

func (p *nodePool) dial() (*upConn, error) {
	raw, err := net.DialTimeout("tcp", p.addr, p.connect)
	if err != nil {
		return nil, err
	}
	dc := p.dog.Wrap(rawConn(raw), nil)
	var c net.Conn = &conn{Conn: dc}
	if p.tls != nil {
		tc := tls.Client(c, p.tls)
		if err := tc.SetDeadline(time.Now().Add(p.connect)); err != nil {
			dc.Close()
			return nil, err
		}
		if err := tc.Handshake(); err != nil {
			dc.Close()
			return nil, err
		}
		c = tc
	}
	return &upConn{c: c, dc: dc, br: bufio.NewReaderSize(c, 4096), bw: bufio.NewWriterSize(c, 4096)}, nil
}

// put keeps uc for reuse, closing the least recently used idle connection
// beyond size.
func (p *nodePool) put(uc *upConn, now time.Time) {
	uc.used = now
	p.mu.Lock()
	if p.closed || p.size <= 0 {
		p.mu.Unlock()
		uc.c.Close()
		return
	}
	var evicted *upConn
	if len(p.free) >= p.size {
		evicted = p.free[0]
		copy(p.free, p.free[1:])
		p.free[len(p.free)-1] = nil
		p.free = p.free[:len(p.free)-1]
	}
	p.free = append(p.free, uc)
	start := !p.sweeper && p.idle > 0
	if start {
		p.sweeper = true
	}
	p.mu.Unlock()
	if evicted != nil {
		evicted.c.Close()
	}
	if start {
		go p.sweep()
	}
}

func (p *nodePool) discard(uc *upConn) { uc.c.Close() }

// sweep closes connections idle for longer than p.idle, until none is left.
func (p *nodePool) sweep() {
	every := min(max(p.idle/4, 10*time.Millisecond), time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	var old []*upConn
	for range t.C {
		cutoff := time.Now().Add(-p.idle)
		p.mu.Lock()
		n := 0
		for n < len(p.free) && p.free[n].used.Before(cutoff) {
			n++
		}
		old = append(old[:0], p.free[:n]...)
		m := copy(p.free, p.free[n:])
		clear(p.free[m:])
		p.free = p.free[:m]
		done := len(p.free) == 0
		if done {
			p.sweeper = false
		}
		p.mu.Unlock()
		for _, uc := range old {
			uc.c.Close()
		}
		clear(old)
		if done {
			return
		}
	}
}

// close closes the idle connections and every connection put back later.
func (p *nodePool) close() {
	p.mu.Lock()
	p.closed = true
	free := p.free
	p.free = nil
	p.mu.Unlock()
	for _, uc := range free {
		uc.c.Close()
	}
}
