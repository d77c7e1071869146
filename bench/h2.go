package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// HTTP/2. Each connection is a goroutine that owns its state — its
// streams, its slots' schedules, the HPACK encoder and the writing side of
// the connection — and a reader goroutine that decodes frames
// (golang.org/x/net/http2's Framer and HPACK) and hands each finished
// stream to it. A connection carries Streams slots; each slot is what a
// connection is to HTTP/1.1: one request at a time, on its own evenly phased
// schedule, latency measured from the planned send time.

// H2Result describes the HTTP/2 side of a run.
type H2Result struct {
	Connections int
	Streams     int   // concurrent streams per connection
	Resets      int64 // RST_STREAM frames received (the request counts as an error)
	GoAways     int64 // GOAWAY frames received (the connection drains and is replaced)
	Refused     int64 // requests refused by a GOAWAY or REFUSED_STREAM and sent again
}

const (
	h2Window      = 16 << 20 // our initial stream window
	h2ConnWindow  = 1 << 30  // our connection window
	h2WindowAfter = 1 << 20  // return received bytes to the connection window in steps of this
)

// h2Request is one request as HTTP/2 sends it.
type h2Request struct {
	method, path, authority string
	headers                 [][2]string // lower-case names, no connection-specific fields
	body                    []byte
}

// parseH2Request turns the HTTP/1.1 bytes a Requester makes into an
// HTTP/2 request (the first request if several are pipelined).
func parseH2Request(b []byte) (*h2Request, error) {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		return nil, errors.New("request has no end of headers")
	}
	lines := strings.Split(string(b[:end]), "\r\n")
	f := strings.Fields(lines[0])
	if len(f) != 3 {
		return nil, fmt.Errorf("malformed request line %q", lines[0])
	}
	r := &h2Request{method: f[0], path: f[1]}
	length := 0
	for _, l := range lines[1:] {
		name, value, ok := strings.Cut(l, ":")
		if !ok {
			return nil, fmt.Errorf("malformed header line %q", l)
		}
		name, value = strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(value)
		switch name {
		case "host":
			r.authority = value
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te":
		case "content-length":
			n, err := strconv.Atoi(value)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("malformed Content-Length %q", value)
			}
			length = n
			r.headers = append(r.headers, [2]string{name, value})
		default:
			r.headers = append(r.headers, [2]string{name, value})
		}
	}
	body := b[end+4:]
	if len(body) < length {
		return nil, errors.New("request body shorter than its Content-Length")
	}
	r.body = body[:length]
	return r, nil
}

// h2Event is what the reader tells its connection.
type h2Event struct {
	kind   int // evDone, evReset, evGoAway, evSettings, evData, evClosed
	stream uint32
	status int
	n      int    // bytes (evData, evDone), max streams (evSettings)
	last   uint32 // GOAWAY's last stream id
	code   http2.ErrCode
	err    error
	at     time.Time
}

const (
	evDone = iota
	evReset
	evGoAway
	evSettings
	evData
	evClosed
	evPing
)

// h2Slot is one schedule on a connection.
type h2Slot struct {
	g       int64         // global slot number: its phase in the schedule
	seq     int64         // schedule index of the current (or next) request
	planned time.Duration // when the current request should have been sent
	sent    time.Duration
	ready   time.Duration // when the slot became free for it (its connection up, the last response in)
	stream  uint32        // 0: idle
}

// h2Conn is one connection's goroutine state.
type h2Conn struct {
	e       *h2Engine
	idx     int
	rec     *recorder
	slots   []h2Slot
	req     *h2Request // static request, or nil
	reqr    Requester
	scratch []byte
}

// h2Engine runs the HTTP/2 connections of one run.
type h2Engine struct {
	cfg     *Config
	addr    string
	tls     *tls.Config
	scheme  string
	base    time.Time
	t0      time.Duration
	warm    time.Duration
	end     time.Duration
	pace    pacer
	total   int64 // slots in the whole run
	open    bool  // open model (rate or stages)
	streams int
	ctx     context.Context

	mu      sync.Mutex
	h2      H2Result
	lastErr error
}

func (e *h2Engine) now() time.Duration { return time.Since(e.base) }

