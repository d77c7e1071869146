package deadline

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/eventually"
)

func TestTickFor(t *testing.T) {
	tests := []struct {
		ts   []time.Duration
		want time.Duration
	}{
		{nil, MaxTick},
		{[]time.Duration{60 * time.Second}, MaxTick},
		{[]time.Duration{60 * time.Second, 0, time.Second}, 32 * time.Millisecond}, // 62.5 ms → 32
		{[]time.Duration{100 * time.Millisecond}, 4 * time.Millisecond},            // 6.25 ms → 4
		{[]time.Duration{time.Millisecond}, time.Millisecond},
		{[]time.Duration{4 * time.Second}, MaxTick},
		{[]time.Duration{3 * time.Second}, 128 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := TickFor(tt.ts...); got != tt.want {
			t.Errorf("TickFor(%v) = %v, want %v", tt.ts, got, tt.want)
		}
	}
}

// fakeClock is a watchdog's clock that moves only when told.
type fakeClock struct{ ns atomic.Int64 }

func (f *fakeClock) now() int64              { return f.ns.Load() }
func (f *fakeClock) set(d time.Duration)     { f.ns.Store(int64(d)) }
func (f *fakeClock) advance(d time.Duration) { f.ns.Add(int64(d)) }

const tick = 10 * time.Millisecond

// setup returns a manual watchdog on a fake clock and both ends of a
// pipe, the near one watched with limits (nil: none).
func setup(t *testing.T, limits *Limits) (*fakeClock, *Watchdog, *Conn, net.Conn) {
	t.Helper()
	clk := &fakeClock{}
	w := newWatchdog(tick, clk.now)
	near, far := net.Pipe()
	c := w.Wrap(near, limits)
	t.Cleanup(func() { c.Close(); far.Close() })
	return clk, w, c, far
}

// blocked runs call in a goroutine and returns its error once it ends,
// after waiting (without sleeping) until it is blocked in the Conn.
func blocked(t *testing.T, c *Conn, which uint32, call func() error) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	for c.busy.Load()&which == 0 {
		runtime.Gosched()
	}
	return done
}

// expectBlocked checks that the watchdog did not expire the call (the
// expired state is set synchronously by check; the call ends after).
func expectBlocked(t *testing.T, c *Conn, done <-chan error, what string) {
	t.Helper()
	if c.expired.Load() != 0 {
		t.Fatalf("%s: deadline expired early", what)
	}
	select {
	case err := <-done:
		t.Fatalf("%s: call ended early: %v", what, err)
	default:
	}
}

func expectTimeout(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s: %v, want a deadline error", what, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still blocked", what)
	}
}

func readErr(c net.Conn) func() error {
	return func() error { _, err := c.Read(make([]byte, 1)); return err }
}

func writeErr(c net.Conn) func() error {
	return func() error { _, err := c.Write([]byte("x")); return err }
}

// TestDeadline: a deadline set with net.Conn's methods expires a blocked
// call at the first tick after it, not before; moving it while the call
// is blocked moves the expiry.
func TestDeadline(t *testing.T) {
	for _, tc := range []struct {
		name  string
		which uint32
		set   func(c *Conn, t time.Time) error
		call  func(c net.Conn) func() error
	}{
		{"read", read, (*Conn).SetReadDeadline, readErr},
		{"write", write, (*Conn).SetWriteDeadline, writeErr},
		{"both/read", read, (*Conn).SetDeadline, readErr},
		{"both/write", write, (*Conn).SetDeadline, writeErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk, w, c, _ := setup(t, nil)
			start := w.start
			tc.set(c, start.Add(100*time.Millisecond))
			done := blocked(t, c, tc.which, tc.call(c))
			clk.set(99 * time.Millisecond)
			w.check()
			expectBlocked(t, c, done, "before the deadline")
			tc.set(c, start.Add(200*time.Millisecond)) // moved while blocked
			clk.set(150 * time.Millisecond)
			w.check()
			expectBlocked(t, c, done, "past the old deadline")
			clk.set(201 * time.Millisecond)
			w.check()
			expectTimeout(t, done, "past the new deadline")
			// The deadline stays exceeded for later calls, until moved.
			if err := tc.call(c)(); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("later call: %v, want a deadline error", err)
			}
		})
	}
}

