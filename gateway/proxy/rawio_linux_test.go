package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// ioResult is what a caller of Read or Write can tell apart.
type ioResult struct {
	n                                     int
	op                                    string
	timeout, eof, closed, reset, pipe, ok bool
}

func ioResultOf(n int, err error) ioResult {
	o := ioResult{n: n, ok: err == nil, eof: err == io.EOF, timeout: errors.Is(err, os.ErrDeadlineExceeded),
		closed: errors.Is(err, net.ErrClosed), reset: errors.Is(err, syscall.ECONNRESET), pipe: errors.Is(err, syscall.EPIPE)}
	if oe, ok := err.(*net.OpError); ok {
		o.op = oe.Op
		o.timeout = o.timeout && oe.Timeout()
	}
	return o
}

// tcpPair is a connected pair of TCP connections on 127.0.0.1.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer := <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	return c.(*net.TCPConn), peer.(*net.TCPConn)
}

// TestRawTCP: reads and writes by raw system calls end as net.TCPConn's
// do — data, io.EOF, resets, deadlines (already past, or reached while
// blocked), closed connections, writes larger than the socket buffers —
// each case run on both and compared.
func TestRawTCP(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB: many EAGAINs
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, c net.Conn, peer *net.TCPConn) ioResult
		want ioResult
	}{
		{"read", func(t *testing.T, c net.Conn, peer *net.TCPConn) ioResult {
			peer.Write([]byte("hello"))
			b := make([]byte, 16)
			n, err := c.Read(b)
			if string(b[:n]) != "hello" {
				t.Errorf("read %q", b[:n])
			}
			return ioResultOf(n, err)
		}, ioResult{n: 5, ok: true}},
		{"empty read", func(t *testing.T, c net.Conn, peer *net.TCPConn) ioResult {
			return ioResultOf(c.Read(nil))
		}, ioResult{ok: true}},
		{"eof", func(t *testing.T, c net.Conn, peer *net.TCPConn) ioResult {
			peer.Close()
			return ioResultOf(c.Read(make([]byte, 16)))
		}, ioResult{eof: true}},
		{"reset", func(t *testing.T, c net.Conn, peer *net.TCPConn) ioResult {
			c.Write([]byte("unread")) // closed with unread data: the peer resets
			peer.SetLinger(0)
			peer.Close()
			return ioResultOf(c.Read(make([]byte, 16)))
		}, ioResult{op: "read", reset: true}},
		{"read deadline past", func(t *testing.T, c net.Conn, peer *net.TCPConn) ioResult {
			c.SetReadDeadline(time.Now().Add(-time.Second))
			return ioResultOf(c.Read(make([]byte, 16)))
		}, ioResult{op: "read", timeout: true}},
		{"read deadline while blocked", func(t *testing.T, c net.Conn, peer *net.TCPConn) ioResult {
			c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			return ioResultOf(c.Read(make([]byte, 16)))
		}, ioResult{op: "read", timeout: true}},
		{"read closed", func(t *testing.T, c net.Conn, peer *net.TCPConn) ioResult {
			c.Close()
			return ioResultOf(c.Read(make([]byte, 16)))
		}, ioResult{op: "read", closed: true}},
		{"read closed while blocked", func(t *testing.T, c net.Conn, peer *net.TCPConn) ioResult {
			go func() {
				time.Sleep(20 * time.Millisecond) // Read is (most likely) parked by then; either way it fails so
				c.Close()
			}()
			return ioResultOf(c.Read(make([]byte, 16)))
		}, ioResult{op: "read", closed: true}},
		{"write larger than the buffers", func(t *testing.T, c net.Conn, peer *net.TCPConn) ioResult {
			got := make(chan []byte, 1)
			go func() {
				b, _ := io.ReadAll(io.LimitReader(peer, int64(len(big))))
				got <- b
			}()
			o := ioResultOf(c.Write(big))
			c.Close() // the reader ends, had the write stopped short
			if !bytes.Equal(<-got, big) {
				t.Error("the peer did not receive what was written")
			}
			return o
		}, ioResult{n: len(big), ok: true}},
		{"empty write", func(t *testing.T, c net.Conn, peer *net.TCPConn) ioResult {
			return ioResultOf(c.Write(nil))
		}, ioResult{ok: true}},
		{"write deadline past", func(t *testing.T, c net.Conn, peer *net.TCPConn) ioResult {
			c.SetWriteDeadline(time.Now().Add(-time.Second))
			return ioResultOf(c.Write([]byte("x")))
		}, ioResult{op: "write", timeout: true}},
		{"write deadline while blocked", func(t *testing.T, c net.Conn, peer *net.TCPConn) ioResult {
			c.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
			o := ioResultOf(c.Write(big)) // the peer reads nothing
			if o.n == 0 || o.n == len(big) {
				t.Errorf("wrote %d bytes of %d before the deadline", o.n, len(big))
			}
			o.n = 0 // how much fits in the buffers varies
			return o
		}, ioResult{op: "write", timeout: true}},
		{"write closed while blocked", func(t *testing.T, c net.Conn, peer *net.TCPConn) ioResult {
			go func() {
				time.Sleep(20 * time.Millisecond)
				c.Close()
			}()
			o := ioResultOf(c.Write(big)) // the peer reads nothing
			o.n = 0
			return o
		}, ioResult{op: "write", closed: true}},
		{"write to a reset peer", func(t *testing.T, c net.Conn, peer *net.TCPConn) ioResult {
			peer.SetLinger(0)
			peer.Close()
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			c.Read(make([]byte, 1)) // the reset has arrived
			o := ioResultOf(c.Write(big))
			o.n, o.reset = 0, o.reset || o.pipe // EPIPE once the reset is seen
			o.pipe = false
			return o
		}, ioResult{op: "write", reset: true}},
		{"write closed", func(t *testing.T, c net.Conn, peer *net.TCPConn) ioResult {
			c.Close()
			return ioResultOf(c.Write([]byte("x")))
		}, ioResult{op: "write", closed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, raw := range []bool{false, true} {
				tcp, peer := tcpPair(t)
				var c net.Conn = tcp
				if raw {
					if c = rawConn(tcp); c == net.Conn(tcp) {
						t.Fatal("rawConn did not wrap a *net.TCPConn")
					}
				}
				if got := tc.run(t, c, peer); got != tc.want {
					t.Errorf("raw %v: got %+v, want %+v", raw, got, tc.want)
				}
			}
		})
	}
}

