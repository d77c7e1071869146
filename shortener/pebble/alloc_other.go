//go:build !linux

package pebble

import "github.com/cockroachdb/pebble/v2/vfs"

// allocate gives f n bytes of allocated blocks (its size becomes n).
func allocate(f vfs.File, n int64) error { return writeZeros(f, n) }