// TestPastAndCleared: a deadline in the past fails a blocked call at
// once, without a tick; clearing it lets calls succeed again.
func TestPastAndCleared(t *testing.T) {
	_, _, c, far := setup(t, nil)
	done := blocked(t, c, read, readErr(c))
	c.SetReadDeadline(aLongTimeAgo)
	expectTimeout(t, done, "deadline in the past")
	c.SetReadDeadline(time.Time{})
	go far.Write([]byte("y"))
	if err := readErr(c)(); err != nil {
		t.Fatalf("read after clearing: %v", err)
	}
	// An overdue deadline moved into the future works as well.
	c.SetReadDeadline(aLongTimeAgo)
	if err := readErr(c)(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read with a past deadline: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(time.Hour))
	go far.Write([]byte("z"))
	if err := readErr(c)(); err != nil {
		t.Fatalf("read after moving the deadline: %v", err)
	}
}

// TestTimeoutNeverEarly: relative timeouts start from the real clock, not
// the coarse one, which lags (here by 5 ticks, as when the watchdog's
// goroutine runs late on a busy machine): never early.
func TestTimeoutNeverEarly(t *testing.T) {
	clk, w, c, _ := setup(t, nil)
	clk.set(5 * tick) // real time moved on; the coarse clock did not
	c.SetReadTimeout(100 * time.Millisecond)
	done := blocked(t, c, read, readErr(c))
	clk.set(5*tick + 100*time.Millisecond - 1)
	w.check()
	expectBlocked(t, c, done, "just before the timeout")
	clk.advance(tick)
	w.check()
	expectTimeout(t, done, "a tick past the timeout")

	c.SetReadTimeout(0)
	if c.rd.Load() != 0 {
		t.Errorf("SetReadTimeout(0) left deadline %d", c.rd.Load())
	}
	c.SetWriteTimeout(time.Second)
	if got, want := c.wd.Load(), clk.now()+int64(time.Second); got != want {
		t.Errorf("write deadline %d, want %d", got, want)
	}
}

// TestOverdueBetweenCalls: a call started after its deadline passed fails
// without waiting for a tick.
func TestOverdueBetweenCalls(t *testing.T) {
	clk, w, c, _ := setup(t, nil)
	c.SetWriteTimeout(50 * time.Millisecond)
	clk.advance(time.Second)
	w.check() // nothing was blocked: only the clock moves
	if err := writeErr(c)(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write after the deadline: %v", err)
	}
}

