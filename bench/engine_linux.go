//go:build linux

package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Connection states.
const (
	csClosed     = iota // no socket; connects when it next has to send
	csConnecting        // non-blocking connect (or, for TLS, the handshake goroutine) under way
	csIdle              // connected, nothing in flight
	csWriting           // request partly written, waiting for EPOLLOUT
	csReading           // request written, waiting for the response(s)
	csBackoff           // connect failed, waiting in the timer heap to retry
)

const (
	tick           = 10 * time.Millisecond // timeouts, sampling, stop checks
	connectBackoff = 10 * time.Millisecond
	startLead      = 50 * time.Millisecond // connections are opened before the schedule starts
	readBufSize    = 16 << 10
)

// conn is one keep-alive connection and its own send schedule.
type conn struct {
	idx   int   // in worker.conns; epoll data
	g     int64 // global connection number: its phase in the schedule
	fd    int
	state uint8
	out   bool // EPOLLOUT registered

	seq      int64         // schedule index of the current (or next) request
	planned  time.Duration // when the current request should have been sent
	sent     time.Duration // when its first byte was written
	ready    time.Duration // when the connection became free for it
	connTime time.Duration // when the current connect started
	needSend bool          // send as soon as the connect completes

	due  time.Duration // timer heap key
	hpos int           // position in the timer heap, -1 when not in it

	req       []byte // request being written
	written   int
	pending   int // responses still expected
	head      bool
	dst       []byte // buffer for dynamic requests
	respBytes int64
	p         parser
	rbuf      []byte

	// TLS: the session and its transport once the handshake is done; gen
	// tells a handshake's result from one of an earlier connect.
	tc  *tls.Conn
	tio *tlsIO
	gen uint32
}

// worker is one thread: an epoll loop over its connections.
type worker struct {
	id    int
	cfg   *Config
	sa    unix.Sockaddr
	fam   int
	epfd  int
	tfd   int
	base  time.Time
	t0    time.Duration // schedule start
	warm  time.Duration // end of the warm-up: the measured window starts here
	end   time.Duration // end of the run
	rate  float64       // total requests per second of the run (0: closed loop; the mean for stages)
	pace  pacer         // the open model's schedule, when rate > 0
	total int64         // connections in the whole run, all threads

	conns  []*conn
	heap   []*conn
	events []unix.EpollEvent
	armed  time.Duration // when the timerfd fires (0: not armed)

	requester Requester
	static    []byte
	responder Responder
	pipeline  int
	reqClose  bool // the static request says Connection: close

	// TLS: handshakes run in goroutines (tls.go) and report on hs, waking
	// the loop through the eventfd efd.
	tls       *tls.Config
	addr      string
	efd       int
	hs        chan hsResult
	pendingHS int
	ctx       context.Context
	cancel    context.CancelFunc
	plain     []byte // decrypted bytes, for the parser

	rec        *recorder
	quota      int64 // responses after which this thread stops (0: none)
	nextTick   time.Duration
	nextSample time.Duration
	sampleReqs int64
	calibrated bool
	done       <-chan struct{}
	err        error
}

func (w *worker) now() time.Duration { return time.Since(w.base) }

// plan is the planned send time of request seq on connection g: the
// connections' schedules interleave so that, together, sends are evenly
// spaced 1/rate apart.
//
// The pacer gives the time of the k-th request of the run; past the end
// of its schedule a request is planned after the end of the run (never).
func (w *worker) plan(g, seq int64) time.Duration {
	at, ok := w.pace.at(g + seq*w.total)
	if !ok {
		return w.end + time.Hour
	}
	return w.t0 + at
}

