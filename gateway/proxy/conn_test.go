package proxy

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

func TestLazyDeadline(t *testing.T) {
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	const slack = 300 * time.Millisecond
	tests := []struct {
		name     string
		cur, t   time.Time
		want     time.Time
		wantCall bool
	}{
		{"first deadline is padded", time.Time{}, at(0), at(300), true},
		{"later, within slack: keep", at(300), at(100), at(300), false},
		{"equal: keep", at(300), at(300), at(300), false},
		{"later than the one in force: move", at(300), at(301), at(601), true},
		{"earlier by more than slack: move", at(1000), at(600), at(900), true},
		{"clear", at(300), time.Time{}, time.Time{}, true},
		{"clear when none: nothing", time.Time{}, time.Time{}, time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, call := lazyDeadline(tt.cur, tt.t, slack)
			if call != tt.wantCall || (call && !got.Equal(tt.want)) {
				t.Errorf("lazyDeadline(%v, %v) = %v, %v; want %v, %v", tt.cur, tt.t, got, call, tt.want, tt.wantCall)
			}
			// Whatever is in force afterwards lies in [t, t+slack].
			inForce := tt.cur
			if call {
				inForce = got
			}
			if !tt.t.IsZero() && (inForce.Before(tt.t) || inForce.Sub(tt.t) > slack) {
				t.Errorf("deadline in force %v, asked for %v: outside [t, t+%v]", inForce, tt.t, slack)
			}
			if tt.t.IsZero() && !inForce.IsZero() {
				t.Errorf("deadline in force %v after clearing", inForce)
			}
		})
	}
}

func TestDeadlineSlack(t *testing.T) {
	if got := deadlineSlack(60*time.Second, 60*time.Second); got != maxDeadlineSlack {
		t.Errorf("60 s timeouts: slack %v, want %v", got, maxDeadlineSlack)
	}
	if got := deadlineSlack(60*time.Second, time.Second); got != 50*time.Millisecond {
		t.Errorf("1 s timeout: slack %v, want 50ms", got)
	}
	if got := deadlineSlack(0); got != maxDeadlineSlack {
		t.Errorf("no timeouts: slack %v, want %v", got, maxDeadlineSlack)
	}
}

// TestConnDeadlines: moving a deadline forward repeatedly within slack
// keeps it enforced, and a read still times out, neither before the
// deadline last asked for nor much after it.
func TestConnDeadlines(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			time.Sleep(5 * time.Second) // never writes
		}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := &conn{Conn: raw, slack: 50 * time.Millisecond}
	defer c.Close()
	var last time.Time
	for range 5 {
		last = time.Now().Add(200 * time.Millisecond)
		if err := c.SetReadDeadline(last); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, err = c.Read(make([]byte, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read: %v, want a deadline error", err)
	}
	if now := time.Now(); now.Before(last) {
		t.Errorf("read timed out %v before the deadline asked for", last.Sub(now))
	}
	// Clearing the deadline is never lazy.
	if err := c.SetReadDeadline(time.Time{}); err != nil || !c.rd.IsZero() {
		t.Errorf("clear: %v, deadline in force %v", err, c.rd)
	}
}
