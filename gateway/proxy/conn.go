package proxy

import (
	"net"
	"runtime"
	"sync/atomic"
)

// conn wraps every client and upstream connection of the data plane,
// over the deadline.Conn that enforces its timeouts without a runtime
// timer per request (internal/deadline).
//
// It yields the processor once before the first read that follows a
// write. Between a write and the answer to it (a proxied request and the
// upstream's response; a response and the client's next request) the peer
// needs a few microseconds; a read issued at once nearly always fails with
// EAGAIN, parks the goroutine and costs a netpoll round trip. Yielding
// first lets the other connections' goroutines run meanwhile, so the read
// usually finds the data: fewer system calls per request on a busy core.
//
// wrote is atomic: a TLS connection may write (its close_notify) from a
// goroutine closing it while the serving one reads. An HTTP/2
// connection, which reads and writes in two goroutines all along, is
// marked shared before it is served, and then never yields.
type conn struct {
	net.Conn
	wrote  atomic.Bool
	shared bool
}

func (c *conn) Write(b []byte) (int, error) {
	if !c.shared && !c.wrote.Load() {
		c.wrote.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *conn) Read(b []byte) (int, error) {
	if c.wrote.Load() {
		c.wrote.Store(false)
		runtime.Gosched()
	}
	return c.Conn.Read(b)
}

// NetConn returns the connection under c (deadline.Handling finds its
// deadline.Conn through it, as through a *tls.Conn).
func (c *conn) NetConn() net.Conn { return c.Conn }
