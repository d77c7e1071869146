package pebble

import (
	"errors"
	"fmt"
	"io"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"
)

// Recovery. At Open pebble replays the write-ahead logs not yet flushed
// to tables. When the last process that had the store open stopped
// without closing it (a crash, SIGKILL, power loss) — which the store
// tells by a mark it sets at Open and clears at Close — the newest log
// may end in a record that was being written, or in the zeroes pebble
// allocated ahead. Pebble replays the complete records and drops an
// incomplete one, which no caller was told was durable (a create returns
// only once its record is synced, and a record is synced whole). Open
// says so: a log line and the linkgate_pebble_recovery_* metrics; before
// pebble opens the store, it reads that log itself to count its records
// and see how it ends.
//
// A record that fails its checksum with records after it that pebble
// knows were synced (each chunk carries the offset synced when it was
// written), or an older log cut short, is corruption: a disk or a file
// system that lost or changed synced data. Pebble refuses to open the
// store then rather than drop writes it acknowledged; Open says which log
// and what to do (ErrCorrupt).
//
// A table (.sst) block that fails its checksum is pebble's DataCorruption
// event, whose default ends the process. The store's handler logs it,
// naming the file and what to do, counts it
// (linkgate_pebble_corruptions_total) and goes on: the reads that need
// that block fail (503 unavailable), every other link is served. Met at
// Open (the read index reads every link), it is Open's ErrCorrupt.

// ErrCorrupt matches the error of Open on a store that pebble finds
// corrupt.
var ErrCorrupt = errors.New("store corrupt")

// Recovery is what Open found.
type Recovery struct {
	// Unclean: the last process that had the store open did not close
	// it.
	Unclean bool
	WAL     string // the newest write-ahead log; "" when there was none
	Records int    // its complete records, which pebble replayed
	// Torn: it ends in an incomplete record, which pebble dropped.
	Torn bool
}

// readNewestWAL reads the newest write-ahead log in dir to its end.
func readNewestWAL(fs vfs.FS, dir string) (Recovery, error) {
	logs, err := wal.Scan(wal.Dir{FS: fs, Dirname: dir})
	if err != nil || len(logs) == 0 {
		return Recovery{}, err
	}
	ll := logs[len(logs)-1]
	_, path := ll.SegmentLocation(ll.NumSegments() - 1)
	rec := Recovery{WAL: path}
	r := ll.OpenForRead()
	defer r.Close()
	for {
		rd, _, err := r.NextRecord()
		if err == nil {
			_, err = io.Copy(io.Discard, rd)
		}
		switch {
		case err == nil:
			rec.Records++
			continue
		case errors.Is(err, io.EOF):
		case errors.Is(err, record.ErrUnexpectedEOF),
			// or corruption, which pebble's Open tells apart:
			errors.Is(err, record.ErrInvalidChunk), errors.Is(err, record.ErrZeroedChunk):
			rec.Torn = true
		default:
			return rec, err
		}
		return rec, nil
	}
}

// stateKey is the meta key of the open mark: stateOpen from Open to
// Close.
var stateKey = []byte{kindMeta, 's', 't', 'a', 't', 'e'}

const (
	stateOpen   = 'o'
	stateClosed = 'c'
)

// markOpen reads the open mark the last process left, then sets it.
func (s *Store) markOpen() error {
	v, closer, found, err := s.get(stateKey)
	if err != nil {
		return err
	}
	if found {
		s.recovery.Unclean = len(v) == 1 && v[0] == stateOpen
		closer.Close()
	}
	return s.db.Set(stateKey, []byte{stateOpen}, pebbledb.Sync)
}

// markClosed clears the open mark; Close syncs it with the log.
func (s *Store) markClosed() error {
	return s.db.Set(stateKey, []byte{stateClosed}, pebbledb.NoSync)
}

// reportRecovery logs what Open found.
func (s *Store) reportRecovery() {
	r := s.recovery
	if s.logger == nil || !r.Unclean && !r.Torn {
		return
	}
	msg := "store opened after an unclean stop (the last process that had it open did not close it: a crash, SIGKILL or a power loss); pebble replayed its write-ahead log"
	if r.Torn {
		msg += ", which ended in an incomplete record: dropped, it had not been acknowledged"
	}
	s.logger.Warn(msg, "dir", s.dir, "wal", r.WAL, "records_replayed", r.Records)
}

// corrupt explains Open's failure on a corrupt store: which file, and
// what to do.
func (s *Store) corrupt(err error) error {
	if !pebbledb.IsCorruptionError(err) {
		return err
	}
	if f := s.corruptFile.Load(); f != nil {
		return fmt.Errorf("%w: %s (a table) fails its checksum: %w; %s", ErrCorrupt, *f, err, restoreHelp(s.dir))
	}
	what := "a write-ahead log"
	if f := corruptWAL(s.fs, s.dir); f != "" {
		what = f + " (a write-ahead log)"
	}
	return fmt.Errorf("%w: %s is damaged where it was synced, so pebble will not open the store without dropping writes it acknowledged: %w; %s", ErrCorrupt, what, err, restoreHelp(s.dir))
}

// restoreHelp says what to do with the corrupt store in dir.
func restoreHelp(dir string) string {
	return fmt.Sprintf("restore a backup made by 'linkgate store backup': stop the server, then 'linkgate store restore --store pebble:%s --replace BACKUP_DIR' (the damaged store is moved aside, keep it for inspection)", dir)
}

// corruptWAL returns the path of the write-ahead log in dir that pebble
// cannot replay: an older log that does not end cleanly, or the newest
// one with a bad chunk; "" if none is found.
func corruptWAL(fs vfs.FS, dir string) string {
	logs, err := wal.Scan(wal.Dir{FS: fs, Dirname: dir})
	if err != nil {
		return ""
	}
	for i, ll := range logs {
		r := ll.OpenForRead()
		var err error
		for err == nil {
			var rd io.Reader
			if rd, _, err = r.NextRecord(); err == nil {
				_, err = io.Copy(io.Discard, rd)
			}
		}
		r.Close()
		newest := i == len(logs)-1
		if !errors.Is(err, io.EOF) && (!newest || !errors.Is(err, record.ErrUnexpectedEOF)) {
			_, path := ll.SegmentLocation(ll.NumSegments() - 1)
			return path
		}
	}
	return ""
}

// onCorruption is pebble's DataCorruption event (a block of a table that
// fails its checksum): logged and counted; pebble's default would end the
// process.
func (s *Store) onCorruption(info pebbledb.DataCorruptionInfo) {
	s.corruptions.Add(1)
	path := info.Path
	s.corruptFile.Store(&path)
	if s.logger != nil {
		s.logger.Error("store: pebble found a corrupt file; reads of the links in it fail (503) until the store is restored, other links are served",
			"file", path, "error", info.Details, "help", restoreHelp(s.dir))
	}
}

// Recovery returns what Open found in the newest write-ahead log.
func (s *Store) Recovery() Recovery { return s.recovery }
