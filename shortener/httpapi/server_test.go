package httpapi_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener/httpapi"
)

// The Server's own timeouts (timeouts.go), with short limits: each test
// plays a client that breaks one of them and checks the server ends the
// connection, well before the client would have finished on its own.
var shortTimeouts = httpapi.ServerConfig{ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, IdleTimeout: 300 * time.Millisecond}

// startServer serves a test handler with cfg and returns its address.
func startServer(t *testing.T, cfg httpapi.ServerConfig) string {
	t.Helper()
	h, _ := newHandler(t, setup{})
	return serve(t, h, cfg)
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readUntilClosed reads c until the server closes it and returns what it
// read; it fails the test if that takes longer than within.
func readUntilClosed(t *testing.T, c net.Conn, within time.Duration) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(within))
	b, err := io.ReadAll(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection still open after %v (%d bytes read)", within, len(b))
	}
	return b // EOF, or a reset when unread requests were left behind
}

func TestServerTimeouts(t *testing.T) {
	t.Parallel()
	addr := startServer(t, shortTimeouts)

	t.Run("slowloris", func(t *testing.T) {
		t.Parallel()
		// Headers trickle in a byte every 20 ms, each read well within
		// any per-read limit: the whole request must still arrive within
		// ReadTimeout, so the server answers 408 and closes.
		c := dial(t, addr)
		start := time.Now()
		trickled := make(chan struct{})
		go func() {
			defer close(trickled)
			for _, b := range []byte("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 200) + "\r\n\r\n") {
				if _, err := c.Write([]byte{b}); err != nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		got := readUntilClosed(t, c, 3*time.Second)
		if !bytes.HasPrefix(got, []byte("HTTP/1.1 408 ")) || !bytes.Contains(got, []byte(`"request_timeout"`)) {
			t.Errorf("got %q, want a 408 request_timeout", got)
		}
		if d := time.Since(start); d < shortTimeouts.ReadTimeout {
			t.Errorf("closed after %v, before the read timeout", d)
		}
		c.Close()
		<-trickled
	})

	t.Run("no request", func(t *testing.T) {
		t.Parallel()
		c := dial(t, addr)
		got := readUntilClosed(t, c, 3*time.Second)
		if !bytes.HasPrefix(got, []byte("HTTP/1.1 408 ")) {
			t.Errorf("got %q, want a 408", got)
		}
	})

	t.Run("idle", func(t *testing.T) {
		t.Parallel()
		// Requests answered in time keep the connection; then idling past
		// IdleTimeout closes it without an answer.
		c := dial(t, addr)
		br := bufio.NewReader(c)
		for i := range 3 {
			if i > 0 {
				time.Sleep(shortTimeouts.IdleTimeout / 2)
			}
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
		}
		idleFrom := time.Now()
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		rest, err := io.ReadAll(br)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			t.Fatal("idle connection still open after 3s")
		case len(rest) > 0:
			t.Errorf("idle connection closed with %q, want nothing", rest)
		case time.Since(idleFrom) < shortTimeouts.IdleTimeout:
			t.Errorf("closed after %v idle, before the idle timeout", time.Since(idleFrom))
		}
	})

	t.Run("slow reader", func(t *testing.T) {
		t.Parallel()
		// Many pipelined requests whose answers the client does not read:
		// once the socket buffers are full the server's write blocks, and
		// WriteTimeout ends the connection with answers still unsent.
		c := dial(t, addr).(*net.TCPConn)
		c.SetReadBuffer(4 << 10)
		const n = 100_000
		req := []byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		go func() {
			w := bufio.NewWriterSize(c, 64<<10)
			for range n {
				if _, err := w.Write(req); err != nil {
					return
				}
			}
			w.Flush()
		}()
		time.Sleep(time.Second)
		got := readUntilClosed(t, c, 5*time.Second)
		if answered := bytes.Count(got, []byte("HTTP/1.1 200 ")); answered >= n {
			t.Errorf("all %d answers written to a client that did not read", answered)
		}
	})
}
