package pebble_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkgate/linkgate/internal/syncbuf"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/pebble"
)

// crashImage creates n links in a store on a crashable file system and
// returns what the storage held of it at a power cut (only what was
// synced), the ids, and the path of the newest write-ahead log.
func crashImage(t *testing.T, n int) (*vfs.MemFS, []string, string) {
	t.Helper()
	fs := vfs.NewCrashableMem()
	s, err := pebble.Open("links", pebble.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := createN(context.Background(), s, "wal", n)
	if err != nil {
		t.Fatal(err)
	}
	img := fs.CrashClone(vfs.CrashCloneCfg{})
	s.Close()
	names, err := img.List("links")
	if err != nil {
		t.Fatal(err)
	}
	var newest string
	for _, name := range names {
		if strings.HasSuffix(name, ".log") && name > newest {
			newest = name
		}
	}
	if newest == "" {
		t.Fatalf("no write-ahead log in %v", names)
	}
	return img, ids, "links/" + newest
}

func readFile(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, fs vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func openLogged(t *testing.T, fs vfs.FS) (*pebble.Store, *syncbuf.Buffer, error) {
	var logs syncbuf.Buffer
	s, err := pebble.Open("links", pebble.Options{FS: fs, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, &logs, err
}

// A clean close leaves nothing to report.
func TestRecoveryAfterCleanClose(t *testing.T) {
	fs := vfs.NewMem()
	s, err := pebble.Open("links", pebble.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := createN(context.Background(), s, "clean", 10); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, logs, err := openLogged(t, fs)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Recovery(); r.Unclean || r.Torn {
		t.Errorf("after a clean close: %+v", r)
	}
	if strings.Contains(logs.String(), "unclean") {
		t.Errorf("a clean close was reported as unclean:\n%s", logs)
	}
}

// After a power cut the store is reported as recovered from an unclean
// stop (log line, Recovery, metrics), and every create is there.
func TestRecoveryAfterPowerCutReported(t *testing.T) {
	img, ids, wal := crashImage(t, 100)
	s, logs, err := openLogged(t, img)
	if err != nil {
		t.Fatal(err)
	}
	r := s.Recovery()
	if !r.Unclean || r.Records < len(ids) || r.WAL != wal {
		t.Errorf("Recovery() = %+v, want unclean with ≥ %d records of %s", r, len(ids), wal)
	}
	if !strings.Contains(logs.String(), "unclean stop") {
		t.Errorf("no log line says the store recovered from an unclean stop:\n%s", logs)
	}
	checkAll(t, s, ids)
	if _, err := createN(context.Background(), s, "after", 10); err != nil {
		t.Fatal(err)
	}
}

// A log cut in the middle of its last records (a torn write): pebble
// replays the complete records before the cut, the store opens and works.
func TestRecoveryOfTruncatedWAL(t *testing.T) {
	img, ids, wal := crashImage(t, 200)
	b := readFile(t, img, wal)
	end := bytes.LastIndex(b, []byte("https://full.example/"+ids[len(ids)-1])) // inside the last create's record
	if end < 0 {
		t.Fatal("the last create is not in the newest log")
	}
	writeFile(t, img, wal, b[:end])
	s, logs, err := openLogged(t, img)
	if err != nil {
		t.Fatalf("open after a torn write: %v", err)
	}
	if r := s.Recovery(); !r.Unclean || !r.Torn {
		t.Errorf("Recovery() = %+v, want unclean and torn", r)
	}
	if !strings.Contains(logs.String(), "incomplete record") {
		t.Errorf("the torn write is not reported:\n%s", logs)
	}
	checkAll(t, s, ids[:len(ids)-1])
	if _, err := s.Get(context.Background(), ids[len(ids)-1]); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("the create whose record was cut: %v, want not found", err)
	}
	if _, err := createN(context.Background(), s, "after", 10); err != nil {
		t.Fatal(err)
	}
}

// A record that fails its checksum with intact records after it is
// corruption: Open refuses, says so (ErrCorrupt) and what to do.
func TestRecoveryOfCorruptWAL(t *testing.T) {
	img, ids, wal := crashImage(t, 2000)
	b := readFile(t, img, wal)
	// A create from the middle on that is in the newest log (the first
	// memtable, 256 KiB, may have rotated the log before), with 100
	// intact records after it.
	mid := -1
	for _, id := range ids[len(ids)/2 : len(ids)-100] {
		if mid = bytes.Index(b, []byte("https://full.example/"+id)); mid >= 0 {
			break
		}
	}
	if mid < 0 {
		t.Fatal("no create from the middle on is in the newest log")
	}
	b[mid+3] ^= 0xff
	writeFile(t, img, wal, b)
	_, _, err := openLogged(t, img)
	if !errors.Is(err, pebble.ErrCorrupt) {
		t.Fatalf("open of a store with a corrupt log: %v, want ErrCorrupt", err)
	}
	for _, want := range []string{wal + " (a write-ahead log)", "linkgate store restore --store pebble:links"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
}

// A table whose block fails its checksum: pebble's default reaction (its
// DataCorruption event) ends the process — this test would die with it.
// Open, which reads every link into the read index, fails with
// ErrCorrupt naming the table and what to do; without the index the store
// opens, the links in the bad block fail with ErrUnavailable, the others
// are served, and the log and the metric say which file.
func TestCorruptTable(t *testing.T) {
	fs := vfs.NewMem()
	s, err := pebble.Open("links", pebble.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := createN(context.Background(), s, "sst", 5000)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	names, err := fs.List("links")
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for _, name := range names {
		if strings.HasSuffix(name, ".sst") {
			tables = append(tables, "links/"+name)
		}
	}
	if len(tables) != 1 {
		t.Fatalf("want one table after a compaction, have %v", names)
	}
	sst := tables[0]
	b := readFile(t, fs, sst)
	// Data blocks come first, then the index and the footer; the first
	// block holds links ('l' sorts before the list's index, 'x', whose
	// trigram records are most of the table).
	b[512] ^= 0xff
	writeFile(t, fs, sst, b)

	_, _, err = openLogged(t, fs)
	if !errors.Is(err, pebble.ErrCorrupt) {
		t.Fatalf("open with a corrupt table: %v, want ErrCorrupt", err)
	}
	for _, want := range []string{sst + " (a table)", "linkgate store restore --store pebble:links"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}

	var logs syncbuf.Buffer
	s, err = pebble.Open("links", pebble.Options{FS: fs, NoIndex: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatalf("open without the read index: %v", err)
	}
	defer s.Close()
	var bad, good int
	for _, id := range ids {
		switch _, err := s.Get(context.Background(), id); {
		case err == nil:
			good++
		case errors.Is(err, shortener.ErrUnavailable):
			bad++
		default:
			t.Fatalf("get %s: %v", id, err)
		}
	}
	if bad == 0 || good < len(ids)/2 {
		t.Errorf("%d links unreadable, %d served: want the bad block's links only", bad, good)
	}
	if !strings.Contains(logs.String(), "corrupt file") || !strings.Contains(logs.String(), sst) {
		t.Errorf("the log does not name the corrupt file:\n%s", logs.String())
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(pebble.NewCollector(s))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var counted float64
	for _, mf := range mfs {
		if mf.GetName() == "linkgate_pebble_corruptions_total" {
			counted = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if counted < float64(bad) {
		t.Errorf("linkgate_pebble_corruptions_total = %v after %d failed reads", counted, bad)
	}
}
