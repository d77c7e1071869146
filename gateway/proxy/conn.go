package proxy

import (
	"net"
	"runtime"
	"time"
)

// maxDeadlineSlack bounds how late a lazily set deadline may fire, as
// nginx's NGX_TIMER_LAZY_DELAY (300 ms) does for its timers.
const maxDeadlineSlack = 300 * time.Millisecond

// deadlineSlack is the slack for connections whose timeouts are ts: 1/20
// of the shortest, at most maxDeadlineSlack, so a short timeout stays
// precise (a 1 s timeout fires within 1.05 s).
func deadlineSlack(ts ...time.Duration) time.Duration {
	s := maxDeadlineSlack
	for _, t := range ts {
		if t > 0 {
			s = min(s, t/20)
		}
	}
	return s
}

// conn wraps every client and upstream connection of the data plane. It
// does two things that save work on every request of a keep-alive
// connection:
//
// It yields the processor once before the first read that follows a
// write. Between a write and the answer to it (a proxied request and the
// upstream's response; a response and the client's next request) the peer
// needs a few microseconds; a read issued at once nearly always fails with
// EAGAIN, parks the goroutine and costs a netpoll round trip. Yielding
// first lets the other connections' goroutines run meanwhile, so the read
// usually finds the data: fewer system calls per request on a busy core.
//
// It sets deadlines lazily. fasthttp moves the read and write deadlines
// forward on every request (server: idle, then read timeout; client:
// write, then read timeout), and each move re-arms a runtime timer. Like
// nginx's lazy timers, conn keeps the deadline in force when it is no
// earlier than the one asked for and at most slack later; otherwise it
// sets the one asked for plus slack, so the next requests within slack
// keep it. A deadline therefore never fires early and at most slack late,
// and a busy connection re-arms its timers once per slack instead of
// twice per request.
//
// Each connection is used by one goroutine at a time (fasthttp's server
// loop, or the request holding it from the upstream pool), so the fields
// need no lock.
type conn struct {
	net.Conn
	wrote  bool
	slack  time.Duration
	rd, wd time.Time // deadlines in force; zero: none
}

func (c *conn) Write(b []byte) (int, error) {
	c.wrote = true
	return c.Conn.Write(b)
}

func (c *conn) Read(b []byte) (int, error) {
	if c.wrote {
		c.wrote = false
		runtime.Gosched()
	}
	return c.Conn.Read(b)
}

func (c *conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

func (c *conn) SetReadDeadline(t time.Time) error {
	t, ok := lazyDeadline(c.rd, t, c.slack)
	if !ok {
		return nil
	}
	if err := c.Conn.SetReadDeadline(t); err != nil {
		return err
	}
	c.rd = t
	return nil
}

func (c *conn) SetWriteDeadline(t time.Time) error {
	t, ok := lazyDeadline(c.wd, t, c.slack)
	if !ok {
		return nil
	}
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	c.wd = t
	return nil
}

// lazyDeadline returns the deadline to set when cur is in force and t is
// asked for, or false when cur may stay: cur is in [t, t+slack].
func lazyDeadline(cur, t time.Time, slack time.Duration) (time.Time, bool) {
	if t.IsZero() {
		return t, !cur.IsZero()
	}
	if !cur.IsZero() && !cur.Before(t) && cur.Sub(t) <= slack {
		return cur, false
	}
	return t.Add(slack), true
}
