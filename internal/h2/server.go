package h2

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/linkgate/linkgate/internal/deadline"
)

const (
	h2StreamWindow = 1 << 20 // SETTINGS_INITIAL_WINDOW_SIZE we announce
	h2ConnWindow   = 1 << 20 // the connection's receive window
	h2MaxFrame     = 16 << 10
	h2MaxWindow    = 1<<31 - 1
	// A stream's request body buffer above this is not kept in the pool.
	h2MaxPooledBody = 64 << 10
)

var errStreamClosed = errors.New("http2: stream closed")

// conn is one HTTP/2 connection.
type conn struct {
	s    *Server
	c    net.Conn       // the TLS connection
	dc   *deadline.Conn // under it; nil in tests without one
	view net.Conn       // what the RequestCtx sees as its connection
	br   *bufio.Reader
	rf   *http2.Framer // reads: the reading goroutine only
	dec  *hpack.Decoder

	payload []byte // a HEADERS frame's
	// The reading goroutine's state.
	maxID     uint32  // highest stream id the client opened (lastID: its copy for GOAWAY)
	cur       *Stream // stream whose header block is being decoded
	hdr       hdrState
	completed int  // answered streams
	resets    int  // streams the client reset in flight, or refused
	settled   bool // the client's SETTINGS came

	lastID    atomic.Uint32
	mu        sync.Mutex // guards what follows
	cond      sync.Cond  // windows, stream ends, connection close
	streams   map[uint32]*Stream
	sendWin   int64 // connection send window
	peerWin   int64 // SETTINGS_INITIAL_WINDOW_SIZE of the client
	peerFrame int   // SETTINGS_MAX_FRAME_SIZE of the client
	recvWin   int64 // connection receive window left to the client
	unacked   int64 // connection bytes consumed, not yet given back
	wf        *http2.Framer
	enc       *hpack.Encoder
	hbuf      outBuf // the header block being encoded
	out       outBuf // frames not yet written
	spare     []byte
	flushing  bool
	flushWait bool // flushAll waits for the writer flushing now
	closed    bool // no more writes: the connection failed or is closing
	goingAway bool // GOAWAY sent: no new streams
	date      []byte
	dateSec   int64
	scratch   []byte
	status    []byte
	drained   chan struct{} // closed once closed and no stream is left
}

// hdrState is the header block being decoded.
type hdrState struct {
	size, raw  int
	tooBig     bool
	regular    bool // a regular field came: no pseudo-header may follow
	trailers   bool
	err        bool // malformed: the stream is reset
	method     bool
	path       bool
	scheme     bool
	endStream  bool
	protocol   string
	contentLen int64 // -1: none
}

// outBuf is a Framer's or an encoder's writer.
type outBuf struct{ b []byte }

func (o *outBuf) Write(p []byte) (int, error) { o.b = append(o.b, p...); return len(p), nil }

// Stream is one stream, pooled: a Handler has it only during ServeStream.
type Stream struct {
	sc *conn
	id uint32
	fc *fasthttp.RequestCtx

	// guarded by sc.mu
	sendWin    int64
	recvWin    int64
	unacked    int64
	in         []byte // request body received, not read
	inOff      int
	inEOF      bool // END_STREAM received
	reset      bool // RST_STREAM received or sent
	peerReset  bool // RST_STREAM received: the stream is closed to the client
	ended      bool // END_STREAM sent
	local      bool // a tunnel over the stream was closed on this side
	bodyN      int64
	contentLen int64
	ready      chan struct{} // a body read may go on

	connect  string // :protocol of an extended CONNECT
	tunnel   bool   // the handler answered it with Tunnel
	plainCon bool   // CONNECT without :protocol
	head     bool   // HEAD request
	hasBody  bool
}

var (
	streamPool = sync.Pool{New: func() any {
		return &Stream{fc: new(fasthttp.RequestCtx), ready: make(chan struct{}, 1)}
	}}
)

