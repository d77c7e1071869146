//go:build !race

package testdep

// Race is true when the race detector is on.
const Race = false
