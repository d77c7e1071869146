// Package connqueue is a net.Listener of connections handed over by
// another accept loop: a TLS listener gives the connections ALPN made
// HTTP/1.1 to a fasthttp server's Serve (the gateway's and serve's HTTPS
// listeners), while it serves h2 ones itself.
package connqueue

import (
	"net"
	"sync"
)

// Queue is the listener; New makes one.
type Queue struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

var _ net.Listener = (*Queue)(nil)

// New returns an open Queue.
func New() *Queue {
	return &Queue{ch: make(chan net.Conn), done: make(chan struct{})}
}

// Put hands c to the server accepting on q, waiting for it to accept;
// false once q is closed (c is then the caller's to close).
func (q *Queue) Put(c net.Conn) bool {
	select {
	case q.ch <- c:
		return true
	case <-q.done:
		return false
	}
}

// Accept returns the next connection put, or net.ErrClosed once closed.
func (q *Queue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

// Close makes Accept and Put return; it may be called more than once.
func (q *Queue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

// Addr is a placeholder: the connections come from elsewhere.
func (q *Queue) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