// ServeConn serves an h2 connection (the client preface not yet read)
// until it ends. dc, when not nil, is the deadline.Conn under c, whose
// cheap timeouts are used instead of c's deadlines; view is the
// connection the handlers' RequestCtx sees (its addresses, its TLS state).
func (s *Server) ServeConn(c net.Conn, dc *deadline.Conn, view net.Conn) {
	sc := &conn{
		s: s, c: c, dc: dc, view: view,
		br:        bufio.NewReaderSize(c, 16<<10),
		streams:   map[uint32]*Stream{},
		sendWin:   65535,
		peerWin:   65535,
		peerFrame: h2MaxFrame,
		recvWin:   h2ConnWindow,
		drained:   make(chan struct{}),
	}
	sc.cond.L = &sc.mu
	sc.rf = http2.NewFramer(nil, sc.br)
	sc.rf.SetMaxReadFrameSize(h2MaxFrame)
	sc.rf.SetReuseFrames()
	sc.wf = http2.NewFramer(&sc.out, nil)
	sc.enc = hpack.NewEncoder(&sc.hbuf)
	// No dynamic table for responses: header values are views of
	// fasthttp's buffers, which the table must not keep (nginx does not
	// index its responses either).
	sc.enc.SetMaxDynamicTableSizeLimit(0)
	sc.dec = hpack.NewDecoder(4096, sc.onField)
	sc.dec.SetMaxStringLength(s.opts.MaxHeaderBytes)
	if !s.add(sc) {
		c.Close()
		return
	}
	defer s.remove(sc)
	sc.serve()
}

func (sc *conn) serve() {
	s := sc.s
	sc.mu.Lock()
	settings := []http2.Setting{
		{ID: http2.SettingMaxConcurrentStreams, Val: s.opts.MaxConcurrentStreams},
		{ID: http2.SettingInitialWindowSize, Val: h2StreamWindow},
		{ID: http2.SettingMaxHeaderListSize, Val: uint32(s.opts.MaxHeaderBytes)},
	}
	if s.opts.ExtendedConnect {
		settings = append(settings, http2.Setting{ID: http2.SettingEnableConnectProtocol, Val: 1})
	}
	_ = sc.wf.WriteSettings(settings...)
	_ = sc.wf.WriteWindowUpdate(0, h2ConnWindow-65535)
	sc.mu.Unlock()
	sc.flush()

	sc.setReadTimeout(s.opts.ReadTimeout)
	var preface [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(sc.br, preface[:]); err != nil || string(preface[:]) != http2.ClientPreface {
		sc.close()
		return
	}
	err := sc.readLoop()
	switch ce := (http2.ConnectionError(0)); {
	case errors.As(err, &ce):
		sc.goAway(http2.ErrCode(ce))
	case errors.Is(err, http2.ErrFrameTooLarge):
		sc.goAway(http2.ErrCodeFrameSize)
	case isTimeout(err):
		sc.goAway(http2.ErrCodeNo)
	}
	sc.close()
}

func (sc *conn) setReadTimeout(d time.Duration) {
	switch {
	case sc.dc != nil:
		sc.dc.SetReadTimeout(d)
	case d > 0:
		_ = sc.c.SetReadDeadline(time.Now().Add(d))
	default:
		_ = sc.c.SetReadDeadline(time.Time{})
	}
}

// readLoop reads and handles frames until the connection ends; a
// ConnectionError is the GOAWAY to send.
func (sc *conn) readLoop() error {
	s := sc.s
	idle := false
	for {
		if sc.br.Buffered() == 0 {
			// About to wait for the client: what is pending goes out first.
			sc.flush()
			sc.mu.Lock()
			n, away := len(sc.streams), sc.goingAway
			sc.mu.Unlock()
			if away && n == 0 {
				return nil
			}
			switch {
			case sc.cur != nil:
				sc.setReadTimeout(s.opts.ReadTimeout) // inside a header block
				idle = false
			case n == 0 && !idle:
				sc.setReadTimeout(s.opts.IdleTimeout)
				idle = true
			case n > 0 && idle:
				sc.setReadTimeout(0) // stream bodies have their own timeouts
				idle = false
			}
		}
		fh, err := sc.rf.ReadFrameHeader()
		if err != nil {
			return err
		}
		if fh.Type == http2.FrameHeaders && sc.settled {
			if err := sc.readHeaders(fh); err != nil {
				return err
			}
			continue
		}
		f, err := sc.rf.ReadFrameForHeader(fh)
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				sc.resetStream(se.StreamID, se.Code)
				continue
			}
			return err
		}
		if !sc.settled {
			if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() {
				return http2.ConnectionError(http2.ErrCodeProtocol)
			}
			sc.settled = true
		}
		if err := sc.handle(f); err != nil {
			return err
		}
	}
}

