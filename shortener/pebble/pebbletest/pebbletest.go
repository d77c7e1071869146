// Package pebbletest opens real pebble stores for tests: a fresh
// directory in the test's temporary directory, closed when the test ends.
package pebbletest

import (
	"path/filepath"
	"testing"

	"github.com/linkgate/linkgate/shortener/pebble"
)

// Open returns an empty store in tb.TempDir(), closed at cleanup, and its
// directory.
func Open(tb testing.TB) (*pebble.Store, string) {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "data", "links")
	s, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s, dir
}