// TestRawTCPAllocs: a read and a write allocate nothing.
func TestRawTCPAllocs(t *testing.T) {
	tcp, peer := tcpPair(t)
	c := rawConn(tcp)
	msg, b := []byte("1234567890"), make([]byte, 10)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(peer, b); err != nil {
			t.Fatal(err)
		}
		if _, err := peer.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per write and read, want 0", allocs)
	}
}

// TestRawTCPHappensBefore (meaningful under -race): what a goroutine did
// before a raw write happens before what the peer's reader does after
// reading it, and what a writer did before writing to a raw reader happens
// before the raw reader's next steps — as with net.TCPConn, whose
// syscall.Write and syscall.Read tell the race detector so.
func TestRawTCPHappensBefore(t *testing.T) {
	tcp, peer := tcpPair(t)
	c := rawConn(tcp)
	var shared [2]int
	done := make(chan struct{})
	go func() {
		defer close(done)
		shared[0] = 1
		c.Write([]byte("a"))
		b := make([]byte, 1)
		if _, err := c.Read(b); err != nil {
			t.Error(err)
			return
		}
		if shared[1] != 1 {
			t.Error("the peer's write before its data is not seen")
		}
	}()
	b := make([]byte, 1)
	if _, err := peer.Read(b); err != nil {
		t.Fatal(err)
	}
	if shared[0] != 1 {
		t.Error("the raw write's predecessor is not seen")
	}
	shared[1] = 1
	peer.Write([]byte("b"))
	<-done
}
