package stream_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/stream"
	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/testcert"
)

// bound is how long any one network step of these tests may take before
// the test fails instead of hanging: never reached when the proxy works.
const bound = 10 * time.Second

// server is a real TCP server on 127.0.0.1 running handle per connection.
func server(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				handle(c)
			})
		}
	})
	return ln.Addr().String()
}

// echo answers each line with name + ":" + the line.
func echo(name string) func(net.Conn) {
	return func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if _, err := io.WriteString(c, name+":"+line); err != nil {
				return
			}
		}
	}
}

func node(t *testing.T, addr string, weight int) gateway.Node {
	t.Helper()
	host, port, err := gateway.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return gateway.Node{Host: host, Port: port, Weight: weight}
}

// start serves p on a new 127.0.0.1 listener and returns its address.
func start(t *testing.T, p *stream.Proxy, withTLS bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		if withTLS {
			done <- p.ServeTLS(ln)
		} else {
			done <- p.Serve(ln)
		}
	}()
	t.Cleanup(func() {
		p.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, bound)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(bound))
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends a line and returns the answer line ("" when the proxy
// closed the connection instead).
func roundTrip(t *testing.T, c net.Conn, line string) string {
	t.Helper()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return ""
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("no answer within %v", bound)
		}
		return ""
	}
	return strings.TrimSuffix(got, "\n")
}

func route(id string, up *gateway.Upstream, set func(*gateway.StreamRouteEntry)) *gateway.StreamRouteEntry {
	r := &gateway.StreamRouteEntry{ID: id, Upstream: up, UpstreamKey: "stream_routes/" + id}
	if set != nil {
		set(r)
	}
	return r
}

func load(p *stream.Proxy, routes ...*gateway.StreamRouteEntry) {
	p.Load(&gateway.Compiled{StreamRoutes: routes})
}