// TestLimits plays a server connection through its phases: Read from
// accept, Idle after an answer, Read again from a request's first byte
// (so trickled bytes cannot stretch it), Write over a whole answer.
func TestLimits(t *testing.T) {
	limits := &Limits{Read: 100 * time.Millisecond, Write: 200 * time.Millisecond, Idle: 300 * time.Millisecond}
	clk, w, c, _ := setup(t, limits)

	// A new connection: Read from accept, even before the first byte.
	if got := c.rd.Load(); got != int64(limits.Read) {
		t.Fatalf("read deadline on accept %d, want %d", got, int64(limits.Read))
	}
	done := blocked(t, c, read, readErr(c))
	clk.set(limits.Read - 1)
	w.check()
	expectBlocked(t, c, done, "within Read of accept")
	clk.set(limits.Read)
	w.check()
	expectTimeout(t, done, "no request within Read of accept")

	// Another connection: a request trickles in, byte by byte.
	clk, w, c, far := setup(t, limits)
	buf := make([]byte, 1)
	for range 3 {
		go far.Write([]byte("G"))
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
		clk.advance(30 * time.Millisecond)
		w.check()
	}
	done = blocked(t, c, read, readErr(c))
	clk.advance(10 * time.Millisecond) // 100 ms since accept
	w.check()
	expectTimeout(t, done, "a trickled request")

	// A keep-alive connection: answered requests wait Idle for the next.
	clk, w, c, far = setup(t, limits)
	go far.Write([]byte("G"))
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	Handling(c)
	clk.advance(50 * time.Millisecond)
	w.check()
	go io.Copy(io.Discard, far)
	if _, err := c.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	if got, want := c.wd.Load(), clk.now()+int64(limits.Write); got != want {
		t.Errorf("write deadline %d, want %d (Write from the answer's first write)", got, want)
	}
	armed := c.wd.Load()
	clk.advance(20 * time.Millisecond)
	w.check()
	if _, err := c.Write([]byte("more of it")); err != nil || c.wd.Load() != armed {
		t.Errorf("a later write of the same answer moved the deadline: %v, %d → %d", err, armed, c.wd.Load())
	}
	idleFrom := clk.now()
	done = blocked(t, c, read, readErr(c))
	if got, want := c.rd.Load(), idleFrom+int64(limits.Idle); got != want {
		t.Errorf("idle deadline %d, want %d", got, want)
	}
	clk.advance(limits.Idle - 1) // past Read, within Idle
	w.check()
	expectBlocked(t, c, done, "idle within Idle")
	clk.advance(1)
	w.check()
	expectTimeout(t, done, "idle past Idle")

	// SetLimits(nil): a connection taken over keeps only its own deadlines.
	clk, w, c, _ = setup(t, limits)
	c.SetLimits(nil)
	done = blocked(t, c, read, readErr(c))
	clk.advance(time.Hour)
	w.check()
	expectBlocked(t, c, done, "without limits")
	c.SetReadDeadline(aLongTimeAgo)
	expectTimeout(t, done, "own deadline")
}

// wrapped is a connection wrapper with NetConn, like *tls.Conn.
type wrapped struct{ net.Conn }

func (w wrapped) NetConn() net.Conn { return w.Conn }

func TestHandlingUnwraps(t *testing.T) {
	_, _, c, _ := setup(t, &Limits{Read: time.Second, Write: time.Second, Idle: time.Second})
	Handling(wrapped{wrapped{c}})
	if c.requests != 1 {
		t.Errorf("requests = %d after Handling through two wrappers", c.requests)
	}
	if Unwrap(wrapped{c}) != c {
		t.Error("Unwrap did not find the Conn")
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	Handling(a) // not watched: nothing happens
	if Unwrap(wrapped{a}) != nil {
		t.Error("Unwrap found a Conn in a plain connection")
	}
}

// TestWatchdogGoroutine: a real watchdog ticks only while it has
// connections, and enforces a deadline on a real TCP connection.
func TestWatchdogGoroutine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			io.Copy(io.Discard, c) // never writes
		}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	w := New(time.Millisecond)
	c := w.Wrap(raw, nil)
	start := time.Now()
	c.SetReadTimeout(20 * time.Millisecond)
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v, want a deadline error", err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("timed out after %v, before the 20ms timeout", d)
	}
	c.Close()
	eventually.True(t, 2*time.Second, "the watchdog goroutine stops without connections", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return !w.running
	})
}

// TestCallTimeouts: with call timeouts, each Read and Write has its own
// deadline from its start, so a long stream of calls outlives the limits
// as long as each call is quick, and a stalled call still times out;
// the next request handled goes back to the limits.
func TestCallTimeouts(t *testing.T) {
	limits := &Limits{Read: 100 * time.Millisecond, Write: 100 * time.Millisecond, Idle: 100 * time.Millisecond}
	clk, w, c, far := setup(t, limits)
	c.SetCallTimeouts(50*time.Millisecond, 50*time.Millisecond)
	buf := make([]byte, 1)
	for range 10 { // 10 × 40 ms: far past Read, each call within 50 ms
		go far.Write([]byte("x"))
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
		clk.advance(40 * time.Millisecond)
		w.check()
	}
	done := blocked(t, c, read, readErr(c))
	clk.advance(49 * time.Millisecond)
	w.check()
	expectBlocked(t, c, done, "within the call timeout")
	clk.advance(2 * time.Millisecond)
	w.check()
	expectTimeout(t, done, "a stalled read")

	_, w, c, _ = setup(t, limits)
	c.SetCallTimeouts(0, time.Hour)
	Handling(c)
	if c.perRead.Load() != 0 || c.perWrite.Load() != 0 {
		t.Error("call timeouts kept after the next request")
	}
	_ = w
}