func (e *h2Engine) plan(g, seq int64) time.Duration {
	at, ok := e.pace.at(g + seq*e.total)
	if !ok {
		return e.end + time.Hour
	}
	return e.t0 + at
}

// runH2 runs an HTTP/2 load: Connections connections of Streams slots.
func runH2(ctx context.Context, c *Config, addr netip.AddrPort, tcfg *tls.Config, reqs []Requester) (*Result, error) {
	e := &h2Engine{cfg: c, addr: addr.String(), tls: tcfg, scheme: c.URL.Scheme, base: time.Now(), t0: startLead,
		pace: c.pacer(), total: int64(c.Connections * c.Streams), open: c.Rate > 0, streams: c.Streams, ctx: ctx}
	e.warm = e.t0 + c.Warmup
	e.end = e.warm + c.Duration
	e.h2 = H2Result{Connections: c.Connections, Streams: c.Streams}
	recs := make([]*recorder, c.Connections)
	conns := make([]*h2Conn, c.Connections)
	for i := range conns {
		recs[i] = newRecorder(c.Duration, c.Progress != nil)
		hc := &h2Conn{e: e, idx: i, rec: recs[i], reqr: reqs[i%len(reqs)]}
		if f, ok := hc.reqr.(Fixed); ok {
			r, err := parseH2Request(f.Fixed())
			if err != nil {
				return nil, fmt.Errorf("invalid request: %w", err)
			}
			hc.req = r
		}
		for s := range c.Streams {
			g := int64(s*c.Connections + i) // slots of a connection are spread over the schedule
			hc.slots = append(hc.slots, h2Slot{g: g})
		}
		conns[i] = hc
	}
	stopMonitor := monitor(c, recs, e.base, e.warm)
	var wg sync.WaitGroup
	for _, hc := range conns {
		wg.Add(1)
		go func() { defer wg.Done(); hc.run() }()
	}
	wg.Wait()
	stopMonitor()
	if e.lastErr != nil {
		return nil, e.lastErr
	}
	res := &Result{URL: c.URL.String(), Threads: c.Threads, Connections: c.Connections, Rate: c.Rate,
		Warmup: c.Warmup, Duration: c.Duration, Elapsed: max(e.end-e.warm, 0)}
	merge(res, recs, tcfg != nil)
	res.Series = fillSeries(res.Series, int((res.Elapsed+time.Second-1)/time.Second))
	h := e.h2
	res.HTTP2 = &h
	return res, nil
}

func (e *h2Engine) count(f func(*H2Result)) {
	e.mu.Lock()
	f(&e.h2)
	e.mu.Unlock()
}

// run drives one connection slot set until the end of the run,
// reconnecting as needed.
func (hc *h2Conn) run() {
	e := hc.e
	for i := range hc.slots {
		s := &hc.slots[i]
		s.planned = e.t0
		if e.open {
			s.planned = e.plan(s.g, 0)
		}
	}
	for e.now() < e.end && e.ctx.Err() == nil {
		if err := hc.session(); err != nil {
			if errors.Is(err, errFatal) {
				return
			}
			// A connection that failed: back off a little and open another.
			time.Sleep(connectBackoff)
		}
	}
	hc.finish()
}

var errFatal = errors.New("fatal")

// connect opens the connection: TCP, TLS with ALPN h2 for https (h2c
// with prior knowledge for http), the preface and our SETTINGS.
func (hc *h2Conn) connect() (net.Conn, error) {
	e := hc.e
	now := e.now()
	if e.scheme == "https" {
		tc, _, took, err := handshake(e.ctx, e.addr, e.tls, e.cfg.Timeout)
		if err != nil {
			var ce *connectError
			switch {
			case errors.As(err, &ce):
				hc.countErr(now, &hc.rec.errs.Connect)
			case isCertError(err):
				hc.countErr(now, &hc.rec.errs.Certificate)
			default:
				hc.countErr(now, &hc.rec.errs.Handshake)
			}
			return nil, err
		}
		if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
			tc.Close()
			e.mu.Lock()
			e.lastErr = fmt.Errorf("the server did not negotiate h2 by ALPN (it chose %q)", p)
			e.mu.Unlock()
			return nil, errFatal
		}
		if now >= e.warm || e.cfg.Warmup == 0 {
			_ = hc.rec.handshake.RecordValue(micros(took))
			if tc.ConnectionState().DidResume {
				hc.rec.resumed++
			}
		}
		return tc, nil
	}
	d := net.Dialer{Timeout: e.cfg.Timeout}
	nc, err := d.DialContext(e.ctx, "tcp", e.addr)
	if err != nil {
		hc.countErr(now, &hc.rec.errs.Connect)
		return nil, err
	}
	return nc, nil
}

