package proxy

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

// h2Pool runs HTTP/2 streams' handlers on long-lived goroutines, whose
// stacks have grown to what a request needs: no goroutine start per
// stream. At most h2MaxIdle wait for work; more run while there is.
type h2Pool struct {
	mu      sync.Mutex
	idle    []*h2Worker
	stopped bool
}

type h2Worker struct{ ch chan *srvStream }

const h2MaxIdle = 256

func (p *h2Pool) run(st *srvStream) {
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
	w := &h2Worker{ch: make(chan *srvStream, 1)}
	w.ch <- st
	go p.work(w)
}

func (p *h2Pool) work(w *h2Worker) {
	for st := range w.ch {
		st.sc.serveStream(st)
		p.mu.Lock()
		if p.stopped || len(p.idle) >= h2MaxIdle {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, w)
		p.mu.Unlock()
	}
}

// stop ends the idle workers (Shutdown); busy ones end after their stream.
func (p *h2Pool) stop() {
	p.mu.Lock()
	p.stopped = true
	for _, w := range p.idle {
		close(w.ch)
	}
	p.idle = nil
	p.mu.Unlock()
}

// serveStream runs a stream's request through handle, as HTTP/1.1's, and
// sends the answer.
func (sc *srvConn) serveStream(st *srvStream) {
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
	switch {
	case st.plainCon:
		resp.SetStatusCode(http.StatusMethodNotAllowed)
	case st.connect != "":
		if st.connect != "websocket" {
			resp.SetStatusCode(http.StatusBadRequest)
			resp.Header.SetContentTypeBytes(jsonType)
			resp.SetBodyRaw(wsBadProtocol)
			break
		}
		ws := newH2Stream(&fc.Request) // the stream is the tunnel, not a body
		sc.g.handle(fc, true, ws)
		if ws.tunnel != nil {
			sc.runTunnel(st, ws)
			return
		}
	default:
		if st.hasBody {
			// Read as HTTP/1.1 bodies are: whole when small, else streamed.
			fc.Request.SetBodyStream(bodyReader{st}, int(st.contentLen))
		}
		sc.g.handle(fc, true, nil)
	}
	sc.writeResponse(st, resp)
}

// writeResponse sends a handled request's answer.
func (sc *srvConn) writeResponse(st *srvStream, resp *fasthttp.Response) {
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
		bp := wsBufs.Get().(*[]byte)
		defer wsBufs.Put(bp)
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

// runTunnel answers an extended CONNECT with 200 and relays the
// WebSocket over the stream until either side ends.
func (sc *srvConn) runTunnel(st *srvStream, ws *h2Stream) {
	var h fasthttp.ResponseHeader
	h.SetNoDefaultContentType(true)
	if ws.protocol != "" {
		h.Set("Sec-WebSocket-Protocol", ws.protocol)
	}
	if ws.extensions != "" {
		h.Set("Sec-WebSocket-Extensions", ws.extensions)
	}
	ok := sc.writeHeaders(st, http.StatusOK, &h, -1, false)
	sc.flush()
	side := tunnelSide{st}
	if !ok {
		side.Close()
	}
	ws.tunnel.run(side, side, nil)
	sc.mu.Lock()
	st.local = false // the tunnel is done; its stream ends
	sc.mu.Unlock()
	sc.writeData(st, nil, true)
	sc.flush()
}

// tunnelSide is a stream as a tunnel's client side: its DATA both ways,
// without the read timeout (the tunnel has its own).
type tunnelSide struct{ st *srvStream }

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
func (sc *srvConn) writeHeaders(st *srvStream, status int, h *fasthttp.ResponseHeader, cl int, end bool) bool {
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
	if s := sc.g.opts.ServerHeader; s != "" && !hasServer {
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
func (sc *srvConn) httpDate() []byte {
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
func (sc *srvConn) writeData(st *srvStream, data []byte, end bool) bool {
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

func (sc *srvConn) writeTimer() *h2Timer {
	ht := &h2Timer{}
	ht.t = time.AfterFunc(sc.g.limits.Write, func() {
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
func (sc *srvConn) waitWindow(st *srvStream, timer *h2Timer) bool {
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
