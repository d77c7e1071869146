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
	"io"
	"net"
	"sync/atomic"
	"time"
)

// Bounds of a lingering close.
const (
	Timeout  = 3 * time.Second
	MaxBytes = 512 << 10
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
// closes. It returns at once; the lingering runs in a goroutine of its
// own.
func (c *conn) Close() error {
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
		_ = c.Conn.SetReadDeadline(time.Now().Add(Timeout))
		_, _ = io.CopyN(io.Discard, c.Conn, MaxBytes)
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