func runEngine(ctx context.Context, c *Config, addr netip.AddrPort, tcfg *tls.Config, reqs []Requester) (*Result, error) {
	base := time.Now()
	t0 := startLead
	warm := t0 + c.Warmup
	end := warm + c.Duration
	workers := make([]*worker, c.Threads)
	defer func() {
		for _, w := range workers {
			if w != nil {
				w.close()
			}
		}
	}()
	for i := range workers {
		// Each worker has its own Sockaddr: unix.Connect caches its raw form in it.
		sa, fam := sockaddr(addr)
		w := &worker{
			id: i, cfg: c, sa: sa, fam: fam, base: base, t0: t0, warm: warm, end: end,
			rate: c.Rate, pace: c.pacer(), total: int64(c.Connections), requester: reqs[i],
			rec: newRecorder(c.Duration, c.Progress != nil), done: ctx.Done(),
			epfd: -1, tfd: -1, efd: -1, tls: tcfg, addr: addr.String(),
		}
		w.ctx, w.cancel = context.WithCancel(ctx)
		if c.Requests > 0 {
			w.quota = (c.Requests + int64(i)) / int64(c.Threads) // shares add up to c.Requests
			if w.quota == 0 {
				w.end = w.warm
			}
		}
		workers[i] = w
		if err := w.setup(); err != nil {
			return nil, err
		}
	}
	// Connections are dealt round-robin: thread i has connections i, i+t, …,
	// so each thread's share of the schedule is evenly spread too.
	for g := 0; g < c.Connections; g++ {
		w := workers[g%c.Threads]
		w.conns = append(w.conns, &conn{idx: len(w.conns), g: int64(g), fd: -1, hpos: -1,
			rbuf: make([]byte, readBufSize), p: parser{capture: w.responder != nil}})
	}
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			w.loop()
		}()
	}
	recs := make([]*recorder, len(workers))
	for i, w := range workers {
		recs[i] = w.rec
	}
	stopMonitor := monitor(c, recs, base, warm)
	wg.Wait()
	stopMonitor()

	res := &Result{
		URL: c.URL.String(), Threads: c.Threads, Connections: c.Connections, Rate: c.Rate,
		Warmup: c.Warmup, Duration: c.Duration,
	}
	var stopped time.Duration
	for _, w := range workers {
		if w.err != nil {
			return nil, w.err
		}
		stopped = max(stopped, w.end)
	}
	res.Elapsed = max(stopped-warm, 0)
	merge(res, recs, tcfg != nil)
	res.Series = fillSeries(res.Series, int((res.Elapsed+time.Second-1)/time.Second))
	return res, nil
}

func sockaddr(addr netip.AddrPort) (unix.Sockaddr, int) {
	if addr.Addr().Is4() {
		return &unix.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}, unix.AF_INET
	}
	return &unix.SockaddrInet6{Port: int(addr.Port()), Addr: addr.Addr().As16()}, unix.AF_INET6
}

// setup creates the worker's epoll instance and timer and checks its
// request source.
func (w *worker) setup() error {
	var err error
	if w.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return fmt.Errorf("epoll: %w", err)
	}
	if w.tfd, err = unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC); err != nil {
		return fmt.Errorf("timerfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: -1}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, w.tfd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	if w.tls != nil {
		if w.efd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
			return fmt.Errorf("eventfd: %w", err)
		}
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: -2}
		if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, w.efd, &ev); err != nil {
			return fmt.Errorf("epoll_ctl: %w", err)
		}
		w.hs = make(chan hsResult, w.cfg.Connections/w.cfg.Threads+1)
		w.plain = make([]byte, readBufSize)
	}
	w.events = make([]unix.EpollEvent, 256)
	w.heap = make([]*conn, 0, w.cfg.Connections/w.cfg.Threads+1)
	if r, ok := w.requester.(Responder); ok {
		w.responder = r
	}
	// Check the request source as wrk does: build one request and count the
	// requests in it (a script may pipeline several).
	first := []byte(nil)
	if f, ok := w.requester.(Fixed); ok {
		w.static = f.Fixed()
		first = w.static
	} else if first, err = w.requester.Request(nil); err != nil {
		return fmt.Errorf("request: %w", err)
	}
	if w.pipeline, _, err = requestInfo(first); err != nil {
		return fmt.Errorf("invalid request %q: %w", truncate(first, 200), err)
	}
	w.reqClose = w.static != nil && requestCloses(w.static)
	return nil
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