func (sc *conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.ContinuationFrame:
		return sc.onBlock(f.HeaderBlockFragment(), f.HeadersEnded())
	case *http2.DataFrame:
		return sc.onData(f)
	case *http2.WindowUpdateFrame:
		return sc.onWindowUpdate(f)
	case *http2.SettingsFrame:
		return sc.onSettings(f)
	case *http2.PingFrame:
		if !f.IsAck() {
			sc.mu.Lock()
			_ = sc.wf.WritePing(true, f.Data)
			sc.mu.Unlock()
		}
	case *http2.RSTStreamFrame:
		return sc.onReset(f)
	case *http2.GoAwayFrame:
		// The client opens no more streams: the open ones finish.
		sc.mu.Lock()
		sc.goingAway = true
		sc.mu.Unlock()
	case *http2.PriorityFrame:
		if f.StreamDep == f.StreamID {
			sc.resetStream(f.StreamID, http2.ErrCodeProtocol)
		}
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	// Unknown frame types are ignored (RFC 9113 §4.1).
	return nil
}

// onSettings applies the client's SETTINGS and queues their ACK under one
// hold of sc.mu, so that the ACK goes out before any DATA a larger window
// lets out (h2spec 6.9.2 waits for the ACK, then for that DATA).
func (sc *conn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - sc.peerWin
			sc.peerWin = int64(s.Val)
			for _, st := range sc.streams {
				if st.sendWin += delta; st.sendWin > h2MaxWindow {
					return http2.ConnectionError(http2.ErrCodeFlowControl)
				}
			}
		case http2.SettingMaxFrameSize:
			sc.peerFrame = int(s.Val)
		}
		return nil
	})
	if err != nil {
		return err
	}
	_ = sc.wf.WriteSettingsAck()
	sc.cond.Broadcast()
	return nil
}

