// Package linger closes server connections as RFC 9112 §9.6 asks: the
// sending side first, so the client receives everything written (an error
// answer such as a 413 sent before the body was read, the last response of
// a draining server), then what the client still sends is read and
// dropped, bounded in bytes and time, before the socket is closed. Closing
// at once with unread data makes the kernel send a reset, and a client
// still sending would lose the answer. linkgate serve and linkgate
// gateway wrap their listeners with it.
package linger

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// Bounds of a lingering close.
const (
	Timeout  = 3 * time.Second
	MaxBytes = 512 << 10
	// TimedOut bounds the lingering close of a connection closed for a
	// read timeout (CloseTimedOut): with the timeout's own precision it
	// keeps every timeout within its limit plus one second.
	TimedOut = 250 * time.Millisecond
)

// Listener hands out connections whose Close lingers, and counts them in
// live until they are closed for good (a server's Shutdown waits for it
// to reach zero).
func Listener(ln net.Listener, live *atomic.Int64) net.Listener {
	return listener{Listener: ln, live: live}
}

type listener struct {
	net.Listener
	live *atomic.Int64
}

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.live.Add(1)
	return &conn{Conn: c, live: l.live}, nil
}

type conn struct {
	net.Conn
	live    *atomic.Int64
	closing atomic.Bool
}

// Close shuts down the sending side, then reads and discards until the
// client closes its side, at most MaxBytes or Timeout, and only then
// closes; with a reset if the client read nothing of what is left to
// send in that time. It returns at once; the lingering runs in a
// goroutine of its own.
func (c *conn) Close() error { return c.close(Timeout) }

// CloseTimedOut closes a connection one of whose timeouts expired (the
// Close of internal/deadline's Conn calls it). After a write timeout the
// client does not read what is sent: the connection is reset at once
// (SO_LINGER 0, as nginx's reset_timedout_connection), which also frees
// what the kernel still held to send, instead of a FIN queued behind it
// and a lingering close the client never ends. After a read timeout the
// answer (a 408) goes out and the rest is read as Close does, for at most
// TimedOut.
func (c *conn) CloseTimedOut(write bool) error {
	if !write {
		return c.close(TimedOut)
	}
	if !c.closing.CompareAndSwap(false, true) {
		return nil
	}
	defer c.live.Add(-1)
	if tc, ok := c.Conn.(interface{ SetLinger(int) error }); ok {
		_ = tc.SetLinger(0)
	}
	return c.Conn.Close()
}

// close shuts down the sending side and lingers for at most d.
func (c *conn) close(d time.Duration) error {
	if !c.closing.CompareAndSwap(false, true) {
		return nil // servers may close a connection twice
	}
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		defer c.live.Add(-1)
		return c.Conn.Close()
	}
	go func() {
		defer c.live.Add(-1)
		_ = c.Conn.SetReadDeadline(time.Now().Add(d))
		if _, err := io.CopyN(io.Discard, c.Conn, MaxBytes); errors.Is(err, os.ErrDeadlineExceeded) && unsent(c.Conn) > 0 {
			// The client neither closed nor read for d: what it has not
			// taken it will not, and a FIN behind it would keep the
			// socket (and its buffers) in the kernel for minutes.
			if tc, ok := c.Conn.(interface{ SetLinger(int) error }); ok {
				_ = tc.SetLinger(0)
			}
		}
		_ = c.Conn.Close()
	}()
	return nil
}

// Wait waits until live is zero — every connection counted by Listener is
// closed for good, lingering closes included — or ctx is done.
func Wait(ctx context.Context, live *atomic.Int64) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for live.Load() > 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
