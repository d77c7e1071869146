package pebble

import (
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
)

// WithCreatesNotSynced makes creates commit with pebble.NoSync: only the
// must-fail twin of the power-loss test uses it, to show the test sees a
// missing sync.
func WithCreatesNotSynced(o Options) Options {
	o.createSync = pebbledb.NoSync
	return o
}

// WithGuardClock gives the free-space guard a clock of the test's.
func WithGuardClock(o Options, clock func() time.Time) Options {
	o.clock = clock
	return o
}

// GuardInterval is how long the guard trusts its last look.
const GuardInterval = guardInterval
