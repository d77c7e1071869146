//go:build linux

package proxy

import (
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// rawTCP reads and writes a TCP connection with raw system calls under
// the netpoller (syscall.RawConn), where net.TCPConn enters and leaves
// the runtime's syscall state around each one.
//
// That state is what makes the runtime's monitor thread (sysmon) busy on
// a gateway serving a steady rate: whenever every P has been idle, sysmon
// sleeps until the next system call entered wakes it (a futex wake), and
// from then on it ticks every 20 µs, taking the P from any call it finds
// in progress (a loopback write lasts that long: it runs the peer's
// receive path) and handing it to another thread. A read or write of a
// non-blocking socket never blocks, so it needs none of that: raw, it is
// one system call, EAGAIN parks the goroutine on the netpoller as before,
// and sysmon only wakes for timers.
//
// Measured (make bench-gateway's fixed rows with OLD_REF, GOMAXPROCS=1
// pinned; docs/gateway.md): on a quiet machine CPU per request ×0.85 and
// ×0.91 the build without it at 50 % and 80 % of nginx's capacity, p99
// 5.3 vs 6.2 ms and 24.9 vs 25.8 ms; on a shared machine CPU ×0.49-0.65,
// ×0.92 (0.88-1.04) saturated. The price: the one thread that holds the
// P is never replaced while descheduled, so on a core other processes
// load, its fixed-rate p99 was ×2-14 the old build's (still ≤ nginx's,
// also one thread, at 50 %). Others' suites prove the I/O: h2spec (145 of
// 145 over TLS, TestH2spec) and APISIX's t/ (gateway/conformance,
// TestAPISIX) run over it.
//
// Errors are net.TCPConn's (*net.OpError "read"/"write" over an
// os.SyscallError, io.EOF, deadlines, net.ErrClosed); the embedded
// *net.TCPConn provides the rest (CloseWrite, SetLinger, SyscallConn). A
// read or write overlapping another in the same direction (not done by
// the gateway) takes net.TCPConn's path.
type rawTCP struct {
	*net.TCPConn
	rc     syscall.RawConn
	rd, wr rawOp
}

// rawOp is the state of one direction's call; fn is its method value,
// bound once so that a call allocates nothing.
type rawOp struct {
	busy  atomic.Bool
	b     []byte
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool
}

// rawConn returns c with raw reads and writes when it is a TCP
// connection, else c.
func rawConn(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	r := &rawTCP{TCPConn: tc, rc: rc}
	r.rd.fn, r.wr.fn = r.rd.read, r.wr.write
	return r
}

func (c *rawTCP) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if !c.rd.busy.CompareAndSwap(false, true) {
		return c.TCPConn.Read(b)
	}
	c.rd.b = b
	err := c.rc.Read(c.rd.fn)
	n, errno := c.rd.n, c.rd.errno
	c.rd.b, c.rd.n, c.rd.errno = nil, 0, 0
	c.rd.busy.Store(false)
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case errno != 0:
		return 0, c.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *rawTCP) Write(b []byte) (int, error) {
	if !c.wr.busy.CompareAndSwap(false, true) {
		return c.TCPConn.Write(b)
	}
	c.wr.b = b
	err := c.rc.Write(c.wr.fn)
	n, errno := c.wr.n, c.wr.errno
	c.wr.b, c.wr.n, c.wr.errno = nil, 0, 0
	c.wr.busy.Store(false)
	switch {
	case err != nil:
		return n, c.opError("write", err)
	case errno != 0:
		return n, c.opError("write", os.NewSyscallError("write", errno))
	case n < len(b):
		return n, c.opError("write", io.ErrUnexpectedEOF)
	}
	return n, nil
}

// opError is err as net.TCPConn returns it: RawConn's own errors
// (deadline, closed) come as an *net.OpError of op "raw-read" or
// "raw-write".
func (c *rawTCP) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		oe.Op = op
		return oe
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// read is one read(2); false (EAGAIN) waits for the socket to be readable.
func (o *rawOp) read(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(o.b))), uintptr(len(o.b)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		case 0:
			o.n = int(n)
			raceRead(o.b[:o.n])
		default:
			o.errno = e
		}
		return true
	}
}

// write writes all of o.b; false (EAGAIN) waits for the socket to be
// writable. A write that makes no progress ends it (n < len(b)).
func (o *rawOp) write(fd uintptr) bool {
	raceWrote(o.b[o.n:])
	for o.n < len(o.b) {
		p := o.b[o.n:]
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
		switch {
		case e == syscall.EINTR:
		case e == syscall.EAGAIN:
			return false
		case e != 0:
			o.errno = e
			return true
		case n == 0:
			return true
		default:
			o.n += int(n)
		}
	}
	return true
}
