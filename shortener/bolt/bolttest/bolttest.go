// Package bolttest opens real bolt stores for tests: a fresh file in the
// test's temporary directory, closed when the test ends.
package bolttest

import (
	"path/filepath"
	"testing"

	"github.com/linkgate/linkgate/shortener/bolt"
)

// Open returns an empty bolt store in tb.TempDir(), closed at cleanup, and
// the path of its file.
func Open(tb testing.TB) (*bolt.Store, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "data", "links.db")
	s, err := bolt.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s, path
}
