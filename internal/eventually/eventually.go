// Package eventually waits in tests for a condition that becomes true
// asynchronously (a config change propagating, a node marked down).
package eventually

import (
	"testing"
	"time"
)

// True polls cond every 10 ms until it holds, failing tb after d.
func True(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Within polls cond every 10 ms for at most d and reports whether it held,
// for tests that go on to show what differs.
func Within(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}
