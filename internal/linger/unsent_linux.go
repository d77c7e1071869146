package linger

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// unsent returns the bytes c's socket holds that the peer has not
// acknowledged (SIOCOUTQ); 0 if it cannot tell.
func unsent(c net.Conn) int {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	raw.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ); err == nil {
			n = v
		}
	})
	return n
}