func (hc *h2Conn) countErr(now time.Duration, n *int64) {
	if now >= hc.e.warm {
		*n++
	}
}

// session runs one connection until it fails, drains after a GOAWAY, or
// the run ends.
func (hc *h2Conn) session() error {
	e := hc.e
	nc, err := hc.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	bw := bufio.NewWriterSize(nc, 32<<10)
	wf := http2.NewFramer(bw, nil)
	if _, err := bw.WriteString(http2.ClientPreface); err != nil {
		return err
	}
	if err := wf.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: h2Window}); err != nil {
		return err
	}
	if err := wf.WriteWindowUpdate(0, h2ConnWindow-65535); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	// Time spent connecting is the target's (it is in the corrected
	// latency), not the generator's send lag.
	for i, now := 0, e.now(); i < len(hc.slots); i++ {
		hc.slots[i].ready = max(hc.slots[i].ready, now)
	}
	events := make(chan h2Event, 4*len(hc.slots)+16)
	go hc.read(nc, events)
	defer func() {
		nc.Close()
		for ev := range events { // wait for the reader
			_ = ev
		}
	}()

	var (
		enc        bytes.Buffer
		henc       = hpack.NewEncoder(&enc)
		nextID     = uint32(1)
		active     = 0
		maxStreams = len(hc.slots)
		byStream   = map[uint32]int{}
		draining   = false
		received   = 0
		timer      = time.NewTimer(time.Hour)
		tick       = time.NewTicker(tick)
		nextSample = e.warm + SampleInterval
		sampleReqs int64
	)
	defer timer.Stop()
	defer tick.Stop()

	send := func(i int, now time.Duration) error {
		s := &hc.slots[i]
		r := hc.req
		if r == nil {
			b, err := hc.reqr.Request(hc.scratch[:0])
			if err != nil {
				return fmt.Errorf("request: %w", err)
			}
			hc.scratch = b[:0]
			if r, err = parseH2Request(b); err != nil {
				return fmt.Errorf("request: %w", err)
			}
		}
		if e.open {
			if start := max(s.planned, s.ready); now >= start && s.planned >= e.warm {
				_ = hc.rec.lag.RecordValue(micros(now - start))
			}
		} else {
			s.planned = now
		}
		enc.Reset()
		authority := r.authority
		if authority == "" {
			authority = e.cfg.URL.Host
		}
		for _, f := range [][2]string{{":method", r.method}, {":scheme", e.scheme}, {":authority", authority}, {":path", r.path}} {
			_ = henc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		for _, h := range r.headers {
			_ = henc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]})
		}
		id := nextID
		nextID += 2
		if err := wf.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: enc.Bytes(),
			EndStream: len(r.body) == 0, EndHeaders: true}); err != nil {
			return err
		}
		if len(r.body) > 0 {
			// Request bodies are small: within the initial windows.
			if err := wf.WriteData(id, true, r.body); err != nil {
				return err
			}
		}
		s.stream, s.sent = id, now
		byStream[id] = i
		active++
		return nil
	}
	// next moves slot i on to its next request.
	next := func(i int, now time.Duration) {
		s := &hc.slots[i]
		s.stream = 0
		s.seq++
		s.ready = now
		if e.open {
			s.planned = e.plan(s.g, s.seq)
		} else {
			s.planned = now
		}
	}
	// sendDue starts every idle slot whose time has come and returns when
	// the next one is due.
	sendDue := func(now time.Duration) (time.Duration, error) {
		due := e.end
		for i := range hc.slots {
			s := &hc.slots[i]
			if s.stream != 0 {
				continue
			}
			if s.planned > now {
				due = min(due, s.planned)
				continue
			}
			if draining || active >= maxStreams || nextID > 1<<31-1 || now >= e.end {
				continue
			}
			if err := send(i, now); err != nil {
				return 0, err
			}
			// Building a request can take long (a script; a machine that
			// stops the thread): what is due next, how late it goes out
			// and whether the run is over are reckoned afresh.
			now = e.now()
		}
		return due, bw.Flush()
	}
	fail := func(now time.Duration) {
		// The connection is gone: its streams are read errors; their slots
		// move on.
		for i := range hc.slots {
			if hc.slots[i].stream != 0 {
				hc.countErr(now, &hc.rec.errs.Read)
				next(i, now)
			}
		}
	}

	for {
		now := e.now()
		if now >= e.end || e.ctx.Err() != nil {
			return nil
		}
		due, err := sendDue(now)
		if err != nil {
			if strings.HasPrefix(err.Error(), "request:") {
				e.mu.Lock()
				e.lastErr = err
				e.mu.Unlock()
				return errFatal
			}
			hc.countErr(now, &hc.rec.errs.Write)
			fail(now)
			return err
		}
		if draining && active == 0 {
			return nil // replaced after a GOAWAY
		}
		timer.Reset(max(due-e.now(), 0))
		select {
		case <-e.ctx.Done():
			return nil
		case <-timer.C:
		case <-tick.C:
			now = e.now()
			for i := range hc.slots {
				if s := &hc.slots[i]; s.stream != 0 && now-s.sent > e.cfg.Timeout {
					if s.planned >= e.warm {
						hc.rec.latencies(now-s.planned, now-s.sent, now-e.warm)
					}
					hc.countErr(now, &hc.rec.errs.Timeout)
					delete(byStream, s.stream)
					_ = wf.WriteRSTStream(s.stream, http2.ErrCodeCancel)
					active--
					next(i, now)
				}
			}
			if sec := int((now - e.warm) / time.Second); now >= e.warm && sec != hc.rec.secIdx {
				hc.rec.nextSecond(sec)
			}
			if now >= nextSample {
				elapsed := SampleInterval + (now - nextSample)
				hc.rec.samples = append(hc.rec.samples, float64(hc.rec.requests-sampleReqs)/elapsed.Seconds())
				sampleReqs = hc.rec.requests
				nextSample = now + SampleInterval
			}
			hc.rec.publish()
			if e.now() >= e.end {
				return nil
			}
		case ev, ok := <-events:
			if !ok {
				fail(e.now())
				return errors.New("connection closed")
			}
			for {
				if err := hc.handle(ev, byStream, &active, &maxStreams, &draining, &received, next, wf); err != nil {
					fail(e.now())
					return err
				}
				select {
				case ev, ok = <-events:
					if !ok {
						fail(e.now())
						return errors.New("connection closed")
					}
					continue
				default:
				}
				break
			}
			if err := bw.Flush(); err != nil {
				fail(e.now())
				return err
			}
		}
	}
}

