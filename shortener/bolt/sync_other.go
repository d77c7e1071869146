//go:build !linux

package bolt

import "os"

// fdatasync is f.Sync where fdatasync(2) is not available.
func fdatasync(f *os.File) error { return f.Sync() }
