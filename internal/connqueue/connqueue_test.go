package connqueue_test

import (
	"errors"
	"net"
	"testing"

	"github.com/linkgate/linkgate/internal/connqueue"
)

// TestQueue: a connection put is the one accepted; after Close, Accept
// says net.ErrClosed and Put refuses.
func TestQueue(t *testing.T) {
	q := connqueue.New()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	got := make(chan net.Conn, 1)
	go func() {
		c, err := q.Accept()
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	if !q.Put(a) {
		t.Fatal("Put refused on an open queue")
	}
	if c := <-got; c != a {
		t.Errorf("accepted %v, want the connection put", c)
	}
	q.Close()
	q.Close()
	if _, err := q.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v", err)
	}
	if q.Put(b) {
		t.Error("Put accepted after Close")
	}
}
