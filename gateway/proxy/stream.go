package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/internal/deadline"
)

// Streaming. A request or response body up to bufferedBodyMax with a
// known length is read whole, as before: one write upstream, retries on
// another node possible, and body filters (response-rewrite's body, gzip)
// see it all; so is a chunked response whose every chunk already arrived
// with its header (bufferedChunks: nginx's echo, most small dynamic
// answers), which then goes to the client with a Content-Length in one
// write. Larger bodies, and other bodies of unknown length (chunked, or
// until the upstream closes), stream through with bounded memory: the
// upstream's answer is passed on as it arrives, read by read (server-sent
// events reach the client as the upstream sends them), and an upload goes
// upstream as the client sends it. A route whose plugins need the whole
// response body (a gateway.BodyFilter or BodyEncoder) still has it
// buffered, up to maxResponseBytes.
//
// While a body streams, each read and write of it gets its own timeout
// (nginx's client_body_timeout, send_timeout and proxy_read_timeout)
// instead of one over the whole request.
const bufferedBodyMax = 64 << 10

// prepareBody decides how a request body that fasthttp (or the HTTP/2
// server) left as a stream goes upstream: read whole when its length is
// known and small, else streamed, within MaxBodySize. false: answered 413.
func (g *Gateway) prepareBody(rc *reqCtx, ex *exchange) bool {
	req := &rc.fc.Request
	cl := req.Header.ContentLength()
	limit := int64(g.opts.MaxBodySize)
	if limit > 0 && int64(cl) > limit {
		rc.reply(gateway.Reply{Status: http.StatusRequestEntityTooLarge})
		rc.fc.SetConnectionClose()
		return false
	}
	if cl >= 0 && cl <= bufferedBodyMax {
		req.Body() // reads the stream whole: the buffered path, retries allowed
		return true
	}
	ex.rb = &reqBody{r: req.BodyStream(), limit: limit}
	req.SetBodyStream(ex.rb, cl)
	g.streamTimeouts(rc)
	return true
}

// streamTimeouts gives each read and write of the client connection its
// own timeout while a body streams through it (HTTP/1.1; HTTP/2 streams
// have net/http's).
func (g *Gateway) streamTimeouts(rc *reqCtx) {
	if rc.h2 {
		return
	}
	if dc := deadline.Unwrap(rc.fc.Conn()); dc != nil {
		dc.SetCallTimeouts(g.opts.ReadTimeout, g.opts.WriteTimeout)
	}
}

// errBodyTooLarge ends a streamed upload past MaxBodySize.
var errBodyTooLarge = errors.New("request body larger than the limit")

// reqBody is a streamed request body on its way upstream: it counts what
// was read (a retry is only possible before anything was), and stops at
// the size limit.
type reqBody struct {
	r     io.Reader
	n     int64
	limit int64 // 0: none
}

func (b *reqBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	if b.limit > 0 && b.n > b.limit {
		return n, errBodyTooLarge
	}
	return n, err
}

// upstreamBody is an upstream response body streamed to the client. It
// owns the upstream connection until the body ends: Close gives it back
// to its pool when the body was read to its end on a reusable connection,
// and closes it otherwise (a client gone mid-body). done runs once, at
// Close: the request's log phase and release.
type upstreamBody struct {
	p      *nodePool
	uc     *upConn
	r      io.Reader
	keep   bool // the connection may serve another request once the body ends
	eof    bool
	n      int64
	done   func(b *upstreamBody)
	closed bool
	// capture, when set, gets the body's first max bytes as they are
	// read (the request's CaptureResponseBody)
	capture *[]byte
	max     int
}

// streamBody sets up the stream of a response whose header was read from
// uc: Content-Length bytes, chunks, or everything until the upstream
// closes.
func (p *nodePool) streamBody(uc *upConn, resp *fasthttp.Response, keep bool) *upstreamBody {
	b := &upstreamBody{p: p, uc: uc, keep: keep}
	switch cl := resp.Header.ContentLength(); {
	case cl >= 0:
		b.r = io.LimitReader(uc.br, int64(cl))
	case cl == -1:
		b.r = &chunkedBody{br: uc.br, r: httputil.NewChunkedReader(uc.br)}
	default: // -2: the body ends when the upstream closes the connection
		b.r, b.keep = uc.br, false
	}
	return b
}

func (b *upstreamBody) Read(p []byte) (int, error) {
	if b.uc == nil {
		return 0, io.ErrClosedPipe
	}
	if b.eof {
		return 0, io.EOF
	}
	b.uc.dc.SetReadTimeout(b.p.read) // between two reads, as proxy_read_timeout
	n, err := b.r.Read(p)
	b.n += int64(n)
	if c := b.capture; c != nil && len(*c) < b.max {
		*c = append(*c, p[:min(n, b.max-len(*c))]...)
	}
	if err == io.EOF {
		b.eof = true
	}
	if err != nil && err != io.EOF {
		err = fmt.Errorf("upstream body: %w", err)
	}
	return n, err
}

// Close releases the upstream connection and runs done.
func (b *upstreamBody) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	if uc := b.uc; uc != nil {
		b.uc = nil
		if b.eof && b.keep {
			b.p.put(uc, time.Now())
		} else {
			b.p.discard(uc)
		}
	}
	if b.done != nil {
		b.done(b)
	}
	return nil
}

// chunkedBody decodes a chunked body and, at its end, reads the trailer
// section (dropped) so that the connection is at the next response.
type chunkedBody struct {
	br *bufio.Reader
	r  io.Reader
}

func (c *chunkedBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err == io.EOF {
		for {
			line, rerr := c.br.ReadSlice('\n')
			if rerr != nil {
				return n, fmt.Errorf("chunked trailer: %w", rerr)
			}
			if len(line) <= 2 && (len(line) == 1 || line[0] == '\r') {
				break
			}
		}
	}
	return n, err
}

// bufferedChunks reports whether br's buffer already holds a whole chunked
// body, so that reading it cannot wait on the upstream.
func bufferedChunks(br *bufio.Reader) bool {
	b, _ := br.Peek(br.Buffered())
	return chunkedLen(b) >= 0
}

// chunkedLen is the length of the chunked body at the start of b — its
// chunks, the last chunk and the trailer section, framed as fasthttp reads
// them (CRLF line ends; an extension after ';') — or -1 when b does not
// hold a whole well-formed one of at most bufferedBodyMax data bytes.
func chunkedLen(b []byte) int {
	i, total := 0, 0
	for {
		size, digits := 0, 0
		for ; i < len(b) && digits < 8; i, digits = i+1, digits+1 {
			d := unhex(b[i])
			if d < 0 {
				break
			}
			size = size<<4 | d
		}
		if digits == 0 {
			return -1
		}
		for ext, ows := false, false; i < len(b) && b[i] != '\r'; i++ {
			switch c := b[i]; {
			case ext && c != '\n':
			case c == ' ', c == '\t':
				ows = true
			case c == ';' && !ows:
				ext = true
			default:
				return -1
			}
		}
		if i+1 >= len(b) || b[i+1] != '\n' {
			return -1
		}
		i += 2
		if size == 0 {
			break
		}
		if total += size; total > bufferedBodyMax || len(b)-i < size+2 ||
			b[i+size] != '\r' || b[i+size+1] != '\n' {
			return -1
		}
		i += size + 2
	}
	// The trailer section: header lines up to an empty line.
	for {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		line := b[i : i+j]
		i += j + 1
		if len(line) == 0 || line[len(line)-1] != '\r' {
			return -1
		}
		if len(line) == 1 {
			return i
		}
	}
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