func (w *worker) close() {
	for _, c := range w.conns {
		w.closeConn(c)
	}
	if w.cancel != nil {
		w.cancel()
	}
	for ; w.pendingHS > 0; w.pendingHS-- {
		r := <-w.hs
		r.discard()
	}
	if w.efd >= 0 {
		unix.Close(w.efd)
		w.efd = -1
	}
	if w.tfd >= 0 {
		unix.Close(w.tfd)
		w.tfd = -1
	}
	if w.epfd >= 0 {
		unix.Close(w.epfd)
		w.epfd = -1
	}
}

// loop runs the worker until the end of the run or cancellation.
func (w *worker) loop() {
	now := w.now()
	for _, c := range w.conns {
		c.planned = w.t0
		if w.rate > 0 {
			c.planned = w.plan(c.g, 0)
		}
		w.push(c, c.planned)
		w.connect(c, now)
	}
	w.nextTick = now + tick
	w.nextSample = w.warm + SampleInterval
	for w.err == nil {
		now = w.now()
		if now >= w.nextTick || now >= w.end {
			if w.tick(now) {
				break
			}
		}
		w.runDue(now)
		if w.err != nil {
			break
		}
		w.arm(w.now())
		n, err := unix.EpollWait(w.epfd, w.events, -1)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			w.err = fmt.Errorf("epoll_wait: %w", err)
			break
		}
		for i := range n {
			ev := &w.events[i]
			if ev.Fd == -2 {
				w.handshakes()
				continue
			}
			if ev.Fd < 0 {
				var buf [8]byte
				_, _ = unix.Read(w.tfd, buf[:])
				w.armed = 0
				continue
			}
			c := w.conns[ev.Fd]
			if c.fd != int(ev.Pad) {
				continue // event of a socket closed earlier in this batch
			}
			w.event(c, ev.Events)
		}
	}
	w.finish()
}

// tick runs every 10 ms: sampling, timeouts, calibration, progress and
// the end of the run. It reports whether the run is over.
func (w *worker) tick(now time.Duration) bool {
	for w.nextTick <= now {
		w.nextTick += tick
	}
	select {
	case <-w.done:
		w.end = now
		return true
	default:
	}
	if now >= w.end {
		return true
	}
	for _, c := range w.conns {
		switch {
		case (c.state == csWriting || c.state == csReading) && now-c.sent > w.cfg.Timeout:
			w.timeout(c, now)
		case c.state == csConnecting && now-c.connTime > w.cfg.Timeout:
			w.closeConn(c)
			w.connectFailed(c, now)
		}
	}
	if now >= w.warm && !w.calibrated {
		w.calibrated = true
		if w.rec.warmCount > 0 {
			w.rec.calibration.Store(w.rec.warmSum / w.rec.warmCount)
		}
		w.rec.calibrated.Store(true)
	}
	if s := int((now - w.warm) / time.Second); now >= w.warm && s != w.rec.secIdx {
		w.rec.nextSecond(s)
	}
	if now >= w.nextSample {
		elapsed := SampleInterval + (now - w.nextSample)
		w.rec.samples = append(w.rec.samples, float64(w.rec.requests-w.sampleReqs)/elapsed.Seconds())
		w.sampleReqs = w.rec.requests
		w.nextSample = now + SampleInterval
		w.rec.publish()
	}
	return false
}

// runDue sends or reconnects every connection whose time has come.
func (w *worker) runDue(now time.Duration) {
	for len(w.heap) > 0 && w.heap[0].due <= now && w.err == nil {
		c := w.pop()
		now = w.now()
		if c.state == csBackoff {
			c.state = csClosed
			w.connect(c, now)
			continue
		}
		w.send(c, now)
	}
}

