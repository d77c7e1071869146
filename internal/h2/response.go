package h2

import (
	"io"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// workerPool runs streams' handlers on long-lived goroutines, whose
// stacks have grown to what a request needs: no goroutine start per
// stream. At most maxIdle wait for work; more run while there is.
type workerPool struct {
	mu      sync.Mutex
	idle    []*worker
	stopped bool
}

type worker struct{ ch chan *Stream }

const maxIdle = 256

func (p *workerPool) run(st *Stream) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.ch <- st
		return
	}
	p.mu.Unlock()
	w := &worker{ch: make(chan *Stream, 1)}
	w.ch <- st
	go p.work(w)
}

func (p *workerPool) work(w *worker) {
	for st := range w.ch {
		st.sc.serveStream(st)
		p.mu.Lock()
		if p.stopped || len(p.idle) >= maxIdle {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, w)
		p.mu.Unlock()
	}
}

// stop ends the idle workers (Shutdown); busy ones end after their stream.
func (p *workerPool) stop() {
	p.mu.Lock()
	p.stopped = true
	for _, w := range p.idle {
		close(w.ch)
	}
	p.idle = nil
	p.mu.Unlock()
}

// serveStream runs a stream's request through the handler and sends the
// answer.
func (sc *conn) serveStream(st *Stream) {
	defer sc.release(st)
	sc.mu.Lock()
	reset := st.reset
	sc.mu.Unlock()
	if reset {
		return // reset before it started: no handler runs
	}
	fc := st.fc
	resp := &fc.Response
	resp.Header.SetNoDefaultContentType(true)
	if st.plainCon {
		resp.SetStatusCode(http.StatusMethodNotAllowed)
		sc.writeResponse(st, resp)
		return
	}
	if st.hasBody && st.connect == "" {
		if !sc.awaitBody(st) {
			return // malformed, reset or timed out: no handler runs
		}
		fc.Request.SetBodyStream(bodyReader{st}, int(st.contentLen))
	}
	sc.s.handler.ServeStream(st)
	if st.tunnel {
		sc.mu.Lock()
		st.local = false // the tunnel is done; its stream ends
		sc.mu.Unlock()
		sc.writeData(st, nil, true)
		sc.flush()
		return
	}
	sc.writeResponse(st, resp)
}

// awaitedBody is the largest request body, of a declared length, that
// arrives whole before the handler runs; a longer one, or one of no
// declared length, reaches the handler once its first bytes have come.
// So the handler cannot answer before the client has shown its body,
// and what the client does wrong meanwhile gets its stream error rather
// than the handler's answer (RFC 9113: a body longer or shorter than its
// content-length, §8.1.1; a window past 2^31-1, §6.9.1). On a busy
// machine h2spec's cases 6.9.1 and 8.1.2.6 got the gateway's 404 first.
// fasthttp's HTTP/1.1 server, too, has what its read buffer holds of a
// body before it calls the handler. A request expecting 100-continue
// reaches the handler at once: its client waits for an answer.
const awaitedBody = h2MaxFrame

// awaitBody waits, at most the read timeout, for st's request body as
// awaitedBody says; false: the stream was reset (malformed, by the
// client, or for the timeout).
func (sc *conn) awaitBody(st *Stream) bool {
	if string(st.fc.Request.Header.Peek("Expect")) == "100-continue" {
		return true
	}
	whole := st.contentLen >= 0 && st.contentLen <= awaitedBody
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		sc.mu.Lock()
		reset, eof, some := st.reset, st.inEOF, st.bodyN > 0
		sc.mu.Unlock()
		switch {
		case reset:
			return false
		case eof, some && !whole:
			return true
		}
		if timer == nil {
			timer = time.NewTimer(sc.s.opts.ReadTimeout)
		}
		select {
		case <-st.ready:
		case <-timer.C:
			sc.resetStream(st.id, http2.ErrCodeCancel)
			sc.flush()
			return false
		}
	}
}

// writeResponse sends a handled request's answer.
func (sc *conn) writeResponse(st *Stream, resp *fasthttp.Response) {
	status := resp.StatusCode()
	if resp.IsBodyStream() {
		// A streamed upstream body: each read is passed on and flushed at
		// once (server-sent events); the request ends at CloseBodyStream.
		defer resp.CloseBodyStream()
		cl := resp.Header.ContentLength()
		if !sc.writeHeaders(st, status, &resp.Header, max(cl, -1), st.head) || st.head {
			sc.flush()
			return
		}
		sc.flush()
		bp := bodyBufs.Get().(*[]byte)
		defer bodyBufs.Put(bp)
		r := resp.BodyStream()
		for {
			n, err := r.Read(*bp)
			if n > 0 && !sc.writeData(st, (*bp)[:n], false) {
				return
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				// Cut short: the client must not take it for the whole body.
				sc.resetStream(st.id, http2.ErrCodeInternal)
				sc.flush()
				return
			}
			sc.flush()
		}
		sc.writeData(st, nil, true)
		sc.flush()
		return
	}
	body := resp.Body()
	cl := len(body)
	if st.head {
		body, cl = nil, -1
	}
	if sc.writeHeaders(st, status, &resp.Header, cl, len(body) == 0) && len(body) > 0 {
		sc.writeData(st, body, true)
	}
	sc.mu.Lock()
	others := len(sc.streams) > 1
	sc.mu.Unlock()
	if others {
		// Let the connection's other handlers that are ready queue their
		// answers first: one TLS write for all.
		runtime.Gosched()
	}
	sc.flush()
}

