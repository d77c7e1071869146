package pebble

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// lockHolder names the process that holds the store's lock file, as far
// as the operating system tells (fcntl F_GETLK, /proc).
func lockHolder(fs vfs.FS, dir string) string {
	if fs != vfs.Default {
		return "the store is locked"
	}
	f, err := os.Open(filepath.Join(dir, "LOCK"))
	if err != nil {
		return "the store is locked"
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil || lk.Type == unix.F_UNLCK || lk.Pid <= 0 {
		return "the store is locked by another process"
	}
	cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", lk.Pid))
	name := strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
	if err != nil || name == "" {
		return fmt.Sprintf("the store is locked by process %d", lk.Pid)
	}
	return fmt.Sprintf("the store is locked by process %d (%s)", lk.Pid, name)
}
