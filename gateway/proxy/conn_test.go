package proxy

import (
	"net"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/deadline"
)

// TestConnReachesDeadline: the handler's Handling call finds the
// deadline.Conn under the yielding wrapper, so the server limits see
// each request.
func TestConnReachesDeadline(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	var dogs deadline.Watchdogs
	dc := dogs.For(time.Second).Wrap(a, &deadline.Limits{Read: time.Second, Write: time.Second, Idle: time.Second})
	defer dc.Close()
	if deadline.Unwrap(&conn{Conn: dc}) != dc {
		t.Fatal("deadline.Unwrap does not find the deadline.Conn under conn")
	}
}