func (sc *conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	inc := int64(f.Increment)
	if f.StreamID == 0 {
		if sc.sendWin += inc; sc.sendWin > h2MaxWindow {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		sc.cond.Broadcast()
		return nil
	}
	if f.StreamID > sc.maxID {
		return http2.ConnectionError(http2.ErrCodeProtocol) // an idle stream
	}
	if st := sc.streams[f.StreamID]; st != nil && !st.reset {
		if st.sendWin += inc; st.sendWin > h2MaxWindow {
			sc.resetLocked(st, http2.ErrCodeFlowControl)
			return nil
		}
		sc.cond.Broadcast()
	}
	return nil
}

func (sc *conn) onReset(f *http2.RSTStreamFrame) error {
	if f.StreamID > sc.maxID {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	st := sc.streams[f.StreamID]
	if st == nil || st.peerReset {
		return nil
	}
	st.peerReset = true
	if st.reset {
		return nil // reset by both sides
	}
	st.reset = true
	sc.wake(st)
	if !st.ended {
		return sc.countReset()
	}
	return nil
}

// countReset counts a stream reset in flight or refused; too many close
// the connection (rapid reset). sc.mu is held.
func (sc *conn) countReset() error {
	sc.resets++
	if sc.resets > sc.completed/2+2*int(sc.s.opts.MaxConcurrentStreams) {
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	return nil
}

// resetStream sends RST_STREAM for id (a stream error).
func (sc *conn) resetStream(id uint32, code http2.ErrCode) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if st := sc.streams[id]; st != nil {
		sc.resetLocked(st, code)
		return
	}
	_ = sc.wf.WriteRSTStream(id, code)
}

func (sc *conn) resetLocked(st *Stream, code http2.ErrCode) {
	if !st.reset {
		st.reset = true
		_ = sc.wf.WriteRSTStream(st.id, code)
		sc.wake(st)
	}
}

// wake wakes whoever waits on st (a body read, a window).
func (sc *conn) wake(st *Stream) {
	select {
	case st.ready <- struct{}{}:
	default:
	}
	sc.cond.Broadcast()
}

// readHeaders reads a HEADERS frame's payload. It is parsed here, not by
// the Framer, which allocates a HeadersFrame for each: one per request.
func (sc *conn) readHeaders(fh http2.FrameHeader) error {
	if cap(sc.payload) < int(fh.Length) {
		sc.payload = make([]byte, h2MaxFrame)
	}
	p := sc.payload[:fh.Length]
	if _, err := io.ReadFull(sc.br, p); err != nil {
		return err
	}
	if fh.StreamID == 0 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	pad := 0
	if fh.Flags.Has(http2.FlagHeadersPadded) {
		if len(p) < 1 {
			return http2.ConnectionError(http2.ErrCodeFrameSize)
		}
		pad, p = int(p[0]), p[1:]
	}
	var dep uint32
	if fh.Flags.Has(http2.FlagHeadersPriority) {
		if len(p) < 5 {
			return http2.ConnectionError(http2.ErrCodeFrameSize)
		}
		dep, p = binary.BigEndian.Uint32(p)&0x7fffffff, p[5:]
	}
	if pad > len(p) {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	return sc.onHeaders(fh.StreamID, fh.Flags.Has(http2.FlagHeadersEndStream), fh.Flags.Has(http2.FlagHeadersEndHeaders),
		dep == fh.StreamID, p[:len(p)-pad])
}

func (sc *conn) onHeaders(id uint32, endStream, endHeaders, selfDep bool, frag []byte) error {
	if id%2 == 0 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	sc.hdr = hdrState{endStream: endStream, contentLen: -1}
	// A stream depending on itself is a stream error; its header block is
	// still decoded, for the table's sake.
	sc.hdr.err = selfDep
	if id <= sc.maxID {
		sc.mu.Lock()
		st := sc.streams[id]
		closed := st == nil || st.inEOF || st.peerReset // inEOF, peerReset: written by this goroutine only
		sc.mu.Unlock()
		if closed {
			// A stream that ended, or that the client reset although its
			// handler may still run (RFC 9113 §5.1: closed).
			return http2.ConnectionError(http2.ErrCodeStreamClosed)
		}
		if !endStream {
			return http2.ConnectionError(http2.ErrCodeProtocol) // trailers end the stream
		}
		sc.hdr.trailers = true
		sc.cur = st
		return sc.onBlock(frag, endHeaders)
	}
	sc.maxID = id
	sc.lastID.Store(id)
	st := streamPool.Get().(*Stream)
	st.sc, st.id = sc, id
	st.fc.Init2(sc.view, sc.s.opts.Logger, false)
	sc.cur = st
	return sc.onBlock(frag, endHeaders)
}

// onBlock decodes a fragment of the current header block; at its end the
// request starts.
func (sc *conn) onBlock(frag []byte, end bool) error {
	st := sc.cur
	if st == nil {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	// A flood of CONTINUATION frames (empty or not) costs at most this.
	sc.hdr.raw += len(frag) + 9
	if _, err := sc.dec.Write(frag); err != nil {
		if errors.Is(err, hpack.ErrStringLength) {
			return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
		}
		return http2.ConnectionError(http2.ErrCodeCompression)
	}
	if sc.hdr.tooBig || sc.hdr.raw > 2*sc.s.opts.MaxHeaderBytes+64<<10 {
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	if !end {
		return nil
	}
	sc.cur = nil
	if err := sc.dec.Close(); err != nil {
		return http2.ConnectionError(http2.ErrCodeCompression)
	}
	h := &sc.hdr
	if h.trailers {
		sc.mu.Lock()
		if sc.streams[st.id] == st { // its handler may have ended meanwhile
			if h.err {
				sc.resetLocked(st, http2.ErrCodeProtocol)
			}
			st.inEOF = true
			sc.wake(st)
		}
		sc.mu.Unlock()
		return nil
	}
	id := st.id
	if !sc.checkRequest(st) {
		h2Release(st)
		sc.resetStream(id, http2.ErrCodeProtocol)
		return nil
	}
	sc.mu.Lock()
	if sc.goingAway || len(sc.streams) >= int(sc.s.opts.MaxConcurrentStreams) {
		var err error
		if !sc.goingAway {
			err = sc.countReset()
		}
		_ = sc.wf.WriteRSTStream(id, http2.ErrCodeRefusedStream)
		sc.mu.Unlock()
		h2Release(st)
		return err
	}
	st.sendWin, st.recvWin = sc.peerWin, h2StreamWindow
	st.inEOF = h.endStream
	st.contentLen = h.contentLen
	sc.streams[st.id] = st
	sc.mu.Unlock()
	sc.s.workers.run(st)
	return nil
}

// checkRequest validates a request's header block (RFC 9113 §8.3).
func (sc *conn) checkRequest(st *Stream) bool {
	h := &sc.hdr
	req := &st.fc.Request
	if h.err || !h.method {
		return false
	}
	st.head = string(req.Header.Method()) == fasthttp.MethodHead
	st.hasBody = !h.endStream
	if h.protocol != "" && !sc.s.opts.ExtendedConnect {
		return false // :protocol without SETTINGS_ENABLE_CONNECT_PROTOCOL
	}
	if string(req.Header.Method()) == fasthttp.MethodConnect {
		if h.protocol == "" {
			st.plainCon = true
			return !h.path && !h.scheme
		}
		st.connect = h.protocol
		return h.path && h.scheme
	}
	if h.protocol != "" || !h.path || !h.scheme {
		return false
	}
	return !h.endStream || h.contentLen <= 0
}

// onField adds one decoded header field to the current request.
func (sc *conn) onField(f hpack.HeaderField) {
	h := &sc.hdr
	h.size += int(f.Size())
	if h.size > sc.s.opts.MaxHeaderBytes {
		h.tooBig = true
	}
	if h.tooBig || h.err {
		return
	}
	if h.trailers {
		h.err = h.err || f.IsPseudo()
		return
	}
	req := &sc.cur.fc.Request
	if f.IsPseudo() {
		if h.regular {
			h.err = true
			return
		}
		switch f.Name {
		case ":method":
			h.err, h.method = h.method || f.Value == "", true
			req.Header.SetMethod(f.Value)
		case ":path":
			h.err, h.path = h.path || f.Value == "", true
			req.Header.SetRequestURI(f.Value)
		case ":authority":
			req.Header.SetHost(f.Value)
		case ":scheme":
			h.err, h.scheme = h.scheme, true
		case ":protocol":
			h.err = h.protocol != ""
			h.protocol = f.Value
		default:
			h.err = true
		}
		return
	}
	h.regular = true
	for i := 0; i < len(f.Name); i++ {
		if c := f.Name[i]; 'A' <= c && c <= 'Z' {
			h.err = true // field names are lowercase in HTTP/2
			return
		}
	}
	switch f.Name {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		h.err = true // connection-specific (RFC 9113 §8.2.2)
		return
	case "te":
		h.err = f.Value != "trailers"
		return
	case "content-length":
		n, err := strconv.ParseInt(f.Value, 10, 64)
		if err != nil || n < 0 || h.contentLen >= 0 && n != h.contentLen {
			h.err = true
			return
		}
		h.contentLen = n
	}
	req.Header.Add(f.Name, f.Value) // names normalized as HTTP/1.1's are
}

func (sc *conn) onData(f *http2.DataFrame) error {
	id := f.StreamID
	if id > sc.maxID {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	n := int64(f.Length)
	data := f.Data()
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if n > sc.recvWin {
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	sc.recvWin -= n
	st := sc.streams[id]
	if st == nil || st.reset || st.inEOF || !st.hasBody {
		// Not for a live stream: the bytes go back to the connection.
		sc.giveBack(nil, n)
		// A stream the client closed (ended, reset) answers STREAM_CLOSED,
		// also while its handler still runs; after a reset of ours frames
		// in flight are ignored (RFC 9113 §5.1, §5.4.2).
		if st == nil || st.inEOF || st.peerReset {
			_ = sc.wf.WriteRSTStream(id, http2.ErrCodeStreamClosed)
		}
		return nil
	}
	if n > st.recvWin {
		sc.resetLocked(st, http2.ErrCodeFlowControl)
		sc.giveBack(nil, n)
		return nil
	}
	st.recvWin -= n
	st.bodyN += int64(len(data))
	if st.contentLen >= 0 && (st.bodyN > st.contentLen || f.StreamEnded() && st.bodyN != st.contentLen) {
		sc.resetLocked(st, http2.ErrCodeProtocol)
		sc.giveBack(nil, n)
		return nil
	}
	if pad := n - int64(len(data)); pad > 0 {
		sc.giveBack(st, pad)
	}
	if len(data) > 0 {
		if st.inOff > 0 && len(st.in)+len(data) > cap(st.in) {
			st.in = st.in[:copy(st.in, st.in[st.inOff:])]
			st.inOff = 0
		}
		st.in = append(st.in, data...)
	}
	if f.StreamEnded() {
		st.inEOF = true
	}
	sc.wake(st)
	return nil
}

// giveBack returns n consumed bytes to the client's windows (st nil: the
// connection's only), with a WINDOW_UPDATE once a quarter of a window is
// owed. sc.mu is held.
func (sc *conn) giveBack(st *Stream, n int64) {
	sc.unacked += n
	if sc.unacked >= h2ConnWindow/4 {
		_ = sc.wf.WriteWindowUpdate(0, uint32(sc.unacked))
		sc.recvWin += sc.unacked
		sc.unacked = 0
	}
	if st == nil {
		return
	}
	st.unacked += n
	if st.unacked >= h2StreamWindow/4 && !st.inEOF && !st.reset {
		_ = sc.wf.WriteWindowUpdate(st.id, uint32(st.unacked))
		st.recvWin += st.unacked
		st.unacked = 0
	}
}

// goAway sends GOAWAY with code and stops new streams.
func (sc *conn) goAway(code http2.ErrCode) {
	sc.mu.Lock()
	sc.goingAway = true
	_ = sc.wf.WriteGoAway(sc.lastID.Load(), code, nil)
	sc.mu.Unlock()
	sc.flush()
}

// shutdown sends GOAWAY; the connection closes once its streams end.
func (sc *conn) shutdown() {
	sc.goAway(http2.ErrCodeNo)
	sc.mu.Lock()
	idle := len(sc.streams) == 0
	sc.mu.Unlock()
	if idle {
		sc.flushAll()
		sc.c.Close() // the reading goroutine ends
	}
}

// close ends the connection once the reading goroutine is done: writes
// stop, waiting handlers wake, and it returns when every stream is
// released.
func (sc *conn) close() {
	sc.flushAll()
	sc.mu.Lock()
	sc.closed = true
	for _, st := range sc.streams {
		st.reset = true
		sc.wake(st)
	}
	sc.cond.Broadcast()
	left := len(sc.streams)
	sc.mu.Unlock()
	sc.c.Close()
	if sc.cur != nil && !sc.hdr.trailers {
		h2Release(sc.cur) // a request's header block cut short
	}
	sc.cur = nil
	if left > 0 {
		<-sc.drained
	}
}

// flush writes the pending frames; a writer busy flushing takes ours too.
func (sc *conn) flush() {
	sc.mu.Lock()
	if sc.flushing {
		sc.mu.Unlock()
		return
	}
	sc.flushing = true
	for len(sc.out.b) > 0 && !sc.closed {
		buf := sc.out.b
		sc.out.b = sc.spare[:0]
		sc.mu.Unlock()
		if sc.dc != nil {
			sc.dc.SetWriteTimeout(sc.s.opts.WriteTimeout)
		} else {
			_ = sc.c.SetWriteDeadline(time.Now().Add(sc.s.opts.WriteTimeout))
		}
		_, err := sc.c.Write(buf)
		sc.mu.Lock()
		sc.spare = buf[:0]
		if err != nil {
			sc.closed = true
			sc.out.b = sc.out.b[:0]
			sc.cond.Broadcast()
			sc.mu.Unlock()
			sc.c.Close() // the reading goroutine ends
			sc.mu.Lock()
		}
	}
	if sc.closed {
		sc.out.b = sc.out.b[:0]
	}
	sc.flushing = false
	if sc.flushWait {
		sc.flushWait = false
		sc.cond.Broadcast()
	}
	sc.mu.Unlock()
}

// flushAll writes every pending frame, and waits for a writer busy
// flushing to finish, where flush leaves the frames to it: what closes the
// connection next must not cut off an answer another goroutine is still
// writing (a shutdown's last stream lost its response so).
func (sc *conn) flushAll() {
	for {
		sc.flush()
		sc.mu.Lock()
		done := sc.closed || !sc.flushing && len(sc.out.b) == 0
		if !done {
			sc.flushWait = true
			sc.cond.Wait()
		}
		sc.mu.Unlock()
		if done {
			return
		}
	}
}

// release forgets st once its handler is done.
func (sc *conn) release(st *Stream) {
	sc.mu.Lock()
	queued := len(sc.out.b)
	if !st.reset && !st.inEOF && !sc.closed {
		// The answer is complete before the request: stop the upload.
		_ = sc.wf.WriteRSTStream(st.id, http2.ErrCodeNo)
	}
	delete(sc.streams, st.id)
	// Bytes received and not read go back to the connection.
	sc.giveBack(nil, int64(len(st.in)-st.inOff))
	sc.completed++
	n, away, closed := len(sc.streams), sc.goingAway, sc.closed
	wrote := len(sc.out.b) > queued
	sc.mu.Unlock()
	h2Release(st)
	if wrote {
		sc.flush() // a RST_STREAM or WINDOW_UPDATE just queued
	}
	if n == 0 {
		if closed {
			close(sc.drained)
		} else if away {
			sc.flushAll()
			sc.c.Close() // GOAWAY sent and the last stream done
		}
	}
}

func h2Release(st *Stream) {
	st.fc.Request.Reset()
	st.fc.Response.Reset()
	st.sc = nil
	st.sendWin, st.recvWin, st.unacked, st.bodyN, st.contentLen = 0, 0, 0, 0, 0
	st.in, st.inOff = st.in[:0], 0
	if cap(st.in) > h2MaxPooledBody {
		st.in = nil
	}
	st.inEOF, st.reset, st.peerReset, st.ended, st.local = false, false, false, false, false
	st.connect, st.tunnel, st.plainCon, st.head, st.hasBody = "", false, false, false, false
	select {
	case <-st.ready:
	default:
	}
	streamPool.Put(st)
}

// read reads the request body (the stream's DATA), waiting at most
// timeout for each piece (0: no limit).
func (st *Stream) read(p []byte, timeout time.Duration) (int, error) {
	sc := st.sc
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		sc.mu.Lock()
		if n := len(st.in) - st.inOff; n > 0 {
			n = copy(p, st.in[st.inOff:])
			st.inOff += n
			if st.inOff == len(st.in) {
				st.in, st.inOff = st.in[:0], 0
			}
			sc.giveBack(st, int64(n))
			sc.mu.Unlock()
			sc.flush()
			return n, nil
		}
		eof, reset := st.inEOF || st.local, st.reset
		sc.mu.Unlock()
		switch {
		case reset:
			return 0, errStreamClosed
		case eof:
			return 0, io.EOF
		}
		var expired <-chan time.Time
		if timeout > 0 {
			if timer == nil {
				timer = time.NewTimer(timeout)
			}
			expired = timer.C
		}
		select {
		case <-st.ready:
		case <-expired:
			sc.resetStream(st.id, http2.ErrCodeCancel)
			sc.flush()
			return 0, errStreamClosed
		}
	}
}

// bodyReader is a stream's request body as the handler sees it (not an
// io.Closer: the stream ends with its handler).
type bodyReader struct{ st *Stream }

func (b bodyReader) Read(p []byte) (int, error) { return b.st.read(p, b.st.sc.s.opts.ReadTimeout) }