// TestHandlingArrived: Handling returns when the Read that ended the idle
// wait before a request returned, only if that one Read brought the
// request whole; else the zero Time.
func TestHandlingArrived(t *testing.T) {
	clk, w, c, far := setup(t, &Limits{Read: time.Second, Write: time.Second, Idle: time.Minute})
	buf := make([]byte, 64)
	read := func(at time.Duration, s string) {
		t.Helper()
		clk.set(at)
		go far.Write([]byte(s))
		if n, err := c.Read(buf); err != nil || string(buf[:n]) != s {
			t.Fatalf("read %q, %v; want %q", buf[:n], err, s)
		}
	}
	steps := []struct {
		name  string
		reads []string
		want  time.Duration // -1: the zero Time
	}{
		{"first request of the connection", []string{"GET /a"}, -1},
		{"after an idle wait, in one Read", []string{"GET /b"}, 3 * time.Second},
		{"pipelined, already read", nil, -1},
		{"in two Reads", []string{"GET", " /c"}, -1},
		{"in one Read again", []string{"GET /d"}, 9 * time.Second},
	}
	at := time.Second
	for _, st := range steps {
		for _, s := range st.reads {
			read(at, s)
			at += 2 * time.Second
		}
		got := Handling(c)
		switch {
		case st.want < 0 && !got.IsZero():
			t.Errorf("%s: arrived at %v, want the zero Time", st.name, got.Sub(w.start))
		case st.want >= 0 && got.Sub(w.start) != st.want:
			t.Errorf("%s: arrived at %v, want %v", st.name, got.Sub(w.start), st.want)
		}
	}
	if got := Handling(far); !got.IsZero() {
		t.Errorf("another connection: %v, want the zero Time", got)
	}
}

// Drain: a connection waiting for its next request gets at most the quiet
// time from the Drain (or from when its wait begins, after it), and one
// in the middle of a request keeps its limits.
func TestDrain(t *testing.T) {
	limits := &Limits{Read: time.Second, Write: time.Second, Idle: time.Minute}
	const quiet = 100 * time.Millisecond
	buf := make([]byte, 1)

	// Idle between two requests when the drain begins.
	clk, w, c, far := setup(t, limits)
	go far.Write([]byte("G"))
	c.Read(buf)
	Handling(c) // the request is answered; the next Read waits for another
	done := blocked(t, c, read, readErr(c))
	clk.advance(time.Second)
	w.Drain(quiet)
	clk.advance(quiet - 1)
	w.check()
	expectBlocked(t, c, done, "within the quiet time of the drain")
	clk.advance(1)
	w.check()
	expectTimeout(t, done, "idle past the quiet time of a drain")

	// In the middle of a request when the drain begins: its Read limit
	// stands; once answered, its wait for the next has the quiet time.
	clk, w, c, far = setup(t, limits)
	go far.Write([]byte("G"))
	c.Read(buf)
	w.Drain(quiet)
	done = blocked(t, c, read, readErr(c))
	clk.advance(quiet)
	w.check()
	expectBlocked(t, c, done, "a request begun before the drain, past the quiet time")
	go far.Write([]byte("E"))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	Handling(c)
	done = blocked(t, c, read, readErr(c))
	clk.advance(quiet - 1)
	w.check()
	expectBlocked(t, c, done, "within the quiet time of its wait")
	clk.advance(1)
	w.check()
	expectTimeout(t, done, "waiting for a next request past the quiet time, during a drain")
}
