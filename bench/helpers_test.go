package bench_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/bench"
)

// serve starts an in-test HTTP target on 127.0.0.1:0.
func serve(t testing.TB, h http.HandlerFunc) *url.URL {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL + "/")
	return u
}

// rawTarget is a minimal keep-alive HTTP server on 127.0.0.1:0 that answers
// every GET with the same bytes and allocates nothing per request, so a
// benchmark of the generator in the same process measures the generator.
func rawTarget(t testing.TB, response string) *url.URL {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	resp := []byte(response)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				buf := make([]byte, 64<<10)
				out := make([]byte, 0, 64<<10)
				pending := 0 // bytes of a request end split across reads
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					data := buf[:n]
					out = out[:0]
					for {
						i := bytes.Index(data, []byte("\r\n\r\n"))
						if i < 0 {
							break
						}
						out = append(out, resp...)
						data = data[i+4:]
					}
					_ = pending
					if _, err := c.Write(out); err != nil {
						return
					}
				}
			}()
		}
	}()
	u, _ := url.Parse("http://" + ln.Addr().String() + "/")
	return u
}

// config is a short run against u with a static GET.
func config(u *url.URL, threads, conns int, d time.Duration, rate float64) bench.Config {
	req := bench.Static(bench.AppendRequest(nil, "GET", u.RequestURI(),
		bench.Fields{{Name: "Host", Value: u.Host}}, nil))
	return bench.Config{
		URL: u, Threads: threads, Connections: conns, Duration: d, Timeout: 2 * time.Second, Rate: rate,
		NewRequester: func(int) (bench.Requester, error) { return req, nil },
	}
}

func run(t testing.TB, c bench.Config) *bench.Result {
	t.Helper()
	res, err := bench.Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func ms(us int64) time.Duration { return time.Duration(us) * time.Microsecond }