// arm sets the timer to the earliest of the next due send, the next tick
// and the end of the run; timerfd has nanosecond resolution, which is what
// keeps pacing below wrk2's 1 ms timer granularity.
func (w *worker) arm(now time.Duration) {
	next := min(w.nextTick, w.end)
	if len(w.heap) > 0 {
		next = min(next, w.heap[0].due)
	}
	if w.armed != 0 && w.armed <= next {
		return
	}
	d := next - now
	if d <= 0 {
		d = 1
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	if err := unix.TimerfdSettime(w.tfd, 0, &spec, nil); err != nil {
		w.err = fmt.Errorf("timerfd_settime: %w", err)
	}
	w.armed = next
}

// event handles readiness of one connection.
func (w *worker) event(c *conn, events uint32) {
	switch c.state {
	case csConnecting:
		w.connected(c)
		return
	case csWriting:
		if events&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
			w.write(c, w.now())
		}
		if c.state != csReading {
			return
		}
	}
	if events&(unix.EPOLLIN|unix.EPOLLERR|unix.EPOLLHUP) != 0 && c.fd >= 0 {
		w.read(c)
	}
}

func (w *worker) connect(c *conn, now time.Duration) {
	if w.tls != nil {
		w.startHandshake(c, now)
		return
	}
	fd, err := unix.Socket(w.fam, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		w.connectFailed(c, now)
		return
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if err := unix.Connect(fd, w.sa); err != nil && !errors.Is(err, unix.EINPROGRESS) {
		unix.Close(fd)
		w.connectFailed(c, now)
		return
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT, Fd: int32(c.idx), Pad: int32(fd)}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		unix.Close(fd)
		w.err = fmt.Errorf("epoll_ctl: %w", err)
		return
	}
	c.fd, c.state, c.out, c.connTime = fd, csConnecting, true, now
}

func (w *worker) connected(c *conn) {
	now := w.now()
	if soErr, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil || soErr != 0 {
		w.closeConn(c)
		w.connectFailed(c, now)
		return
	}
	w.setOut(c, false)
	w.ready(c, now)
}

// ready makes a connection that just connected (and finished its TLS
// handshake) idle, and sends its request if one is waiting.
func (w *worker) ready(c *conn, now time.Duration) {
	c.state = csIdle
	// Time spent connecting is the target's (it is in the corrected
	// latency), not the generator's send lag.
	c.ready = max(c.ready, now)
	if c.needSend {
		c.needSend = false
		if w.rate > 0 && c.planned > now {
			w.push(c, c.planned)
		} else {
			w.send(c, now)
		}
	}
}

func (w *worker) connectFailed(c *conn, now time.Duration) {
	w.connFailed(c, now, &w.rec.errs.Connect)
}

// connFailed counts a failed connection attempt in counter and retries
// after a back-off.
func (w *worker) connFailed(c *conn, now time.Duration, counter *int64) {
	if now >= w.warm {
		*counter++
	}
	c.state = csBackoff
	if c.hpos >= 0 {
		// It was waiting to send; the send happens after the reconnect.
		w.remove(c)
	}
	c.needSend = true // connected() sends it, or waits for its planned time
	w.push(c, now+connectBackoff)
}

// send starts the connection's current request.
func (w *worker) send(c *conn, now time.Duration) {
	if now >= w.end {
		return
	}
	switch c.state {
	case csClosed:
		c.needSend = true
		w.connect(c, now)
		return
	case csConnecting, csBackoff:
		c.needSend = true
		return
	}
	if w.rate > 0 {
		if start := max(c.planned, c.ready); now >= start && c.planned >= w.warm {
			_ = w.rec.lag.RecordValue(micros(now - start))
		}
	} else {
		c.planned = now
	}
	if w.static != nil {
		c.req = w.static
	} else {
		req, err := w.requester.Request(c.dst[:0])
		if err != nil {
			w.err = fmt.Errorf("request: %w", err)
			return
		}
		c.req, c.dst = req, req[:0]
	}
	c.head = len(c.req) > 5 && string(c.req[:5]) == "HEAD "
	c.sent, c.written, c.pending, c.respBytes = now, 0, w.pipeline, 0
	c.p.reset(c.head)
	c.state = csWriting
	w.write(c, now)
}

