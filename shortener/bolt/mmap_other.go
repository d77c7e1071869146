//go:build !linux

package bolt

const mmapFlags = 0
