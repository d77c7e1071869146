package conformance

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"strings"
	"sync"
	"time"
)

// streamPort is the logical port of APISIX's stream test upstream.
const streamPort = 1995

// hasStreamSteps reports whether a file sends on the stream listener.
func hasStreamSteps(f *File) bool {
	for _, c := range f.Cases {
		for _, s := range c.Steps {
			if s.Stream != nil {
				return true
			}
		}
	}
	return false
}

// startStreamUpstream runs APISIX's stream test upstream (t/APISIX.pm's
// server on 1995): it reads one byte, answers "hello world\n" and closes.
// addrs gains it as the logical port 1995.
func startStreamUpstream(base map[int]string) (addrs map[int]string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := io.ReadFull(c, make([]byte, 1)); err == nil {
					_, _ = io.WriteString(c, "hello world\n")
				}
			})
		}
	})
	addrs = maps.Clone(base)
	addrs[streamPort] = ln.Addr().String()
	return addrs, func() { ln.Close(); wg.Wait() }, nil
}

// firstStreamAddr picks the first plain listener of the log line's
// stream=ADDR[,ADDR...] (tls:// ones are for TLS).
func firstStreamAddr(v string) string {
	for _, a := range strings.Split(strings.Trim(v, `"`), ",") {
		if a != "" && !strings.HasPrefix(a, "tls://") {
			return a
		}
	}
	return ""
}

// streamStep sends s.Stream on a new connection to the stream listener
// and reads until the gateway closes it (Test::Nginx's stream_request
// and stream_response; an empty request sends nothing).
func streamStep(g *gatewayProc, s Step) error {
	if g.stream == "" {
		return errors.New("a stream step, but the gateway has no --listen-stream")
	}
	if err := waitSync(g); err != nil {
		return err
	}
	timeout := 10 * time.Second
	if s.Timeout > 0 {
		timeout = time.Duration(s.Timeout * float64(time.Second))
	}
	c, err := net.DialTimeout("tcp", g.stream, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if *s.Stream != "" {
		if _, err := io.WriteString(c, *s.Stream); err != nil {
			return err
		}
	}
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("the gateway did not close the connection within %v (read %q)", timeout, b)
	}
	// A reset after the answer is a close too (the proxy closes both ways).
	return s.Want.check(&Response{Body: b})
}
