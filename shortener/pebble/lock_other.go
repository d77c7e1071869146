//go:build !linux

package pebble

import "github.com/cockroachdb/pebble/v2/vfs"

func lockHolder(fs vfs.FS, dir string) int { return 0 }
