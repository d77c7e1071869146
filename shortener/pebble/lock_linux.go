package pebble

import (
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// lockHolder returns the PID of the process that holds the store's lock
// file, as far as the operating system tells (fcntl F_GETLK); 0 if it
// does not. Only the PID: another process's command line may hold
// secrets (a --admin-key), so it is never read.
func lockHolder(fs vfs.FS, dir string) int {
	if fs != vfs.Default {
		return 0
	}
	f, err := os.Open(filepath.Join(dir, "LOCK"))
	if err != nil {
		return 0
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil || lk.Type == unix.F_UNLCK || lk.Pid <= 0 {
		return 0
	}
	return int(lk.Pid)
}