func (w *worker) write(c *conn, now time.Duration) {
	if c.tc != nil {
		w.writeTLS(c, now)
		return
	}
	for c.written < len(c.req) {
		n, err := unix.Write(c.fd, c.req[c.written:])
		if err != nil {
			if errors.Is(err, unix.EAGAIN) {
				w.setOut(c, true)
				return
			}
			if errors.Is(err, unix.EINTR) {
				continue
			}
			w.writeFailed(c, now)
			return
		}
		c.written += n
	}
	w.setOut(c, false)
	c.state = csReading
}

func (w *worker) writeFailed(c *conn, now time.Duration) {
	if now >= w.warm {
		w.rec.errs.Write++
	}
	w.closeConn(c)
	w.next(c, now)
}

func (w *worker) setOut(c *conn, on bool) {
	if c.out == on || c.fd < 0 {
		return
	}
	events := uint32(unix.EPOLLIN)
	if on {
		events |= unix.EPOLLOUT
	}
	ev := unix.EpollEvent{Events: events, Fd: int32(c.idx), Pad: int32(c.fd)}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev); err != nil {
		w.err = fmt.Errorf("epoll_ctl: %w", err)
	}
	c.out = on
}

func (w *worker) read(c *conn) {
	n, err := unix.Read(c.fd, c.rbuf)
	now := w.now()
	if err != nil && (errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR)) {
		return
	}
	if err != nil || n == 0 {
		w.closed(c, now, err == nil)
		return
	}
	if c.tc != nil {
		w.readTLS(c, now, c.rbuf[:n])
		return
	}
	w.received(c, now, c.rbuf[:n])
}

// closed handles the end of the connection's byte stream (clean says it
// was an orderly close): it completes a response delimited by the close,
// and fails one still expected.
func (w *worker) closed(c *conn, now time.Duration, clean bool) {
	if c.pending > 0 {
		if done, _ := c.p.eof(); clean && done {
			c.p.close = true
			w.complete(c, now)
			return
		}
		w.readFailed(c, now)
		return
	}
	w.closeConn(c) // the server closed an idle keep-alive connection
}

// received feeds response bytes to the parser.
func (w *worker) received(c *conn, now time.Duration, data []byte) {
	if c.pending == 0 || c.state != csReading {
		// Bytes nobody asked for: the connection is unusable.
		if now >= w.warm {
			w.rec.errs.Read++
		}
		w.closeConn(c)
		return
	}
	for len(data) > 0 {
		used, done, err := c.p.feed(data)
		data = data[used:]
		c.respBytes += int64(used)
		if err != nil {
			w.readFailed(c, now)
			return
		}
		if done && !w.complete(c, now) {
			return
		}
	}
}

func (w *worker) readFailed(c *conn, now time.Duration) {
	w.readFailedAs(c, now, &w.rec.errs.Read)
}

// readFailedAs counts a failed read in counter and moves the connection on.
func (w *worker) readFailedAs(c *conn, now time.Duration, counter *int64) {
	if now >= w.warm {
		*counter++
	}
	w.closeConn(c)
	w.next(c, now)
}

// complete handles one finished response. It reports whether the
// connection is still reading the same batch of pipelined responses.
func (w *worker) complete(c *conn, now time.Duration) bool {
	if now >= w.end {
		return false // past the end: finish() records it as in flight
	}
	if c.planned >= w.warm {
		w.rec.latencies(now-c.planned, now-c.sent, now-w.warm)
	} else if w.rate > 0 {
		w.rec.warmSum += int64(now - c.planned)
		w.rec.warmCount++
	}
	if now >= w.warm {
		w.rec.requests++
		w.rec.bytes += c.respBytes
		if s := c.p.status; s >= 400 {
			w.rec.status[min(s, len(w.rec.status)-1)]++
		}
		if w.rec.requests == w.quota {
			w.end = now
		}
	}
	c.respBytes = 0
	if w.responder != nil {
		if err := w.responder.Response(c.p.response()); err != nil {
			w.err = fmt.Errorf("response: %w", err)
			return false
		}
	}
	closing := c.p.close || w.reqClose
	c.pending--
	if c.pending > 0 && !closing {
		c.p.reset(c.head)
		return true
	}
	if closing {
		w.closeConn(c)
	} else {
		c.state = csIdle
	}
	w.next(c, now)
	return false
}

