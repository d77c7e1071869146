package pebble

import pebbledb "github.com/cockroachdb/pebble/v2"

// WithCreatesNotSynced makes creates commit with pebble.NoSync: only the
// must-fail twin of the power-loss test uses it, to show the test sees a
// missing sync.
func WithCreatesNotSynced(o Options) Options {
	o.createSync = pebbledb.NoSync
	return o
}
