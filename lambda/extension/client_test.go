package extension_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/lambda/extension"
)

// Every response carrying "Connection: close" makes the client redial.
func TestClientWithoutKeepAlive(t *testing.T) {
	f := newFakeAPI(t)
	f.srv.Config.SetKeepAlivesEnabled(false)
	r := startExtension(t, f, func(c *extension.Config) { c.TelemetryAddr = "" })
	f.send(invokeEvent("8476a536-e9f4-11e8-9739-2dfe598c3fcd"))
	f.send(invokeEvent("9476a536-e9f4-11e8-9739-2dfe598c3fcd"))
	f.send(shutdownEvent())
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	if e := parseEMF(t, r.out.String()); e.sum("Invokes") != 2 {
		t.Errorf("invokes %v", e.values["Invokes"])
	}
}

// A keep-alive connection the API dropped while the extension was idle is
// redialled without losing the event.
func TestClientRedialsDroppedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for i := 0; ; i++ {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func(first bool) {
				defer conn.Close()
				br := bufio.NewReader(conn)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if req.URL.Path == "/2020-01-01/extension/register" {
						io.WriteString(conn, "HTTP/1.1 200 OK\r\nLambda-Extension-Identifier: id-1\r\nContent-Length: 2\r\n\r\n{}")
						continue
					}
					if first { // drop the idle connection instead of answering
						return
					}
					body := `{"eventType":"SHUTDOWN","shutdownReason":"spindown","deadlineMs":1}`
					fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				}
			}(i == 0)
		}
	}()
	c := extension.NewClient(ln.Addr().String())
	defer c.Close()
	if err := c.Register(context.Background(), "x", "INVOKE", "SHUTDOWN"); err != nil {
		t.Fatal(err)
	}
	var sends int
	ev, err := c.Next(func(time.Time) { sends++ })
	if err != nil || ev.Type != extension.EventShutdown || sends != 2 {
		t.Fatalf("Next = %v, %v after %d sends", ev, err, sends)
	}
}

func TestClientAPIError(t *testing.T) {
	f := newFakeAPI(t)
	f.registerErrors = []string{"Extension.TooManyExtensions"}
	c := extension.NewClient(f.addr())
	defer c.Close()
	err := c.Register(context.Background(), "linkgate-extension", "INVOKE")
	ae, ok := err.(*extension.APIError)
	if !ok || ae.Status != 403 || ae.Type != "Extension.TooManyExtensions" || !strings.Contains(err.Error(), "not allowed") {
		t.Errorf("Register error %#v", err)
	}
}

// BenchmarkNext is the invoke path of the extension: ask for the next event,
// read and decode it. The server side is a canned answer.
func BenchmarkNext(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	event := invokeEvent("8476a536-e9f4-11e8-9739-2dfe598c3fcd")
	answer := fmt.Sprintf("HTTP/1.1 200 OK\r\nLambda-Extension-Event-Identifier: e\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(event), event)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		req, err := http.ReadRequest(br) // the registration
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		io.WriteString(conn, "HTTP/1.1 200 OK\r\nLambda-Extension-Identifier: id-1\r\nContent-Length: 2\r\n\r\n{}")
		// Then bodiless GETs: skip to the blank line, answer. No
		// allocations here, so the benchmark counts the client's.
		ans := []byte(answer)
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(line) == 2 {
				conn.Write(ans)
			}
		}
	}()
	c := extension.NewClient(ln.Addr().String())
	defer c.Close()
	if err := c.Register(context.Background(), "x", "INVOKE", "SHUTDOWN"); err != nil {
		b.Fatal(err)
	}
	var last time.Time
	sent := func(at time.Time) { last = at }
	b.ReportAllocs()
	for b.Loop() {
		ev, err := c.Next(sent)
		if err != nil || ev.Type != extension.EventInvoke {
			b.Fatal(ev, err)
		}
	}
	_ = last
}
