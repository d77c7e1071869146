// Package pace bounds the share of a single P that a goroutine's
// background work takes: while the process has one P (GOMAXPROCS=1), the
// goroutine stops after every Slice of work for Ratio times as long as
// that work took, so that requests waiting for the P run meanwhile.
//
// runtime.Gosched is not enough: it puts the goroutine at the back of the
// run queue, and with a request taking microseconds and a piece of work a
// millisecond, the work still gets most of a busy P. A goroutine asleep on
// a timer is not runnable; a pause as long as twice the work before it
// bounds the work's share to a third of the P whatever the size of its
// pieces (shortener/pebble/yield.go tells how this was found). On an idle
// P a pause is a sleep nobody needed: the work then takes up to three
// times as long as it could.
package pace

import (
	"runtime"
	"time"
)

// Slice is how much work (wall time since the last pause) is done between
// two pauses, at least: long enough that the pause is not mostly the
// timer's granularity, short enough that a request waiting for the P
// waits little. Ratio is how long a pause lasts, in multiples of the work
// before it; MaxPause bounds it (a stretch that was long because the
// process was not running at all, or blocked in a system call, needs no
// long pause).
const (
	Slice    = time.Millisecond
	Ratio    = 2
	MaxPause = 10 * time.Millisecond
)

// Pacer paces one goroutine's work; make it with New.
type Pacer struct {
	pause func(time.Duration)
	now   func() time.Time
	since time.Time // the end of the last pause, or New
}

// New returns a Pacer whose work starts now. pause stops the calling
// goroutine and now is the clock; nil: time.Sleep and time.Now.
func New(pause func(time.Duration), now func() time.Time) Pacer {
	if pause == nil {
		pause = time.Sleep
	}
	if now == nil {
		now = time.Now
	}
	return Pacer{pause: pause, now: now, since: now()}
}

// Step is called between two pieces of the work: with a single P, once
// Slice or more of work was done since the last pause, it pauses for Ratio
// times as long (at most MaxPause). With more Ps it does nothing.
func (p *Pacer) Step() {
	if runtime.GOMAXPROCS(0) != 1 {
		return
	}
	if worked := p.now().Sub(p.since); worked >= Slice {
		p.pause(min(Ratio*worked, MaxPause))
		p.since = p.now()
	}
}
