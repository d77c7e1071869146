//go:build linux && race

package proxy

import (
	"os"
	"runtime"
	"syscall"
	"unsafe"
)

// The race detector learns from syscall.Write and syscall.Read that what
// a goroutine did before writing happens before what another does after
// reading (through any connection); raw reads and writes make the same
// edges with empty calls of those, and report their buffers' accesses.
// The empty calls go to /dev/null, not to the socket: an empty read or
// write of a socket would consume its pending error (a reset), which the
// next call must return.

var raceNull = func() int {
	fd, err := syscall.Open(os.DevNull, syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		panic(err)
	}
	return fd
}()

func raceWrote(b []byte) {
	if len(b) > 0 {
		runtime.RaceReadRange(unsafe.Pointer(&b[0]), len(b))
	}
	_, _ = syscall.Write(raceNull, nil)
}

func raceRead(b []byte) {
	if len(b) > 0 {
		runtime.RaceWriteRange(unsafe.Pointer(&b[0]), len(b))
	}
	_, _ = syscall.Read(raceNull, nil)
}