// handle applies one event from the reader.
func (hc *h2Conn) handle(ev h2Event, byStream map[uint32]int, active, maxStreams *int, draining *bool, received *int,
	next func(int, time.Duration), wf *http2.Framer) error {
	e := hc.e
	now := ev.at.Sub(e.base)
	switch ev.kind {
	case evClosed:
		// The streams still open fail (the caller counts them); a close
		// with none open, after a GOAWAY or when idle, is no error.
		return ev.err
	case evSettings:
		if ev.n > 0 {
			*maxStreams = min(len(hc.slots), ev.n)
		}
		return wf.WriteSettingsAck()
	case evPing:
		return nil
	case evData:
		if *received += ev.n; *received >= h2WindowAfter {
			if err := wf.WriteWindowUpdate(0, uint32(*received)); err != nil {
				return err
			}
			*received = 0
		}
		return nil
	case evGoAway:
		*draining = true
		e.count(func(h *H2Result) { h.GoAways++ })
		// Streams the server will not process go again on a new connection.
		for id, i := range byStream {
			if id > ev.last {
				delete(byStream, id)
				*active--
				hc.slots[i].stream = 0 // same planned time: the wait is in its latency
				e.count(func(h *H2Result) { h.Refused++ })
			}
		}
		return nil
	}
	i, ok := byStream[ev.stream]
	if !ok {
		return nil // timed out meanwhile
	}
	delete(byStream, ev.stream)
	*active--
	s := &hc.slots[i]
	if ev.kind == evReset {
		if ev.code == http2.ErrCodeRefusedStream {
			s.stream = 0 // not processed: send it again
			e.count(func(h *H2Result) { h.Refused++ })
			return nil
		}
		e.count(func(h *H2Result) { h.Resets++ })
		hc.countErr(now, &hc.rec.errs.Read)
		next(i, now)
		return nil
	}
	if now >= e.end {
		return nil // finish() records it as in flight
	}
	if s.planned >= e.warm {
		hc.rec.latencies(now-s.planned, now-s.sent, now-e.warm)
	}
	if now >= e.warm {
		hc.rec.requests++
		hc.rec.bytes += int64(ev.n)
		if ev.status >= 400 {
			hc.rec.status[min(ev.status, len(hc.rec.status)-1)]++
		}
	}
	next(i, now)
	return nil
}

