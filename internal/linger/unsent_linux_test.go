package linger_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linkgate/linkgate/internal/linger"
)

// A client that reads nothing: a closed connection's FIN stays behind
// the data it did not take, and the kernel would keep the socket for
// minutes. Once the lingering close has waited its time, the connection
// is reset instead, and the client sees it end. Without the reset the
// client's socket stays established.
func TestUnreadAnswerEndsInAReset(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var live atomic.Int64
	ln := linger.Listener(raw, &live)
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4096)
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	s.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	for { // fill the socket buffers: the client never reads
		if _, err := s.Write(make([]byte, 64<<10)); err != nil {
			break
		}
	}
	s.(interface{ CloseTimedOut(bool) error }).CloseTimedOut(false)
	start := time.Now()
	raw2, _ := c.(*net.TCPConn).SyscallConn()
	for {
		var state uint8
		raw2.Control(func(fd uintptr) {
			if info, err := unix.GetsockoptTCPInfo(int(fd), unix.SOL_TCP, unix.TCP_INFO); err == nil {
				state = info.State
			}
		})
		if state != unix.BPF_TCP_ESTABLISHED {
			t.Logf("client's socket state %d after %v", state, time.Since(start).Round(time.Millisecond))
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the client's socket is still established 10 s after the close")
		}
		time.Sleep(10 * time.Millisecond) // polls the socket's TCP state: no event says when it changes
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := linger.Wait(ctx, &live); err != nil {
		t.Errorf("the connection was not closed for good: %v", err)
	}
}
