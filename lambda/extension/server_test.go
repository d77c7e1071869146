package extension_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/lambda/extension"
)

// startServer runs a TelemetryServer on 127.0.0.1:0 that records bodies.
func startServer(t *testing.T, maxBody, maxConns int) (*extension.TelemetryServer, string, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	s := &extension.TelemetryServer{
		MaxBody:  maxBody,
		MaxConns: maxConns,
		Handle: func(body []byte) error {
			if bytes.HasPrefix(body, []byte("bad")) {
				return errors.New("bad body")
			}
			mu.Lock()
			got = append(got, string(body))
			mu.Unlock()
			return nil
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, ln.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// exchange writes raw requests on one connection and returns everything the
// server answered until it closed the connection or went quiet.
func exchange(t *testing.T, addr, raw string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	buf := make([]byte, 4096)
	for {
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := c.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			return out.String()
		}
	}
}

func TestTelemetryServer(t *testing.T) {
	tests := []struct {
		name     string
		raw      string
		wantResp []string // status lines in order
		wantGot  []string
		junk     int64
	}{
		{name: "content-length", raw: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n[]",
			wantResp: []string{"200"}, wantGot: []string{"[]"}},
		{name: "keep-alive pipelined", raw: "POST / HTTP/1.1\r\nContent-Length: 1\r\n\r\nAPOST /x HTTP/1.1\r\ncontent-length: 1\r\n\r\nB",
			wantResp: []string{"200", "200"}, wantGot: []string{"A", "B"}},
		{name: "chunked", raw: "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: x\r\n\r\n",
			wantResp: []string{"200"}, wantGot: []string{"abcde"}},
		{name: "expect 100-continue", raw: "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok",
			wantResp: []string{"100", "200"}, wantGot: []string{"ok"}},
		{name: "http/1.0 closes", raw: "POST / HTTP/1.0\r\nContent-Length: 1\r\n\r\nAPOST / HTTP/1.0\r\nContent-Length: 1\r\n\r\nB",
			wantResp: []string{"200"}, wantGot: []string{"A"}},
		{name: "connection close", raw: "POST / HTTP/1.1\r\nConnection: close\r\nContent-Length: 1\r\n\r\nAPOST / HTTP/1.1\r\nContent-Length: 1\r\n\r\nB",
			wantResp: []string{"200"}, wantGot: []string{"A"}},
		{name: "handler rejects", raw: "POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nbad", wantResp: []string{"400"}, junk: 1},
		{name: "GET", raw: "GET / HTTP/1.1\r\n\r\n", wantResp: []string{"405"}, junk: 1},
		{name: "garbage", raw: "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", wantResp: []string{"400"}, junk: 1},
		{name: "too large", raw: "POST / HTTP/1.1\r\nContent-Length: 65\r\n\r\n", wantResp: []string{"413"}, junk: 1},
		{name: "too large chunked", raw: "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n" + strings.Repeat("a", 64) + "\r\n1\r\nb\r\n0\r\n\r\n", wantResp: []string{"413"}, junk: 1},
		{name: "header too long", raw: "POST / HTTP/1.1\r\nX: " + strings.Repeat("a", 5000) + "\r\n\r\n", wantResp: []string{"431"}, junk: 1},
		{name: "conflicting lengths", raw: "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", wantResp: []string{"400"}, junk: 1},
		{name: "length and chunked", raw: "POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", wantResp: []string{"400"}, junk: 1},
		{name: "unknown transfer coding", raw: "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", wantResp: []string{"400"}, junk: 1},
		{name: "folded header", raw: "POST / HTTP/1.1\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n", wantResp: []string{"400"}, junk: 1},
		{name: "bad chunk size", raw: "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", wantResp: []string{"400"}, junk: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, addr, got := startServer(t, 64, 4)
			out := exchange(t, addr, tt.raw)
			var statuses []string
			for _, line := range strings.Split(out, "\r\n") {
				if strings.HasPrefix(line, "HTTP/1.1 ") {
					statuses = append(statuses, line[9:12])
				}
			}
			if strings.Join(statuses, ",") != strings.Join(tt.wantResp, ",") {
				t.Errorf("answers %v, want %v; raw %q", statuses, tt.wantResp, out)
			}
			if g := got(); strings.Join(g, "|") != strings.Join(tt.wantGot, "|") {
				t.Errorf("bodies %q, want %q", g, tt.wantGot)
			}
			if s.Junk() != tt.junk {
				t.Errorf("junk %d, want %d", s.Junk(), tt.junk)
			}
		})
	}
}

// Lambda's own sender is an ordinary HTTP client; net/http stands in for it.
func TestTelemetryServerWithNetHTTPClient(t *testing.T) {
	s, addr, got := startServer(t, 1<<20, 4)
	body := strings.Repeat(`{"type":"function","record":"x"},`, 1000)
	for i := 0; i < 3; i++ {
		// Unknown length makes net/http send it chunked.
		resp, err := http.Post("http://"+addr+"/", "application/json", io.MultiReader(strings.NewReader(body)))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("post %d: %v %v", i, resp, err)
		}
		resp.Body.Close()
	}
	if g := got(); len(g) != 3 || g[2] != body {
		t.Errorf("got %d bodies", len(g))
	}
	if s.Deliveries() != 3 || s.Junk() != 0 {
		t.Errorf("deliveries %d junk %d", s.Deliveries(), s.Junk())
	}
}

func TestTelemetryServerMaxConns(t *testing.T) {
	s, addr, _ := startServer(t, 64, 1)
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	io.WriteString(idle, "P") // a started request holds the only slot
	// No wait needed: the listener's queue is first in, first out, and the
	// server takes a connection's slot before it accepts the next one.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("second connection was served: %d %v", n, err)
	}
	if s.Junk() != 1 {
		t.Errorf("junk %d, want 1", s.Junk())
	}
}

func FuzzTelemetryServerRequest(f *testing.F) {
	f.Add([]byte("POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n[]"))
	f.Add([]byte("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		// The server must answer or close, never hang or crash, and hand
		// the handler nothing larger than MaxBody.
		s := &extension.TelemetryServer{MaxBody: 64, MaxConns: 2, Handle: func(b []byte) error {
			if len(b) > 64 {
				t.Errorf("body of %d bytes", len(b))
			}
			return nil
		}}
		client, server := net.Pipe()
		ln := &pipeListener{conns: make(chan net.Conn, 1)}
		ln.conns <- server
		done := make(chan struct{})
		go func() { s.Serve(ln); close(done) }()
		go func() { client.Write(raw); client.Close() }()
		io.Copy(io.Discard, client)
		s.Close()
		<-done
	})
}

// pipeListener hands out queued connections, then blocks until closed.
type pipeListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
	mu    sync.Mutex
}

func (l *pipeListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.done == nil {
		l.done = make(chan struct{})
	}
	done := l.done
	l.mu.Unlock()
	select {
	case c := <-l.conns:
		return c, nil
	case <-done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.mu.Lock()
	if l.done == nil {
		l.done = make(chan struct{})
	}
	l.mu.Unlock()
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{} }
