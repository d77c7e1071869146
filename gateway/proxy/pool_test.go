package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/internal/deadline"
	"github.com/linkgate/linkgate/internal/eventually"
)

// rawUpstream answers every request with 200 "ok". With oneShot it closes
// each connection after the first answer without saying so (as a node
// whose keepalive timeout just expired does). It counts connections, and
// hold delays answers until released.
type rawUpstream struct {
	addr    string
	conns   atomic.Int64
	open    atomic.Int64
	oneShot bool
	hold    chan struct{}
}

func startRawUpstream(t *testing.T, oneShot bool) *rawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{addr: ln.Addr().String(), oneShot: oneShot}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.conns.Add(1)
			u.open.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer u.open.Add(-1)
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, r.Body)
					if u.hold != nil {
						<-u.hold
					}
					if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil || u.oneShot {
						return
					}
				}
			}()
		}
	}()
	return u
}

func testPool(addr string, size, requests int, idle time.Duration) *nodePool {
	return newNodePool(clientKey{addr: addr, connect: time.Second, send: time.Second, read: time.Second,
		size: size, requests: requests, idle: idle}, deadline.New(deadline.TickFor(time.Second)))
}

func doGet(t *testing.T, p *nodePool, method string) error {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI("/x")
	req.Header.SetHost("node")
	req.UseHostHeader = true
	if err := p.do(req, resp, &exchange{}); err != nil {
		return err
	}
	if resp.StatusCode() != 200 || string(resp.Body()) != "ok" {
		t.Fatalf("answer %d %q", resp.StatusCode(), resp.Body())
	}
	return nil
}

func TestNodePoolKeepalive(t *testing.T) {
	t.Run("reuse", func(t *testing.T) {
		u := startRawUpstream(t, false)
		p := testPool(u.addr, 320, 1000, time.Minute)
		defer p.close()
		for range 10 {
			if err := doGet(t, p, "GET"); err != nil {
				t.Fatal(err)
			}
		}
		if n := u.conns.Load(); n != 1 {
			t.Errorf("10 sequential requests used %d connections, want 1", n)
		}
	})
	t.Run("requests per connection", func(t *testing.T) {
		u := startRawUpstream(t, false)
		p := testPool(u.addr, 320, 3, time.Minute)
		defer p.close()
		for range 7 {
			if err := doGet(t, p, "GET"); err != nil {
				t.Fatal(err)
			}
		}
		if n := u.conns.Load(); n != 3 {
			t.Errorf("7 requests with keepalive_pool.requests 3 used %d connections, want 3", n)
		}
		eventually.True(t, 2*time.Second, "spent connections are closed", func() bool { return u.open.Load() == 1 })
	})
	t.Run("idle size cap", func(t *testing.T) {
		u := startRawUpstream(t, false)
		u.hold = make(chan struct{})
		p := testPool(u.addr, 2, 1000, time.Minute)
		defer p.close()
		var wg sync.WaitGroup
		for range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := doGet(t, p, "GET"); err != nil {
					t.Error(err)
				}
			}()
		}
		eventually.True(t, 2*time.Second, "5 concurrent requests open 5 connections (open ones are not capped)", func() bool { return u.conns.Load() == 5 })
		close(u.hold)
		wg.Wait()
		eventually.True(t, 2*time.Second, "only keepalive_pool.size idle connections stay open", func() bool { return u.open.Load() == 2 })
	})
	t.Run("idle timeout", func(t *testing.T) {
		u := startRawUpstream(t, false)
		p := testPool(u.addr, 320, 1000, 50*time.Millisecond)
		defer p.close()
		if err := doGet(t, p, "GET"); err != nil {
			t.Fatal(err)
		}
		eventually.True(t, 2*time.Second, "an idle connection is closed after idle_timeout", func() bool { return u.open.Load() == 0 })
		if err := doGet(t, p, "GET"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("closed while idle", func(t *testing.T) {
		u := startRawUpstream(t, true)
		p := testPool(u.addr, 320, 1000, time.Minute)
		defer p.close()
		for i := range 3 {
			if err := doGet(t, p, "GET"); err != nil {
				t.Fatalf("GET %d on a node that closes idle connections: %v", i, err)
			}
			eventually.True(t, 2*time.Second, "node closed the connection", func() bool { return u.open.Load() == 0 })
		}
		// A POST may have been processed: it is not sent again.
		if err := doGet(t, p, "POST"); err == nil {
			t.Error("POST on a connection the node closed succeeded; want the error (not resent)")
		}
	})
}
