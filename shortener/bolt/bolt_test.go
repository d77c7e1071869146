package bolt_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/bolt"
	"github.com/linkgate/linkgate/shortener/bolt/bolttest"
	"github.com/linkgate/linkgate/shortener/storetest"
)

// The store the release before pebble wrote (with links only in its
// create log and visits not yet folded) reads back as that release's API
// answered.
func TestReadRelease096063f(t *testing.T) {
	path, want := bolttest.Fixture(t)
	var got []shortener.LinkRecord
	info, err := bolt.Read(path, func(r shortener.LinkRecord) error {
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if info.Unapplied < 10 || info.LogRecords == 0 || info.Links != len(want) {
		t.Errorf("info %+v: want ≥ 10 unapplied links, some unfolded log records, %d links", info, len(want))
	}
	if len(got) != len(want) {
		t.Fatalf("read %d links, want %d", len(got), len(want))
	}
	for i := range want {
		if !storetest.Equal(got[i].Link, want[i].Link) {
			t.Errorf("link %d: got %+v, want %+v", i, got[i].Link, want[i].Link)
		}
		if !storetest.EqualStats(got[i].Stats, want[i].Stats) {
			t.Errorf("stats of %s:\ngot  %+v\nwant %+v", want[i].Link.ID, got[i].Stats, want[i].Stats)
		}
	}
}

// Whatever is at the path, Read fails cleanly, never panics.
func TestReadBadFiles(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.db")
	os.WriteFile(junk, []byte(strings.Repeat("not a bolt file ", 1000)), 0o600)
	if _, err := bolt.Read(junk, func(shortener.LinkRecord) error { return nil }); err == nil {
		t.Error("Read of a junk file succeeded")
	}
	if _, err := bolt.Read(filepath.Join(dir, "missing.db"), func(shortener.LinkRecord) error { return nil }); err == nil {
		t.Error("Read of a missing file succeeded")
	}
	// A torn create log: the reader keeps what is before the tear.
	path, want := bolttest.Fixture(t)
	wal := path + "-wal.0"
	b, _ := os.ReadFile(wal)
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	os.WriteFile(wal, b[:end-3], 0o600)
	n := 0
	if _, err := bolt.Read(path, func(shortener.LinkRecord) error { n++; return nil }); err != nil {
		t.Fatalf("Read with a torn create log: %v", err)
	}
	if n != len(want)-1 {
		t.Errorf("read %d links with the last log record torn, want %d", n, len(want)-1)
	}
}
