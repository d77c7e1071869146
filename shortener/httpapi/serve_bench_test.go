package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"net"
	"testing"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/linkgate/linkgate/internal/testdep"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/httpapi"
)

// BenchmarkServeRedirect is one id followed over a keep-alive connection
// through the whole Server (the deadline and linger wrappers, fasthttp,
// the handler) on an in-memory listener, so that the kernel's loopback
// TCP, which costs the same with any handler, does not drown what the
// server adds; "fasthttp-empty" is fasthttp with an empty redirect
// handler (tools/enginebench) in the same harness: the anchor. The
// client runs in the same process; cpu-ns/op is the process's CPU time
// (user and system) per request, which time taken by other processes on
// a shared machine does not inflate. Target: 0 allocs/op.
func BenchmarkServeRedirect(b *testing.B) {
	const target = "https://aws.amazon.com/ec2/graviton/"
	b.Run("linkgate", func(b *testing.B) {
		h, store := newHandler(b, setup{})
		if err := store.Create(context.Background(), shortener.Link{ID: "bench00000", URL: target}); err != nil {
			b.Fatal(err)
		}
		srv := httpapi.NewServer(slog.New(slog.DiscardHandler), h, httpapi.ServerConfig{})
		benchmarkServe(b, func(ln net.Listener) error { return srv.Serve(ln) }, func() { _ = srv.Shutdown(context.Background()) })
	})
	b.Run("fasthttp-empty", func(b *testing.B) {
		loc := []byte(target)
		srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.Response.Header.SetBytesV("Location", loc)
			ctx.SetStatusCode(fasthttp.StatusFound)
		}, NoDefaultContentType: true}
		benchmarkServe(b, srv.Serve, func() { _ = srv.Shutdown() })
	})
}

func benchmarkServe(b *testing.B, serve func(net.Listener) error, stop func()) {
	ln := fasthttputil.NewInmemoryListener()
	done := make(chan error, 1)
	go func() { done <- serve(ln) }()
	defer func() { stop(); <-done }()
	c, err := ln.Dial()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := []byte("GET /bench00000 HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: wrk\r\n\r\n")
	br := bufio.NewReader(c)
	b.ReportAllocs()
	cpu0 := testdep.CPUTime()
	for b.Loop() {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		line, err := br.ReadSlice('\n')
		if err != nil || !bytes.HasPrefix(line, []byte("HTTP/1.1 302")) {
			b.Fatalf("status line %q, %v", line, err)
		}
		for len(line) > 2 { // headers, up to the blank line (no body)
			if line, err = br.ReadSlice('\n'); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(testdep.CPUTime()-cpu0)/float64(b.N), "cpu-ns/op")
}
