//go:build linux

package bench

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// hsResult is a finished (or failed) connect + TLS handshake, sent by its
// goroutine to the worker.
type hsResult struct {
	c       *conn
	gen     uint32
	fd      int // the socket, a duplicate of the Go connection's, non-blocking
	tc      *tls.Conn
	tio     *tlsIO
	took    time.Duration // the TLS handshake, TCP connect excluded
	resumed bool
	err     error
}

// discard closes a result nobody will use.
func (r *hsResult) discard() {
	if r.fd >= 0 {
		unix.Close(r.fd)
	}
}

// startHandshake connects c in a goroutine: TCP connect and TLS handshake
// over Go's net package, then the socket's descriptor is duplicated for the
// epoll loop and the Go connection closed.
func (w *worker) startHandshake(c *conn, now time.Duration) {
	c.gen++
	c.state, c.connTime = csConnecting, now
	w.pendingHS++
	gen, cfg, addr, timeout, ctx, hs, efd := c.gen, w.tls, w.addr, w.cfg.Timeout, w.ctx, w.hs, w.efd
	go func() {
		r := hsResult{c: c, gen: gen, fd: -1}
		tc, tio, took, err := handshake(ctx, addr, cfg, timeout)
		if err == nil {
			r.fd, err = detach(tio.nc)
			tio.nc = nil
		}
		if err == nil {
			r.tc, r.tio, r.took, r.resumed = tc, tio, took, tc.ConnectionState().DidResume
		}
		r.err = err
		hs <- r
		one := [8]byte{1}
		_, _ = unix.Write(efd, one[:])
	}()
}

// detach duplicates the socket of a Go TCP connection and closes the
// connection, leaving the duplicate (non-blocking, close-on-exec) to the
// caller.
func detach(nc net.Conn) (int, error) {
	defer nc.Close()
	sc, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := sc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, derr
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// handshakes takes the results the handshake goroutines have sent.
func (w *worker) handshakes() {
	var buf [8]byte
	_, _ = unix.Read(w.efd, buf[:])
	for {
		select {
		case r := <-w.hs:
			w.pendingHS--
			w.handshakeDone(&r)
		default:
			return
		}
	}
}

func (w *worker) handshakeDone(r *hsResult) {
	c := r.c
	now := w.now()
	if r.gen != c.gen || c.state != csConnecting || now >= w.end {
		r.discard() // timed out or closed meanwhile
		return
	}
	if r.err != nil {
		var ce *connectError
		switch {
		case errors.As(r.err, &ce):
			w.connFailed(c, now, &w.rec.errs.Connect)
		case isCertError(r.err):
			w.connFailed(c, now, &w.rec.errs.Certificate)
		default:
			w.connFailed(c, now, &w.rec.errs.Handshake)
		}
		return
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(c.idx), Pad: int32(r.fd)}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, r.fd, &ev); err != nil {
		r.discard()
		w.err = err
		return
	}
	c.fd, c.tc, c.tio, c.out = r.fd, r.tc, r.tio, false
	// Without a warm-up the connections opened just before the measured
	// window are the run's own.
	if now >= w.warm || w.cfg.Warmup == 0 {
		_ = w.rec.handshake.RecordValue(micros(r.took))
		if r.resumed {
			w.rec.resumed++
		}
	}
	w.ready(c, now)
}

// writeTLS encrypts the request (once) and writes the ciphertext.
func (w *worker) writeTLS(c *conn, now time.Duration) {
	if c.written < len(c.req) {
		if _, err := c.tc.Write(c.req[c.written:]); err != nil {
			w.writeFailed(c, now)
			return
		}
		c.written = len(c.req)
	}
	if !w.flushTLS(c, now) {
		return
	}
	c.state = csReading
}

// flushTLS writes the ciphertext waiting in c.tio.out. It reports whether
// all of it went out; if not, EPOLLOUT is armed (or the connection failed).
func (w *worker) flushTLS(c *conn, now time.Duration) bool {
	t := c.tio
	for t.sent < len(t.out) {
		n, err := unix.Write(c.fd, t.out[t.sent:])
		if err != nil {
			if errors.Is(err, unix.EAGAIN) {
				w.setOut(c, true)
				return false
			}
			if errors.Is(err, unix.EINTR) {
				continue
			}
			w.writeFailed(c, now)
			return false
		}
		t.sent += n
	}
	t.out, t.sent = t.out[:0], 0
	w.setOut(c, false)
	return true
}

// readTLS decrypts what arrived and feeds the plaintext to the parser.
// Records split across reads wait in the tls.Conn for the rest.
func (w *worker) readTLS(c *conn, now time.Duration, data []byte) {
	c.tio.in = data
	tc := c.tc
	for {
		n, err := tc.Read(w.plain)
		if n > 0 {
			w.received(c, now, w.plain[:n])
			if c.tc != tc {
				return // the response closed the connection
			}
			if now >= w.end {
				// A response completed at or past the end of the run (one
				// thread's request quota is met in this very batch) and is
				// left in flight, as finish() records it. Reading on would
				// find what follows it — a close_notify after a Connection:
				// close response — and count the end of a stream whose
				// response did arrive as a read error.
				return
			}
		}
		if err != nil {
			if errors.Is(err, errWouldBlock) {
				break
			}
			if isCertError(err) {
				// The server refused our certificate after the handshake.
				w.readFailedAs(c, now, &w.rec.errs.Certificate)
				return
			}
			w.closed(c, now, errors.Is(err, io.EOF))
			return
		}
		if n < len(w.plain) && len(c.tio.in) == 0 {
			break // the record is used up and no other one is here
		}
	}
	if c.tc == tc && len(c.tio.out) > 0 {
		w.flushTLS(c, now) // a post-handshake message wanted an answer
	}
}
