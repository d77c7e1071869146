package pebble

import (
	"errors"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// allocate gives f n bytes of allocated blocks (its size becomes n).
func allocate(f vfs.File, n int64) error {
	if fd := f.Fd(); fd != vfs.InvalidFd {
		err := unix.Fallocate(int(fd), 0, 0, n)
		if !errors.Is(err, unix.EOPNOTSUPP) {
			return err
		}
	}
	return writeZeros(f, n)
}
