//go:build race

package testdep

// Race is true when the race detector is on. Tests whose point is a timing
// measurement (pacing accuracy, latency agreement) skip under it; the test
// command runs them again without -race.
const Race = true
