package batch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/eventually"
)

// fakeClock runs AfterFunc callbacks when the test advances it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []timer
}

type timer struct {
	at time.Time
	f  func()
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) AfterFunc(d time.Duration, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timers = append(c.timers, timer{c.now.Add(d), f})
}

// advance moves the clock by d, running (in this goroutine) every
// callback due by then, including those they schedule.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		i := -1
		for j, t := range c.timers {
			if !t.at.After(end) && (i < 0 || t.at.Before(c.timers[i].at)) {
				i = j
			}
		}
		if i < 0 {
			c.now = end
			c.mu.Unlock()
			return
		}
		t := c.timers[i]
		c.timers = append(c.timers[:i], c.timers[i+1:]...)
		c.now = t.at
		c.mu.Unlock()
		t.f()
	}
}

// recorder is a send function that records batches; fail makes the next
// calls fail.
type recorder struct {
	mu      sync.Mutex
	batches []string
	fail    int
	sent    chan struct{}
}

func (r *recorder) send(_ context.Context, entries [][]byte, _ int) error {
	r.mu.Lock()
	defer func() { r.mu.Unlock(); r.sent <- struct{}{} }()
	var s []string
	for _, e := range entries {
		s = append(s, string(e))
	}
	if r.fail > 0 {
		r.fail--
		r.batches = append(r.batches, "fail:"+strings.Join(s, ","))
		return errors.New("receiver down")
	}
	r.batches = append(r.batches, strings.Join(s, ","))
	return nil
}

func (r *recorder) got() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.batches, " | ")
}

func TestProcessor(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		fail int
		// steps: "p" pushes the next entry, "aN" advances N seconds,
		// "wN" waits for N sends (batches of full buffers go out on
		// their own goroutine)
		steps, want string
	}{
		{"batch_max_size", Config{BatchMaxSize: 2, InactiveTimeout: 5, BufferDuration: 60}, 0, "p p w1 p", "1,2"},
		{"inactive_timeout", Config{BatchMaxSize: 10, InactiveTimeout: 5, BufferDuration: 60}, 0, "p a4 p a4 a2", "1,2"}, // the timer (every 5 s) finds 6 s of inactivity at 10 s
		{"not inactive yet", Config{BatchMaxSize: 10, InactiveTimeout: 5, BufferDuration: 60}, 0, "p a4 p a4", ""},
		{"buffer_duration", Config{BatchMaxSize: 100, InactiveTimeout: 2, BufferDuration: 5}, 0, "p a1 p a1 p a1 p a1 p a1 p a1", "1,2,3,4,5,6"}, // never inactive for 2 s: the tick at 6 s finds the first entry 6 s old
		{"size 1: each entry alone", Config{BatchMaxSize: 1, InactiveTimeout: 5, BufferDuration: 60}, 0, "p w1 p w1", "1 | 2"},
		{"retried", Config{BatchMaxSize: 10, InactiveTimeout: 1, BufferDuration: 60, MaxRetryCount: 2, RetryDelay: 3}, 2, "p a1 a3 a3", "fail:1 | fail:1 | 1"},
		{"retries run out", Config{BatchMaxSize: 10, InactiveTimeout: 1, BufferDuration: 60, MaxRetryCount: 1, RetryDelay: 3}, 5, "p a1 a3 a10 p a1", "fail:1 | fail:1 | fail:2"},
		{"no retry by default", Config{BatchMaxSize: 10, InactiveTimeout: 1, BufferDuration: 60}, 1, "p a1 a10", "fail:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
			m := NewManager(slog.New(slog.DiscardHandler), clock, 0)
			r := &recorder{fail: tc.fail, sent: make(chan struct{}, 100)}
			p := m.Processor("routes/1", tc.c, r.send)
			n := 0
			for _, s := range strings.Fields(tc.steps) {
				switch s[0] {
				case 'p':
					n++
					if !p.Push([]byte(fmt.Sprint(n))) {
						t.Fatalf("push %d refused", n)
					}
				case 'a':
					var secs int
					fmt.Sscan(s[1:], &secs)
					clock.advance(time.Duration(secs) * time.Second)
				case 'w':
					var k int
					fmt.Sscan(s[1:], &k)
					for range k {
						select {
						case <-r.sent:
						case <-time.After(5 * time.Second):
							t.Fatal("no batch sent")
						}
					}
				}
			}
			if got := r.got(); got != tc.want {
				t.Errorf("batches %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPendingBound: while the receiver is stuck, pushes past the bound are
// refused at once and counted; once it answers, room comes back.
func TestPendingBound(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	m := NewManager(slog.New(slog.DiscardHandler), clock, 3)
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	send := func(context.Context, [][]byte, int) error { entered <- struct{}{}; <-release; return nil }
	p := m.Processor("routes/1", Config{BatchMaxSize: 1, InactiveTimeout: 5, BufferDuration: 60}, send)
	for i := range 5 {
		ok := p.Push([]byte{byte(i)})
		if want := i < 3; ok != want {
			t.Fatalf("push %d: taken %v, want %v", i, ok, want)
		}
	}
	if m.Pending() != 3 || m.Dropped() != 2 {
		t.Fatalf("pending %d dropped %d, want 3 and 2", m.Pending(), m.Dropped())
	}
	for range 3 {
		<-entered
	}
	close(release)
	eventually.True(t, 10*time.Second, "the sent entries leave the pending count", func() bool { return m.Pending() == 0 })
	if !p.Push([]byte{9}) {
		t.Error("push refused once the receiver answered")
	}
}

// TestStale: an idle processor is dropped when another is asked for; a
// push to the dropped one goes to its replacement.
func TestStale(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	m := NewManager(slog.New(slog.DiscardHandler), clock, 0)
	r := &recorder{sent: make(chan struct{}, 10)}
	c := Config{BatchMaxSize: 10, InactiveTimeout: 1, BufferDuration: 60}
	old := m.Processor("routes/1#1", c, r.send)
	clock.advance(31 * time.Minute)
	m.Processor("routes/1#2", c, r.send)
	if len(m.procs) != 1 {
		t.Fatalf("%d processors, want the new one only", len(m.procs))
	}
	old.Push([]byte("late"))
	clock.advance(2 * time.Second)
	if got := r.got(); got != "late" {
		t.Errorf("batches %q, want the late entry sent", got)
	}
}
