package linger_test

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/linger"
)

// TestAnswerSurvivesUnreadData: the server answers before reading what the
// client sent (a 413 for a body too large) and closes; the client, whose
// data sits unread in the server's receive buffer, still reads the whole
// answer and then the end of the stream, not a reset. With a plain Close
// (linger.Listener replaced by raw) the read ends in ECONNRESET.
func TestAnswerSurvivesUnreadData(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var live atomic.Int64
	ln := linger.Listener(raw, &live)
	defer ln.Close()
	const answer = "HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
	sent := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		var head [16]byte
		if _, err := io.ReadFull(c, head[:]); err != nil {
			served <- err
			return
		}
		<-sent // the rest of the body has been sent and is unread
		if _, err := io.WriteString(c, answer); err != nil {
			served <- err
			return
		}
		served <- c.Close()
	}()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// 64 KiB fits in loopback's socket buffers: the write completes
	// without the server reading.
	if _, err := c.Write(make([]byte, 16+64<<10)); err != nil {
		t.Fatal(err)
	}
	close(sent)
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	// The server has closed with data unread: a plain close sends a
	// reset, which Linux delivers after the answer already queued, and
	// the client reads the answer and then ECONNRESET; a client still
	// sending, or a stack that drops queued data on a reset, loses the
	// answer. A lingering close ends the answer with a FIN.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != answer {
		t.Fatalf("read %q, %v; want the whole answer and then the end of the stream", got, err)
	}
	c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := linger.Wait(ctx, &live); err != nil {
		t.Fatalf("the lingering close did not end once the client closed: %v (live %d)", err, live.Load())
	}
}

// TestWaitCounts: Wait returns at once with nothing live and ends with
// the context while a connection is open.
func TestWaitCounts(t *testing.T) {
	var live atomic.Int64
	if err := linger.Wait(context.Background(), &live); err != nil {
		t.Fatal(err)
	}
	live.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := linger.Wait(ctx, &live); err != context.Canceled {
		t.Fatalf("Wait = %v with a connection live, want context.Canceled", err)
	}
}
