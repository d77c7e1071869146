package httpapi

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http/httputil"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/internal/deadline"
)

// Streamed requests and answers. The server runs fasthttp with
// StreamRequestBody, so a request body reaches the handler as a stream:
// readBody reads it whole, within MaxBodyBytes, for every route but the
// import, whose body is read line by line as it arrives (transfer.go).
// The import and the export answer as they go: they take the connection
// over (hijack) and write a chunked answer of their own, each read and
// write of it bounded by Config.StreamTimeout instead of the server's
// whole-request limits, so a slow but steady client is never cut off and
// a stalled one is.

// streamedBody reports whether the request's body is read as a stream
// by its handler: POST /api/v1/import.
func streamedBody(ctx *fasthttp.RequestCtx) bool {
	return string(ctx.Method()) == fasthttp.MethodPost && bytes.Equal(ctx.Path(), pathImport)
}

// readBody reads a request body that fasthttp left as a stream, within
// MaxBodyBytes, before the request is handled (so within its read
// timeout); false when it answered the request (413, or the error
// reading it). A body of known length up to the limit was read with
// the headers already, but fasthttp still presents it as a stream, and
// Request.Body on a stream logs a warning through the server's logger
// on every call (fasthttp's http.go): so every body is moved out of its
// stream here, through a pooled buffer, and handlers' PostBody reads it
// as a plain body.
func readBody(ctx *fasthttp.RequestCtx) bool {
	if !ctx.Request.IsBodyStream() || streamedBody(ctx) {
		return true
	}
	cl := ctx.Request.Header.ContentLength()
	switch {
	case cl > MaxBodyBytes:
		HandleServerError(ctx, fasthttp.ErrBodyTooLarge)
		return false
	case cl == 0:
		return true // nothing to read (a GET): no copy on the redirect's path
	}
	buf := bodyBufs.Get().(*bytes.Buffer)
	defer bodyBufs.Put(buf)
	buf.Reset()
	_, err := buf.ReadFrom(io.LimitReader(ctx.RequestBodyStream(), MaxBodyBytes+1))
	switch {
	case buf.Len() > MaxBodyBytes:
		HandleServerError(ctx, fasthttp.ErrBodyTooLarge)
		return false
	case err != nil:
		HandleServerError(ctx, err)
		return false
	}
	ctx.Request.SetBody(buf.Bytes()) // copied into the request's own buffer
	return true
}

// bodyBufs are readBody's buffers.
var bodyBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// streamAnswer is an answer written as it goes on a connection taken
// over from the server: chunked over HTTP/1.1, until the connection
// closes over HTTP/1.0.
type streamAnswer struct {
	bw  *bufio.Writer  // the connection's
	cw  io.WriteCloser // the chunked encoder over bw; nil over HTTP/1.0
	out *bufio.Writer  // what fn writes: over cw, or bw
}

// hijack takes the request's connection over once the handler returns,
// and runs fn with an answer of status and contentType to write to (and
// the request's body, if it is streamed): fn's writes go out as they
// are flushed. Each read and write on the connection from now on has
// timeout of its own. The connection closes after fn. ok is false when
// the request did not come through a Server (the http.Handler adapter,
// Lambda): the caller answers some other way.
func hijack(ctx *fasthttp.RequestCtx, timeout time.Duration, status int, contentType string, fn func(body io.Reader, w io.Writer) error) (ok bool) {
	dc := deadline.Unwrap(ctx.Conn())
	if dc == nil {
		return false
	}
	dc.SetCallTimeouts(timeout, timeout)
	var body io.Reader = bytes.NewReader(nil)
	if ctx.Request.IsBodyStream() {
		body = ctx.RequestBodyStream()
	}
	http11 := ctx.Request.Header.IsHTTP11()
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		a := &streamAnswer{bw: bufio.NewWriterSize(c, 4<<10)}
		a.out = a.bw
		proto := "HTTP/1.1 "
		if !http11 {
			proto = "HTTP/1.0 "
		}
		a.bw.WriteString(proto + strconv.Itoa(status) + " " + fasthttp.StatusMessage(status) + "\r\n" +
			"Content-Type: " + contentType + "\r\nCache-Control: no-store\r\nConnection: close\r\n")
		if http11 {
			a.bw.WriteString("Transfer-Encoding: chunked\r\n")
			a.cw = httputil.NewChunkedWriter(a.bw)
			a.out = bufio.NewWriterSize(a.cw, 32<<10)
		}
		a.bw.WriteString("\r\n")
		if a.bw.Flush() != nil { // the status at once: the client need not wait for the first batch
			return
		}
		if err := fn(body, a); err != nil {
			// The answer is cut short: without its last chunk, the client
			// sees a truncated body, never a complete one.
			return
		}
		a.out.Flush()
		if a.cw != nil {
			a.cw.Close()
			a.bw.WriteString("\r\n")
		}
		a.bw.Flush()
	})
	return true
}

// Write buffers p; Flush sends what was written.
func (a *streamAnswer) Write(p []byte) (int, error) { return a.out.Write(p) }

// Flush sends what was written so far.
func (a *streamAnswer) Flush() error {
	if err := a.out.Flush(); err != nil {
		return err
	}
	return a.bw.Flush()
}

// flusher is an answer that sends what was written on Flush.
type flusher interface{ Flush() error }

// flush sends what w holds, if it holds anything back.
func flush(w io.Writer) error {
	if f, ok := w.(flusher); ok {
		return f.Flush()
	}
	return nil
}
