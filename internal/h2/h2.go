// Package h2 is linkgate's HTTP/2 server (RFC 9113), shared by the
// gateway's and serve's TLS listeners: a connection handed over after
// ALPN chose h2 (or a cleartext h2c connection) is served here, and each
// stream's request reaches the Handler as a fasthttp.RequestCtx, so
// HTTP/1.1 and HTTP/2 requests take one code path.
//
// The wire format is golang.org/x/net/http2's Framer and hpack; the
// connection state machine is ours. Go's HTTP/2 servers (net/http's and
// x/net's) run every stream in a goroutine of its own behind a
// net/http.Request, and serialise the connection's writes through a
// scheduler goroutine: measured under h2load, that cost about 47 µs of
// CPU per request more than HTTP/1.1 over TLS (docs/gateway.md), spent in
// goroutine starts, stack growth, channel hand-offs and header maps. Here
// one goroutine per connection reads and decodes frames straight into a
// pooled fasthttp.RequestCtx, a small pool of long-lived workers runs the
// Handler (the same code as the server's HTTP/1.1 requests), and the worker that finishes a response encodes it and writes
// it; whoever finds the connection's output buffer unflushed flushes it,
// so responses finishing together go out in one TLS write.
//
// What it keeps of RFC 9113: SETTINGS and their ACK, PING, flow control
// both ways (connection and stream windows; the receive windows are
// given back as the handler reads, so a connection buffers at most
// h2ConnWindow of request bodies), RST_STREAM, GOAWAY on shutdown and on
// protocol errors, CONTINUATION, a header list size limit (a larger block
// closes the connection), SETTINGS_MAX_CONCURRENT_STREAMS (streams over
// the cap are refused), request bodies streamed to the handler, streamed
// response bodies flushed read by read (server-sent events), trailers
// accepted and dropped (as the HTTP/1.1 path drops them), extended
// CONNECT for WebSocket (RFC 8441), idle and read timeouts.
//
// Rapid reset (CVE-2023-44487): a stream the client resets keeps its slot
// under the concurrency cap until its handler returns, a reset before a
// worker picks the stream up costs no handler at all, and a connection
// whose resets (and refused streams) outnumber half its answered requests
// by more than twice the cap gets GOAWAY ENHANCE_YOUR_CALM and is closed.
package h2

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"
)

// Handler serves one stream's request. It reads the request from
// s.Ctx() and writes the response there, as a fasthttp.RequestHandler
// does; the server sends the response when ServeStream returns.
type Handler interface {
	ServeStream(s *Stream)
}

// HandlerFunc is a function as a Handler.
type HandlerFunc func(s *Stream)

// ServeStream calls f(s).
func (f HandlerFunc) ServeStream(s *Stream) { f(s) }

// FastHTTP is a fasthttp.RequestHandler as a Handler.
func FastHTTP(h fasthttp.RequestHandler) Handler {
	return HandlerFunc(func(s *Stream) { h(s.fc) })
}

// Options configures a Server. Zero values take the defaults below.
type Options struct {
	// MaxConcurrentStreams is SETTINGS_MAX_CONCURRENT_STREAMS (default
	// 128, nginx's http2_max_concurrent_streams).
	MaxConcurrentStreams uint32
	// MaxHeaderBytes bounds a request's header list (default 32 KiB,
	// nginx's large_client_header_buffers).
	MaxHeaderBytes int
	// ServerHeader is sent as server unless the response has one.
	ServerHeader string
	// ReadTimeout bounds each read of a header block or a body piece,
	// WriteTimeout each write and each wait for a flow-control window,
	// IdleTimeout a connection without streams (default 60 s each).
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// ExtendedConnect announces SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC
	// 8441): CONNECT with :protocol reaches the handler, which may answer
	// it with Stream.Tunnel. Without it such a request is malformed.
	ExtendedConnect bool
	// Logger is the RequestCtx's logger.
	Logger fasthttp.Logger
}

// Defaults of Options.
const (
	DefaultMaxStreams     = 128
	DefaultMaxHeaderBytes = 32 << 10
	defaultTimeout        = 60 * time.Second
)

// Server serves HTTP/2 connections with one Handler.
type Server struct {
	opts    Options
	handler Handler
	workers workerPool

	mu     sync.Mutex // guards conns and closed
	conns  map[*conn]struct{}
	closed bool
	wg     sync.WaitGroup
	open   atomic.Int64
}

// NewServer returns a Server of h.
func NewServer(h Handler, o Options) *Server {
	if o.MaxConcurrentStreams == 0 {
		o.MaxConcurrentStreams = DefaultMaxStreams
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	for _, d := range []*time.Duration{&o.ReadTimeout, &o.WriteTimeout, &o.IdleTimeout} {
		if *d <= 0 {
			*d = defaultTimeout
		}
	}
	if o.Logger == nil {
		o.Logger = discard{}
	}
	return &Server{opts: o, handler: h, conns: map[*conn]struct{}{}}
}

type discard struct{}

func (discard) Printf(string, ...any) {}

// Conns is the number of connections being served.
func (s *Server) Conns() int64 { return s.open.Load() }

// add registers a connection; false once shutting down.
func (s *Server) add(sc *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[sc] = struct{}{}
	s.wg.Add(1)
	s.open.Add(1)
	return true
}

func (s *Server) remove(sc *conn) {
	s.mu.Lock()
	delete(s.conns, sc)
	s.mu.Unlock()
	s.open.Add(-1)
	s.wg.Done()
}

// Shutdown sends GOAWAY on every connection and waits for their streams,
// until ctx ends (then closes them). Connections handed over afterwards
// are closed at once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for sc := range s.conns {
		conns = append(conns, sc)
	}
	s.mu.Unlock()
	for _, sc := range conns {
		sc.shutdown()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		for _, sc := range conns {
			sc.c.Close()
		}
		<-done
	}
	s.workers.stop()
	return err
}

// Ctx is the stream's request and response. The RequestCtx belongs to
// the stream: nothing of it may be kept after ServeStream returns.
func (st *Stream) Ctx() *fasthttp.RequestCtx { return st.fc }

// Protocol is the :protocol of an extended CONNECT (RFC 8441), "" for
// any other request.
func (st *Stream) Protocol() string { return st.connect }

// Tunnel answers an extended CONNECT with 200 and h, and returns the
// stream as a tunnel: its DATA both ways, without the read timeout (the
// tunnel keeps its own). The handler relays over it until either side
// ends, then returns; the stream ends with it. Close ends the relay:
// reads end, writes fail.
func (st *Stream) Tunnel(h *fasthttp.ResponseHeader) io.ReadWriteCloser {
	sc := st.sc
	st.tunnel = true
	ok := sc.writeHeaders(st, http.StatusOK, h, -1, false)
	sc.flush()
	side := tunnelSide{st}
	if !ok {
		_ = side.Close()
	}
	return side
}

var bodyBufs = sync.Pool{New: func() any { b := make([]byte, 8<<10); return &b }}

func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