// tunnelSide is a stream as a tunnel's client side: its DATA both ways,
// without the read timeout (the tunnel has its own).
type tunnelSide struct{ st *Stream }

func (t tunnelSide) Read(p []byte) (int, error) { return t.st.read(p, 0) }

func (t tunnelSide) Write(p []byte) (int, error) {
	sc := t.st.sc
	if !sc.writeData(t.st, p, false) {
		return 0, errStreamClosed
	}
	sc.flush()
	return len(p), nil
}

// Close ends the relay: reads end, writes fail.
func (t tunnelSide) Close() error {
	sc := t.st.sc
	sc.mu.Lock()
	t.st.local = true
	sc.wake(t.st)
	sc.mu.Unlock()
	return nil
}

var h2Skip = map[string]bool{
	"content-length": true, "connection": true, "keep-alive": true, "proxy-connection": true,
	"transfer-encoding": true, "upgrade": true, "trailer": true,
}

// writeHeaders encodes and queues a response's HEADERS (and
// CONTINUATION) frames; cl < 0 sends no Content-Length. false: the
// stream or the connection is gone.
func (sc *conn) writeHeaders(st *Stream, status int, h *fasthttp.ResponseHeader, cl int, end bool) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.closed || st.reset {
		return false
	}
	enc := sc.enc
	sc.hbuf.b = sc.hbuf.b[:0]
	sc.status = strconv.AppendInt(sc.status[:0], int64(status), 10)
	_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: b2s(sc.status)})
	var hasServer, hasDate bool
	for k, v := range h.All() {
		// HTTP/2 field names are lowercase.
		sc.scratch = append(sc.scratch[:0], k...)
		for i, c := range sc.scratch {
			if 'A' <= c && c <= 'Z' {
				sc.scratch[i] = c + 'a' - 'A'
			}
		}
		name := b2s(sc.scratch)
		switch {
		case h2Skip[name]:
			continue
		case name == "server":
			hasServer = true
		case name == "date":
			hasDate = true
		}
		_ = enc.WriteField(hpack.HeaderField{Name: name, Value: b2s(v)})
	}
	if s := sc.s.opts.ServerHeader; s != "" && !hasServer {
		_ = enc.WriteField(hpack.HeaderField{Name: "server", Value: s})
	}
	if !hasDate {
		_ = enc.WriteField(hpack.HeaderField{Name: "date", Value: b2s(sc.httpDate())})
	}
	if cl >= 0 {
		sc.scratch = strconv.AppendInt(sc.scratch[:0], int64(cl), 10)
		_ = enc.WriteField(hpack.HeaderField{Name: "content-length", Value: b2s(sc.scratch)})
	}
	block := sc.hbuf.b
	for first := true; first || len(block) > 0; first = false {
		n := min(len(block), sc.peerFrame)
		frag := block[:n]
		block = block[n:]
		if first {
			_ = sc.wf.WriteHeaders(http2.HeadersFrameParam{StreamID: st.id, BlockFragment: frag, EndStream: end, EndHeaders: len(block) == 0})
		} else {
			_ = sc.wf.WriteContinuation(st.id, len(block) == 0, frag)
		}
	}
	st.ended = end
	return true
}

// httpDate is the Date header's value, formatted once a second. sc.mu is
// held.
func (sc *conn) httpDate() []byte {
	now := time.Now()
	if s := now.Unix(); s != sc.dateSec || sc.date == nil {
		sc.dateSec = s
		sc.date = now.UTC().AppendFormat(sc.date[:0], http.TimeFormat)
	}
	return sc.date
}

// writeData queues data on st within the flow-control windows, waiting
// (at most the write timeout) for the client to open them; end ends the
// stream. false: the stream or the connection is gone.
func (sc *conn) writeData(st *Stream, data []byte, end bool) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	var timer *h2Timer
	for {
		if sc.closed || st.reset || st.local || st.ended {
			return false
		}
		if len(data) == 0 {
			if end {
				_ = sc.wf.WriteData(st.id, true, nil)
				st.ended = true
			}
			return true
		}
		n := int64(min(len(data), sc.peerFrame))
		if n = min(n, sc.sendWin, st.sendWin); n <= 0 {
			if timer == nil {
				timer = sc.writeTimer()
				defer timer.t.Stop()
			}
			if !sc.waitWindow(st, timer) {
				return false
			}
			continue
		}
		last := end && int(n) == len(data)
		_ = sc.wf.WriteData(st.id, last, data[:n])
		sc.sendWin -= n
		st.sendWin -= n
		data = data[n:]
		if last {
			st.ended = true
			return true
		}
	}
}

// h2Timer is a write timeout running while a stream waits for a window.
type h2Timer struct {
	t       *time.Timer
	expired bool // guarded by sc.mu
}

func (sc *conn) writeTimer() *h2Timer {
	ht := &h2Timer{}
	ht.t = time.AfterFunc(sc.s.opts.WriteTimeout, func() {
		sc.mu.Lock()
		ht.expired = true
		sc.cond.Broadcast()
		sc.mu.Unlock()
	})
	return ht
}

// waitWindow flushes what is queued and waits for the client to open
// st's windows; false (the stream reset) when the write timeout passed
// first. sc.mu is held.
func (sc *conn) waitWindow(st *Stream, timer *h2Timer) bool {
	if timer.expired {
		sc.resetLocked(st, http2.ErrCodeCancel)
		return false
	}
	sc.mu.Unlock()
	sc.flush()
	sc.mu.Lock()
	if min(sc.sendWin, st.sendWin) <= 0 && !sc.closed && !st.reset && !timer.expired {
		sc.cond.Wait()
	}
	return true
}