// read decodes frames and reports finished streams and connection events.
func (hc *h2Conn) read(nc net.Conn, events chan<- h2Event) {
	defer close(events)
	fr := http2.NewFramer(nil, bufio.NewReaderSize(nc, 32<<10))
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.MaxHeaderListSize = 1 << 20
	type progress struct {
		status int
		n      int
	}
	streams := map[uint32]*progress{}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			events <- h2Event{kind: evClosed, err: err, at: time.Now()}
			return
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			p := streams[f.StreamID]
			if p == nil {
				p = &progress{}
				streams[f.StreamID] = p
			}
			if st := f.PseudoValue("status"); st != "" {
				if code, _ := strconv.Atoi(st); code >= 200 || p.status == 0 {
					if code >= 200 {
						p.status = code
					}
				}
			}
			if f.StreamEnded() && p.status >= 200 {
				delete(streams, f.StreamID)
				events <- h2Event{kind: evDone, stream: f.StreamID, status: p.status, n: p.n, at: time.Now()}
			}
		case *http2.DataFrame:
			n := len(f.Data())
			if p := streams[f.StreamID]; p != nil {
				p.n += n
				if f.StreamEnded() {
					delete(streams, f.StreamID)
					events <- h2Event{kind: evDone, stream: f.StreamID, status: p.status, n: p.n, at: time.Now()}
				}
			}
			if f.Length > 0 {
				events <- h2Event{kind: evData, n: int(f.Length), at: time.Now()}
			}
		case *http2.RSTStreamFrame:
			delete(streams, f.StreamID)
			events <- h2Event{kind: evReset, stream: f.StreamID, code: f.ErrCode, at: time.Now()}
		case *http2.GoAwayFrame:
			events <- h2Event{kind: evGoAway, last: f.LastStreamID, code: f.ErrCode, at: time.Now()}
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			n := 0
			if v, ok := f.Value(http2.SettingMaxConcurrentStreams); ok {
				n = int(min(v, 1<<20))
			}
			events <- h2Event{kind: evSettings, n: n, at: time.Now()}
		case *http2.PingFrame:
			// Answered by nobody: a load generator's pings are not measured.
		}
	}
}

// finish records what the end of the run cut off, as the HTTP/1.1 engine
// does: streams in flight, and planned requests not sent.
func (hc *h2Conn) finish() {
	e := hc.e
	end := e.end
	for i := range hc.slots {
		s := &hc.slots[i]
		inFlight := s.stream != 0
		if inFlight && s.planned >= e.warm {
			hc.rec.latencies(end-s.planned, end-s.sent, end-e.warm)
			hc.rec.inFlight++
		}
		if due := max(s.planned, s.ready); e.open && !inFlight && s.planned >= e.warm && due < end {
			hc.rec.lateAtEnd(due, end)
		}
		if e.open {
			seq := s.seq
			if inFlight {
				seq++
			}
			for ; ; seq++ {
				p := e.plan(s.g, seq)
				if p >= end {
					break
				}
				if p >= e.warm {
					hc.rec.corrected(end-p, end-e.warm)
					hc.rec.unsent++
				}
			}
		}
	}
	hc.rec.publish()
}
