package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
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
		// The read timeout runs from the server's accept, which may come
		// before dial returns here: the time before dialling bounds it.
		start := time.Now()
		c := dial(t, addr)
		trickled := make(chan struct{})
		go func() {
			defer close(trickled)
			for _, b := range []byte("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 200) + "\r\n\r\n") {
				if _, err := c.Write([]byte{b}); err != nil {
					return
				}
				time.Sleep(20 * time.Millisecond) // deliberate: a slowloris's pace
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
		// The server's idle period starts after it has answered the last
		// request, so after that request was sent: the time of sending is a
		// lower bound for it, whenever this goroutine gets to read the answer.
		var lastSent time.Time
		for i := range 3 {
			if i > 0 {
				time.Sleep(shortTimeouts.IdleTimeout / 2) // deliberate: idle, within the timeout
			}
			lastSent = time.Now()
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
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		rest, err := io.ReadAll(br)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			t.Fatal("idle connection still open after 3s")
		case len(rest) > 0:
			t.Errorf("idle connection closed with %q, want nothing", rest)
		case time.Since(lastSent) < shortTimeouts.IdleTimeout:
			t.Errorf("closed %v after the last request was sent, before the idle timeout", time.Since(lastSent))
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
		time.Sleep(time.Second) // deliberate: a client that reads nothing for a second
		got := readUntilClosed(t, c, 5*time.Second)
		if answered := bytes.Count(got, []byte("HTTP/1.1 200 ")); answered >= n {
			t.Errorf("all %d answers written to a client that did not read", answered)
		}
	})
}

// "Expect: 100-continue" with a body announced over the limit gets its
// 413 at once, without a 100 Continue first.
func TestExpectContinueTooLarge(t *testing.T) {
	t.Parallel()
	c := dial(t, startServer(t, httpapi.ServerConfig{}))
	io.WriteString(c, "POST /api/v1/links HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\nExpect: 100-continue\r\n\r\n")
	got := readUntilClosed(t, c, 5*time.Second)
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 413 ")) || !bytes.Contains(got, []byte(`"payload_too_large"`)) || bytes.Contains(got, []byte("100 Continue")) {
		t.Errorf("got %q, want a 413 payload_too_large and no 100 Continue", got)
	}
	// Within the limit it continues as usual.
	c = dial(t, startServer(t, httpapi.ServerConfig{}))
	body := `{"url":"https://example.com/continue"}`
	fmt.Fprintf(c, "POST /api/v1/links HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n", len(body))
	br := bufio.NewReader(c)
	if line, _ := br.ReadString('\n'); line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("got %q, want 100 Continue", line)
	}
	br.ReadString('\n')
	io.WriteString(c, body)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("after 100 Continue: %v %v", resp, err)
	}
}

// An error answered before the request was read whole (a body or headers
// over the limit) reaches a client that is still sending: the server
// reads and discards the rest before it closes, so there is no reset.
func TestErrorAnswerReachesSendingClient(t *testing.T) {
	t.Parallel()
	addr := startServer(t, httpapi.ServerConfig{})
	for _, tt := range []struct {
		name, head string
		status     string
	}{
		{"body", "POST /shortenURL HTTP/1.1\r\nHost: x\r\nContent-Length: 300000\r\n\r\n", "HTTP/1.1 413 "},
		{"headers", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("h", 20000) + "\r\n\r\n", "HTTP/1.1 431 "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := dial(t, addr)
			sent := make(chan error, 1)
			go func() {
				// The request, then 300 KB of body the server will not read.
				if _, err := io.WriteString(c, tt.head); err != nil {
					sent <- err
					return
				}
				chunk := bytes.Repeat([]byte("x"), 10000)
				for range 30 {
					if _, err := c.Write(chunk); err != nil {
						sent <- err
						return
					}
					time.Sleep(time.Millisecond) // deliberate: a body that arrives in pieces
				}
				sent <- c.(*net.TCPConn).CloseWrite()
			}()
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, err := io.ReadAll(c)
			if err != nil {
				t.Errorf("read: %v after %q (a reset loses the answer)", err, got)
			}
			if !bytes.HasPrefix(got, []byte(tt.status)) {
				t.Errorf("got %.80q, want %s", got, tt.status)
			}
			if err := <-sent; err != nil {
				t.Errorf("sending: %v", err)
			}
		})
	}
}

