package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/internal/syncbuf"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/bolt/bolttest"
	"github.com/linkgate/linkgate/shortener/pebble"
	"github.com/linkgate/linkgate/shortener/storetest"
)

// exportAll reads every record of the pebble store in dir.
func exportAll(t *testing.T, dir string) []shortener.LinkRecord {
	t.Helper()
	s, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var recs []shortener.LinkRecord
	if err := s.ExportRecords(context.Background(), func(r shortener.LinkRecord) error {
		recs = append(recs, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return recs
}

// wantRecords checks that got holds exactly the links of want, with their
// statistics.
func wantRecords(t *testing.T, got, want []shortener.LinkRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d links, want %d", len(got), len(want))
	}
	for i := range want {
		if !storetest.Equal(got[i].Link, want[i].Link) || !storetest.EqualStats(got[i].Stats, want[i].Stats) {
			t.Errorf("record %d:\ngot  %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

// The first start on the default path of an earlier release (DIR.db, a
// bolt store with links only in its create log and visits not folded)
// migrates it: every link and its statistics are served, the old files
// are kept, and the next start does not migrate again.
func TestServeMigratesBoltStore(t *testing.T) {
	old, want := bolttest.Fixture(t)
	dir := strings.TrimSuffix(old, ".db")
	s := startServe(t, nil, "--store", "pebble:"+dir, "--admin-key", "k3y")
	if !strings.Contains(s.logs.String(), "store migrated") {
		t.Fatalf("no migration logged:\n%s", s.logs)
	}
	for _, id := range []string{"late09", "fix002", "fix039"} {
		if status, _, body := call(t, "GET", s.URL+"/getFullURL/"+id, ""); status != 200 {
			t.Errorf("migrated link %s: %d %s", id, status, body)
		}
	}
	if status, _, body := call(t, "GET", s.URL+"/api/v1/links/fix001/stats", "", "Authorization", "Bearer k3y"); status != 404 {
		t.Errorf("deleted link fix001 has stats: %d %s", status, body)
	}
	if status, _, body := call(t, "GET", s.URL+"/api/v1/links/fix000/stats", "", "Authorization", "Bearer k3y"); status != 200 ||
		!regexp.MustCompile(`"total":30\b`).MatchString(body) {
		t.Errorf("stats of fix000: %d %s", status, body)
	}
	s.stop(t)
	for _, f := range []string{old, old + "-wal.0", old + "-wal.1"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("old file: %v", err)
		}
	}
	wantRecords(t, exportAll(t, dir), want)
	s = startServe(t, nil, "--store", "pebble:"+dir)
	if strings.Contains(s.logs.String(), "migrat") {
		t.Errorf("second start migrated again:\n%s", s.logs)
	}
}

// --store bolt:PATH (an earlier release's setting) serves the store
// migrated next to it.
func TestServeBoltFlagMigrates(t *testing.T) {
	old, _ := bolttest.Fixture(t)
	s := startServe(t, nil, "--store", "bolt:"+old)
	if status, _, body := call(t, "GET", s.URL+"/getFullURL/late00", ""); status != 200 {
		t.Errorf("migrated link: %d %s", status, body)
	}
	s.stop(t)
	if m, _ := filepath.Glob(filepath.Join(strings.TrimSuffix(old, ".db"), "MANIFEST-*")); len(m) == 0 {
		t.Error("no pebble store beside the bolt file")
	}
}

// linkgate store migrate copies the store; run again, it copies nothing
// and reports the links as already there.
func TestStoreMigrateCommand(t *testing.T) {
	old, want := bolttest.Fixture(t)
	dir := filepath.Join(t.TempDir(), "migrated")
	for i, wantOut := range []string{"48 copied, 0 already there, 0 conflicting", "0 copied, 48 already there, 0 conflicting"} {
		var out, errOut syncbuf.Buffer
		err := run(context.Background(), []string{"store", "migrate", "--from", "bolt:" + old, "--to", "pebble:" + dir},
			func(string) string { return "" }, strings.NewReader(""), &out, &errOut)
		if err != nil || !strings.Contains(out.String(), wantOut) || !strings.Contains(out.String(), "10 only in the create log") {
			t.Fatalf("run %d: %v; stdout %q stderr %q; want %q", i, err, out.String(), errOut.String(), wantOut)
		}
	}
	wantRecords(t, exportAll(t, dir), want)
	err := run(context.Background(), []string{"store", "migrate", "--from", "bolt:" + filepath.Join(t.TempDir(), "none.db")},
		func(string) string { return "" }, strings.NewReader(""), io.Discard, io.Discard)
	if err == nil {
		t.Error("migrate from a missing file succeeded")
	}
}