// timeout gives up on the connection's request: it is recorded with the
// latency it has reached, counted, and the connection starts over.
func (w *worker) timeout(c *conn, now time.Duration) {
	if c.planned >= w.warm {
		w.rec.latencies(now-c.planned, now-c.sent, now-w.warm)
	}
	if now >= w.warm {
		w.rec.errs.Timeout++
	}
	w.closeConn(c)
	w.next(c, now)
}

// next moves the connection on to its next request: now if it is due (or
// in closed-loop mode), else at its planned time.
func (w *worker) next(c *conn, now time.Duration) {
	c.pending = 0
	c.seq++
	c.ready = now
	if w.rate <= 0 {
		w.send(c, now)
		return
	}
	c.planned = w.plan(c.g, c.seq)
	if c.planned <= now {
		w.send(c, now)
		return
	}
	w.push(c, c.planned)
}

func (w *worker) closeConn(c *conn) {
	if c.fd >= 0 {
		unix.Close(c.fd) // also removes it from the epoll set
		c.fd = -1
	}
	c.gen++ // a handshake still running for it is now stale
	c.tc, c.tio = nil, nil
	c.out = false
	if c.state != csBackoff {
		c.state = csClosed
	}
}

// finish records what the end of the run cut off: requests in flight and,
// on a constant-rate schedule, requests planned but not yet sent, because
// their connection was busy or because the generator was late (then its
// lag is recorded too). Then it closes the connections.
func (w *worker) finish() {
	end := w.end
	for _, c := range w.conns {
		inFlight := c.state == csWriting || c.state == csReading
		if inFlight && c.planned >= w.warm {
			w.rec.latencies(end-c.planned, end-c.sent, end-w.warm)
			w.rec.inFlight++
		}
		free := c.state == csIdle || c.state == csClosed
		if due := max(c.planned, c.ready); w.rate > 0 && free && c.planned >= w.warm && due < end {
			w.rec.lateAtEnd(due, end)
		}
		if w.rate > 0 {
			seq := c.seq
			if inFlight {
				seq++
			}
			for ; ; seq++ {
				p := w.plan(c.g, seq)
				if p >= end {
					break
				}
				if p >= w.warm {
					w.rec.corrected(end-p, end-w.warm)
					w.rec.unsent++
				}
			}
		}
		w.closeConn(c)
	}
	w.rec.publish()
}

// The timer heap orders connections by due time.

func (w *worker) push(c *conn, due time.Duration) {
	c.due = due
	c.hpos = len(w.heap)
	w.heap = append(w.heap, c)
	w.up(c.hpos)
}

func (w *worker) pop() *conn {
	c := w.heap[0]
	w.remove(c)
	return c
}

func (w *worker) remove(c *conn) {
	i, last := c.hpos, len(w.heap)-1
	if i != last {
		w.swap(i, last)
	}
	w.heap = w.heap[:last]
	c.hpos = -1
	if i < last {
		w.down(i)
		w.up(i)
	}
}

func (w *worker) swap(i, j int) {
	h := w.heap
	h[i], h[j] = h[j], h[i]
	h[i].hpos, h[j].hpos = i, j
}

func (w *worker) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if w.heap[p].due <= w.heap[i].due {
			return
		}
		w.swap(i, p)
		i = p
	}
}

func (w *worker) down(i int) {
	n := len(w.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && w.heap[r].due < w.heap[l].due {
			m = r
		}
		if w.heap[i].due <= w.heap[m].due {
			return
		}
		w.swap(i, m)
		i = m
	}
}
