package httpapi

import (
	"io"
	"net"
	"sync/atomic"
	"time"
)

// Bounds of a lingering close.
const (
	lingerTimeout = 3 * time.Second
	lingerBytes   = 512 << 10
)

// lingerListener hands out connections that close as RFC 9112 §9.6 asks,
// and counts them until they are closed for good.
type lingerListener struct {
	net.Listener
	live *atomic.Int64 // connections accepted and not yet closed for good
}

func (l lingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.live.Add(1)
	return &lingerConn{Conn: c, live: l.live}, nil
}

type lingerConn struct {
	net.Conn
	live    *atomic.Int64
	closing atomic.Bool
}

// Close shuts down the sending side first, so the client receives
// everything written (an error answer, the last response), then reads and
// discards what the client still sends — the rest of a body too large to
// be read, a request sent while the server was closing an idle
// connection — until the client closes its side, at most lingerBytes or
// lingerTimeout, and only then closes. Closing at once with unread data
// would make the kernel send a reset, and a client still sending would
// lose the answer. It returns at once; Server.Shutdown waits for
// lingering closes.
func (c *lingerConn) Close() error {
	if !c.closing.CompareAndSwap(false, true) {
		return nil // fasthttp may close an idle connection twice
	}
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		defer c.live.Add(-1)
		return c.Conn.Close()
	}
	go func() {
		defer c.live.Add(-1)
		c.Conn.SetReadDeadline(time.Now().Add(lingerTimeout))
		io.CopyN(io.Discard, c.Conn, lingerBytes)
		c.Conn.Close()
	}()
	return nil
}
