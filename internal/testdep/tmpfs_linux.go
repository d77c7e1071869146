package testdep

import (
	"fmt"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Tmpfs mounts a tmpfs of size bytes in a temporary directory, unmounted
// at cleanup, and returns its path: a small real file system to fill up
// (ENOSPC, statfs). Mounting needs root (the test command runs as root);
// without it the test is skipped, or failed in CI.
func Tmpfs(tb testing.TB, size int64) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "tmpfs")
	if err := unix.Mkdir(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		missing(tb, fmt.Sprintf("mount a tmpfs on %s: %v (needs root)", dir, err))
	}
	tb.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			tb.Errorf("unmount the tmpfs %s: %v", dir, err)
		}
	})
	return dir
}