// Connections reach the upstream of the route that matches them; one no
// route matches is closed.
func TestRoutes(t *testing.T) {
	a := &gateway.Upstream{Type: "roundrobin", Nodes: gateway.Nodes{node(t, server(t, echo("a")), 1)}}
	b := &gateway.Upstream{Type: "roundrobin", Nodes: gateway.Nodes{node(t, server(t, echo("b")), 1)}}
	p := stream.New(stream.Options{})
	addr1 := start(t, p, false)
	addr2 := start(t, p, false)
	port2, _ := strconv.Atoi(addr2[strings.LastIndex(addr2, ":")+1:])
	load(p,
		route("1", a, func(r *gateway.StreamRouteEntry) { r.ServerPort = port2 }),
		route("2", b, func(r *gateway.StreamRouteEntry) { r.RemoteAddr = netip.MustParsePrefix("127.0.0.0/26") }),
	)
	for _, tc := range []struct{ name, addr, want string }{
		{"server_port", addr2, "a:x"},
		{"remote_addr", addr1, "b:x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := roundTrip(t, dial(t, tc.addr), "x"); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	load(p, route("2", b, func(r *gateway.StreamRouteEntry) { r.RemoteAddr = netip.MustParsePrefix("127.0.0.2/32") }))
	if got := roundTrip(t, dial(t, addr1), "x"); got != "" {
		t.Errorf("no route matches, got %q, want the connection closed", got)
	}
	if s := p.Stats(); s.NoRoute != 1 {
		t.Errorf("stats %+v, want NoRoute 1", s)
	}
}

// Round-robin follows the weights; chash sends a client to one node;
// a node that refuses is skipped for the next one (retries).
func TestBalance(t *testing.T) {
	a, b := node(t, server(t, echo("a")), 2), node(t, server(t, echo("b")), 1)
	dead := node(t, deadAddr(t), 1)
	for _, tc := range []struct {
		name string
		up   *gateway.Upstream
		want map[string]int
	}{
		{"roundrobin weights", &gateway.Upstream{Type: "roundrobin", Nodes: gateway.Nodes{a, b}}, map[string]int{"a:x": 4, "b:x": 2}},
		{"chash remote_addr", &gateway.Upstream{Type: "chash", Key: "remote_addr", Nodes: gateway.Nodes{a, b}}, nil},
		{"retry past a dead node", &gateway.Upstream{Type: "roundrobin", Nodes: gateway.Nodes{dead, b}}, map[string]int{"b:x": 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := stream.New(stream.Options{})
			addr := start(t, p, false)
			load(p, route("1", tc.up, nil))
			got := map[string]int{}
			for range 6 {
				got[roundTrip(t, dial(t, addr), "x")]++
			}
			if tc.want == nil { // chash: all on one node
				if len(got) != 1 || got[""] != 0 {
					t.Errorf("answers %v, want all from one node", got)
				}
				return
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("answers %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("retries 0: a dead node fails the connection", func(t *testing.T) {
		p := stream.New(stream.Options{})
		addr := start(t, p, false)
		zero := 0
		load(p, route("1", &gateway.Upstream{Type: "roundrobin", Retries: &zero, Nodes: gateway.Nodes{dead, b}}, nil))
		closed := 0
		for range 2 {
			if roundTrip(t, dial(t, addr), "x") == "" {
				closed++
			}
		}
		if closed != 1 || p.Stats().UpstreamFailed != 1 {
			t.Errorf("%d of 2 connections closed (stats %+v), want 1: the dead node's turn", closed, p.Stats())
		}
	})
}

// deadAddr is a 127.0.0.1 port nothing listens on.
func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// The client's half-close reaches the upstream, whose answer, sent after
// it saw the end of the request, still reaches the client. Red without
// passing the EOF on as CloseWrite: the upstream waits forever and the
// client's read times out.
func TestHalfClose(t *testing.T) {
	up := server(t, func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c) // until the client's FIN
		fmt.Fprintf(c, "read %d bytes", n)
	})
	p := stream.New(stream.Options{})
	addr := start(t, p, false)
	load(p, route("1", &gateway.Upstream{Type: "roundrobin", Nodes: gateway.Nodes{node(t, up, 1)}}, nil))
	c := dial(t, addr)
	if _, err := io.WriteString(c, strings.Repeat("z", 100000)); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading the answer after the half-close: %v", err)
	}
	if string(got) != "read 100000 bytes" {
		t.Errorf("got %q", got)
	}
}

// A connection idle both ways for the idle timeout is closed, on both
// sides. Red without the read deadlines: the client's read times out.
func TestIdleTimeout(t *testing.T) {
	upClosed := make(chan struct{})
	up := server(t, func(c net.Conn) {
		_, _ = io.Copy(io.Discard, c)
		close(upClosed)
	})
	p := stream.New(stream.Options{IdleTimeout: 50 * time.Millisecond})
	addr := start(t, p, false)
	load(p, route("1", &gateway.Upstream{Type: "roundrobin", Nodes: gateway.Nodes{node(t, up, 1)}}, nil))
	c := dial(t, addr)
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read on an idle connection: %v, want EOF (closed by the proxy)", err)
	}
	select {
	case <-upClosed:
	case <-time.After(bound):
		t.Fatal("the upstream connection was not closed")
	}
}

// At most MaxConns connections are proxied at once: one more is closed
// as soon as accepted, and a freed slot serves again. Red without the
// bound: the third connection is answered.
func TestMaxConns(t *testing.T) {
	up := &gateway.Upstream{Type: "roundrobin", Nodes: gateway.Nodes{node(t, server(t, echo("a")), 1)}}
	p := stream.New(stream.Options{MaxConns: 2})
	addr := start(t, p, false)
	load(p, route("1", up, nil))
	c1, c2 := dial(t, addr), dial(t, addr)
	for _, c := range []net.Conn{c1, c2} {
		if got := roundTrip(t, c, "x"); got != "a:x" {
			t.Fatalf("within the limit: %q", got)
		}
	}
	if got := roundTrip(t, dial(t, addr), "x"); got != "" {
		t.Errorf("third connection answered %q, want it closed", got)
	}
	if s := p.Stats(); s.Refused != 1 || s.Active != 2 {
		t.Errorf("stats %+v, want Refused 1, Active 2", s)
	}
	c1.Close()
	eventually.True(t, bound, "the slot freed", func() bool { return p.Stats().Active == 1 })
	if got := roundTrip(t, dial(t, addr), "x"); got != "a:x" {
		t.Errorf("after a slot freed: %q", got)
	}
}

// Close ends every connection and listener and leaves no goroutine
// behind. Red without closing the connections: Close never returns.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	up := &gateway.Upstream{Type: "roundrobin", Nodes: gateway.Nodes{node(t, server(t, echo("a")), 1)}}
	before := runtime.NumGoroutine()
	p := stream.New(stream.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(ln) }()
	load(p, route("1", up, nil))
	var conns []net.Conn
	for range 5 {
		c := dial(t, ln.Addr().String())
		if got := roundTrip(t, c, "x"); got != "a:x" {
			t.Fatalf("got %q", got)
		}
		conns = append(conns, c)
	}
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(bound):
		t.Fatal("Close did not return")
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	for _, c := range conns {
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("client connection after Close: %v, want EOF", err)
		}
	}
	// The upstream test server's own goroutines end with the connections.
	eventually.True(t, bound, "goroutines back to where they were", func() bool { return runtime.NumGoroutine() <= before+1 })
}

// On a TLS listener the SNI picks among the routes that name one; the
// upstream may be TLS too (scheme tls).
func TestTLS(t *testing.T) {
	ca := testcert.NewCA(t, "stream test CA")
	pair := ca.Issue(t, testcert.Options{DNS: []string{"*.s.test", "a.s.test"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	tlsUp, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair.TLS}})
	if err != nil {
		t.Fatal(err)
	}
	defer tlsUp.Close()
	go func() {
		for {
			c, err := tlsUp.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); echo("tls-up")(c) }()
		}
	}()
	plain := &gateway.Upstream{Type: "roundrobin", Nodes: gateway.Nodes{node(t, server(t, echo("plain")), 1)}}
	overTLS := &gateway.Upstream{Type: "roundrobin", Scheme: "tls", Nodes: gateway.Nodes{node(t, tlsUp.Addr().String(), 1)}}
	p := stream.New(stream.Options{TLS: &tls.Config{Certificates: []tls.Certificate{pair.TLS}}})
	addr := start(t, p, true)
	load(p,
		route("a", overTLS, func(r *gateway.StreamRouteEntry) { r.SNI = "a.s.test" }),
		route("b", plain, func(r *gateway.StreamRouteEntry) { r.SNI = "*.s.test" }),
	)
	for _, tc := range []struct{ sni, want string }{{"a.s.test", "tls-up:x"}, {"b.s.test", "plain:x"}} {
		t.Run(tc.sni, func(t *testing.T) {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: bound}, "tcp", addr, &tls.Config{ServerName: tc.sni, RootCAs: ca.Pool()})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(bound))
			if got := roundTrip(t, c, "x"); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
