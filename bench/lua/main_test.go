package lua_test

import (
	"os"
	"runtime"
	"testing"
)

// The in-test targets run in the generator's own process. Give the Go
// scheduler spare Ps so their goroutines never hold up a generator thread
// waking from epoll_wait — as a target in another process would not.
func TestMain(m *testing.M) {
	runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 8))
	os.Exit(m.Run())
}
