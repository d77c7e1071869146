package bolt

import "time"

// SetApplyDelay changes how long pending links wait to be applied in the
// stores opened next, for tests that need them to stay pending (or be
// applied at once); the returned function restores it.
func SetApplyDelay(d time.Duration) (restore func()) {
	old := applyDelay
	applyDelay = d
	return func() { applyDelay = old }
}

// SetMaxApply changes how many links the applier writes in one
// transaction; the returned function restores it.
func SetMaxApply(n int) (restore func()) {
	old := maxApply
	maxApply = n
	return func() { maxApply = old }
}

// SetRotateSize changes the create log's rotation size; the returned
// function restores it.
func SetRotateSize(n int64) (restore func()) {
	old := rotateSize
	rotateSize = n
	return func() { rotateSize = old }
}

// Pending returns how many links are logged but not yet applied.
func (s *Store) Pending() int { return int(s.npending.Load()) }
