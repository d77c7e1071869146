package syncbuf_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/linkgate/linkgate/internal/syncbuf"
)

func TestConcurrentWrites(t *testing.T) {
	var b syncbuf.Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("x\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "x\n"); n != 800 {
		t.Fatalf("got %d lines, want 800", n)
	}
}