// A graceful stop answers the requests it has read (with Connection:
// close), closes idle keep-alive connections only once quiet, and resets
// nobody: clients that keep sending on keep-alive connections during the
// drain, some idle for a few milliseconds now and then, get every request
// answered, the last one with Connection: close. (With fasthttp's own
// Shutdown, which closes idle connections at once, requests were lost.)
func TestShutdownResetsNobody(t *testing.T) {
	t.Parallel()
	bs := blockingStore{entered: make(chan struct{}, 1), release: make(chan struct{})}
	h, _ := newHandler(t, setup{wrap: func(st shortener.Store) shortener.Store { bs.Store = st; return bs }})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpapi.NewServer(slog.New(slog.DiscardHandler), h, httpapi.ServerConfig{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	// A create the store holds is in flight when the stop begins.
	held := make(chan *http.Response, 1)
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Error(err)
			held <- nil
			return
		}
		defer c.Close()
		io.WriteString(c, "POST /shortenURL HTTP/1.1\r\nHost: x\r\nContent-Length: 36\r\n\r\n"+`{"OriginalURL":"https://held.test/"}`)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Errorf("held create: %v", err)
		}
		held <- resp
	}()
	<-bs.entered

	const clients = 16
	var (
		wg          sync.WaitGroup
		answered    atomic.Int64
		closeHeader atomic.Int64
		started     = make(chan struct{}, clients)
	)
	for i := range clients {
		wg.Go(func() {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			br := bufio.NewReader(c)
			for n := 0; ; n++ {
				if n == 2 {
					started <- struct{}{}
				}
				if i%2 == 1 {
					time.Sleep(time.Duration(n%5) * time.Millisecond) // some connections are idle now and then
				}
				if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
					if errors.Is(err, syscall.ECONNRESET) {
						t.Errorf("client %d: write: %v", i, err)
					}
					return
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					// A request sent is answered: a busy client is
					// never closed on between two requests.
					t.Errorf("client %d: closed without an answer after %d answers: %v", i, n, err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("client %d: status %d", i, resp.StatusCode)
				}
				answered.Add(1)
				if resp.Close {
					closeHeader.Add(1)
					return
				}
			}
		})
	}
	for range clients {
		<-started
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Shutdown(ctx) }()
	for { // the stop has begun once the listener is closed
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			break
		}
		c.Close()
	}
	wg.Wait() // the idle and busy keep-alive clients are done
	close(bs.release)
	if resp := <-held; resp == nil || resp.StatusCode != 201 || !resp.Close {
		t.Errorf("the create in flight during the stop: %+v, want 201 with Connection: close", resp)
	}
	if err := <-stopped; err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
	if closeHeader.Load() != clients {
		t.Errorf("%d of %d clients got Connection: close", closeHeader.Load(), clients)
	}
	t.Logf("%d answers, %d with Connection: close", answered.Load(), closeHeader.Load())
}

// A request body is read once, out of fasthttp's stream, and the server
// logs nothing about it: fasthttp presents even a body read with the
// headers as a stream, and Request.Body on one logged a warning through
// the server's logger on every create (a line per request in make
// bench-serve's create rounds). Known-length and chunked bodies, the
// seed's create and the REST one.
func TestServerBodyReadWithoutWarning(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, _ := newHandler(t, setup{})
	addr := serveLogger(t, h, httpapi.ServerConfig{}, logger)
	tests := []struct {
		name, path, body string
		chunked          bool
	}{
		{"seed create, Content-Length", "/shortenURL", `{"OriginalURL":"https://a.example/1"}`, false},
		{"seed create, chunked", "/shortenURL", `{"OriginalURL":"https://a.example/2"}`, true},
		{"REST create, Content-Length", "/api/v1/links", `{"url":"https://a.example/3"}`, false},
	}
	for _, tt := range tests {
		c := dial(t, addr)
		var req string
		if tt.chunked {
			req = fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", tt.path, len(tt.body), tt.body)
		} else {
			req = fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", tt.path, len(tt.body), tt.body)
		}
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Errorf("%s: %d %s", tt.name, resp.StatusCode, body)
		}
	}
	if s := logs.String(); strings.Contains(s, "WARN") || strings.Contains(s, "entire stream") {
		t.Errorf("the server logged:\n%s", s)
	}
}
