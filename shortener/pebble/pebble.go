// Package pebble is the embedded shortener.Store: links and their visit
// statistics in a cockroachdb/pebble database (a directory).
//
// Pebble is what this store needs and would otherwise be written by hand:
// a write-ahead log whose commit pipeline groups concurrent synced writes
// into one fdatasync, lock-free reads, merge operators (visit counters are
// added by compactions, not by read-modify-write), consistent checkpoints
// for online backups, and a VFS made for crash testing.
//
// # Durability
//
// A create is committed with pebble.Sync: Create returns only once its WAL
// record is fdatasync'ed (concurrent creates share the sync; with a single
// P the log waits a moment after each sync so that they can: syncGather).
// So are deletes and visit flushes. Create checks that the id is free,
// under a small in-memory reservation of the ids being created, edited or
// deleted, so two concurrent creates of one id never both succeed, and an
// edit is a read-modify-write no other write of the id can interleave
// with.
//
// # Key layout
//
// Every key starts with one byte naming the kind of record, so kinds added
// later take a new byte and never collide with existing keys; link and
// statistics keys carry a domain (issue 13: the same slug may exist on two
// domains), "" being the default domain, which every link has today:
//
//	'm' name                  store metadata: "format" → format version (4),
//	                          "spanfloor" → the first span kept (vbase.go)
//	'l' domain 0x00 id        a link (codec.go)
//	's' domain 0x00 id        its lifetime visit totals or base (vrecord.go),
//	                          or merge operands that the merger adds up
//	'v' res bucket subject    visit counts of an hour or a day: a link's,
//	                          or all links', a domain's, a tag's; and a
//	                          link's series over a span of days (vrecord.go)
//	'k' id                    an API key (keys.go)
//	'd' host                  a domain of the registry (registry.go)
//	'x' …                     the list's index (listindex.go)
//
// Domains never contain 0x00, ids are shortener.ValidID, so a domain's
// links are the keys with the prefix 'l' domain 0x00, in id order. The
// Store's methods take shortener's link keys ("id" on the default domain,
// "domain/id" on another, shortener.LinkKey) and appendKey lays them out
// as above; a store written before domains is read as it is. A
// link's statistics are deleted with it: an id created again starts from
// zero.
//
// # Visits
//
// A visit batch is a few pebble batches, the last synced, with Merges of
// each visited link's totals, bucket and span records, and of its scopes'
// (visits.go, vrecord.go); reads and compactions add operands together.
// AddVisits and Delete exclude each other, so visits are merged only into
// links that exist.
package pebble

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/linkgate/linkgate/shortener"
)

var (
	_ shortener.Store       = (*Store)(nil)
	_ shortener.URLAppender = (*Store)(nil)
	_ shortener.VisitStore  = (*Store)(nil)
	_ shortener.Updater     = (*Store)(nil)
)

// Record kinds, the first byte of every key.
const (
	kindMeta  = 'm'
	kindLink  = 'l'
	kindStats = 's'
	kindKey   = 'k'
)

// format is the store's format version, kept under the meta key "format":
// 2 since visit statistics are kept by hour and day, 3 since links'
// series are kept by span of days too (vrecord.go), 4 since only limited
// links' totals are merged by flushes (vbase.go); a store of format 1 to
// 3 is migrated when it opens (vmigrate.go, vbase.go).
const format = 4

var formatKey = []byte{kindMeta, 'f', 'o', 'r', 'm', 'a', 't'}

// appendKey appends the pebble key of record kind for the link key k
// (shortener.LinkKey): kind, its domain ("" the default), 0x00, its id.
func appendKey[T string | []byte](dst []byte, kind byte, k T) []byte {
	domain, id := shortener.SplitKey(k)
	dst = append(dst, kind)
	dst = append(dst, domain...)
	dst = append(dst, 0)
	return append(dst, id...)
}

// linkKey returns the shortener link key of a pebble link or statistics
// key: the inverse of appendKey.
func linkKey(pk []byte) string {
	rest := pk[1:]
	i := bytes.IndexByte(rest, 0)
	if i == 0 {
		return string(rest[1:])
	}
	return string(rest[:i]) + "/" + string(rest[i+1:])
}

// The bounds of an iterator over every domain's links.
var linksLower, linksUpper = []byte{kindLink}, []byte{kindLink + 1}

// Options configure Open. The zero value is the production setting.
type Options struct {
	// FS is the file system the store lives on; nil: the operating
	// system's. Tests use pebble's crash-testing and error-injecting ones.
	FS vfs.FS
	// CacheSize is pebble's block cache, in bytes; 0: 8 MiB.
	CacheSize int64
	// Logger receives pebble's own messages (recovery, background
	// errors); nil discards them.
	Logger *slog.Logger
	// NoIndex leaves out the read index (index.go): reads go to pebble,
	// and memory stays at pebble's cache and memtables whatever the number
	// of links.
	NoIndex bool
	// MinFreeBytes is the space the store's file system keeps free:
	// below it, writes are refused with ErrUnavailable until space
	// returns, and half of it is held by a ballast file (guard.go);
	// 0: DefaultMinFreeBytes; negative: neither (only the test that
	// shows what a full disk does without them).
	MinFreeBytes int64
	// VisitClock is the clock of the visit statistics' retention (which
	// hours and days are kept); nil: time.Now. Tests that simulate
	// months set it.
	VisitClock func() time.Time

	// createSync is how creates commit; nil: pebble.Sync. Only the
	// crash test's must-fail twin changes it (export_test.go).
	createSync *pebbledb.WriteOptions
	// clock is the free-space guard's; nil: time.Now (tests).
	clock func() time.Time
	// visitChunkHook, if set, is called before each of AddVisits'
	// commits with the number of links it holds and whether it syncs;
	// an error fails that commit (tests).
	visitChunkHook func(links int, sync bool) error
	// syncGather is pebble's WALMinSyncInterval; nil: syncGather. Only
	// BenchmarkCreateParallel's anchor (pebble's default) changes it.
	syncGather func() time.Duration
	// pause is how flushes and compactions stop on a single P (yieldFS),
	// and now their clock; nil: time.Sleep, time.Now. Only
	// TestBackgroundWritesYield changes them.
	pause func(time.Duration)
	now   func() time.Time
	// openBatch is how many links the work of an open (migrations,
	// indexes) does between two looks at its context; 0: openBatch.
	// openHook, if set, is called at each look (tests: cancel there).
	openBatch int
	openHook  func()
	// findReads is Find's budget of links a page reads; 0: FindReads.
	// Only the tests of partial pages change it.
	findReads int
}

// openBatch is how many links the work of an open commits (or reads, for
// the read index) between two looks at its context: a stop waits for at
// most one batch.
const openBatch = 1000

// openStep is called between two batches of the work of an open: it
// reports ctx's error once ctx has ended.
func (s *Store) openStep(ctx context.Context) error {
	if s.openHook != nil {
		s.openHook()
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("stopped before it was done (the next open resumes it): %w", err)
	}
	return nil
}

// DefaultCacheSize is the block cache when Options.CacheSize is 0.
const DefaultCacheSize = 8 << 20

// syncGather is how long the write-ahead log waits after a sync before
// the next one (pebble's WALMinSyncInterval): 1 ms while the process has a
// single P, none with more.
//
// A goroutine blocked in fdatasync keeps its P until the runtime's sysmon
// takes it back, which it does only for a system call it sees across two
// of its ticks; with nothing to take back, those ticks back off to 10 ms,
// so a sync of half a millisecond is never taken back. With GOMAXPROCS=1
// nothing else runs while the log syncs: under make bench-creates' load a
// runtime trace showed no goroutine running during any of 1,498
// fdatasyncs (0.53 ms each), and a sync carried 1.3 creates on average.
// While the log's flusher waits for the interval to pass, its P is free:
// the creates that arrive meanwhile are decoded, committed and share the
// next sync. With more than one P a sync blocks only its own, creates
// share syncs by themselves (about 20 each under the same load), and a
// wait would only add latency. The wait adds at most 1 ms to a create,
// and only while syncs follow each other: a create that comes later than
// that after the last sync is synced at once. Under the same load on a
// busy machine (fsyncs of 2–3.6 ms), a sync carried 21 creates after
// 500 µs (pebble's documentation suggests that value), 27–29 after 1 ms
// and 29–33 after 2 ms (docs/serve-benchmarks.md).
func syncGather() time.Duration {
	if runtime.GOMAXPROCS(0) == 1 {
		return time.Millisecond
	}
	return 0
}

// l0CompactionThreshold is how many sublevels L0 gathers before pebble
// compacts it into the level below (pebble's default: 4), and
// l0StopWritesThreshold how many stop writes (pebble's: 12).
//
// Ids are random, so every table a memtable flush writes spans the whole
// key range, and every compaction out of L0 rewrites the whole base level
// under it (about 38 MiB with a million links), however little L0 brings:
// its cost is the size of that level, paid once per compaction. With one
// P the compaction also holds the P: under make bench-creates' load a
// runtime trace showed the compaction's goroutine running 317 ms of the
// 550 ms around a 371 ms L0 compaction, the creates' p99 in that second
// at 393 ms against 2–15 ms in every other (docs/serve-benchmarks.md,
// "Compactions"). Four times the sublevels before compacting make each
// compaction carry four times the new data for the same rewrite: a quarter
// of the compactions. A point read may look at more tables meanwhile, but
// links are read from the read index (index.go); pebble is read for visit
// statistics, by List and without an index.
const (
	l0CompactionThreshold = 16
	l0StopWritesThreshold = 64
)

// Store is a shortener.Store in a pebble database.
type Store struct {
	db         *pebbledb.DB
	dir        string
	fs         vfs.FS
	lock       *pebbledb.Lock
	cache      *pebbledb.Cache
	createSync *pebbledb.WriteOptions
	res        reservations
	// visitsMu: AddVisits (shared) and Delete (exclusive) exclude each
	// other, so visits are merged only into links that exist; so do
	// imports and creates of limited links (shared) and what changes the
	// kind of a totals record (exclusive, vbase.go).
	visitsMu sync.RWMutex
	// spanFloor: the first span that may have span records (vbase.go).
	spanFloor atomic.Uint32
	keys      sync.Pool // *[]byte, key buffers for reads
	ix        *index    // the read index; nil without one
	guard     *guard    // the free-space guard; nil without one
	recovery  Recovery  // what Open found in the write-ahead log
	// openBatch, openHook: Options'.
	openBatch int
	openHook  func()
	// registryMu serialises the domain registry's adds and deletes.
	registryMu sync.Mutex
	// corruptions counts pebble's DataCorruption events; corruptFile
	// is the last file they named (recovery.go).
	corruptions atomic.Int64
	corruptFile atomic.Pointer[string]
	events      events // write stalls, flushes, compactions (events.go)
	ixOn        atomic.Bool
	logger      *slog.Logger
	closed      atomic.Bool
	closeOnce   sync.Once
	closeErr    error
	// findReads: Options.findReads, or FindReads.
	findReads int
	// visitChunkHook: Options.visitChunkHook.
	visitChunkHook func(links int, sync bool) error
	// pause, now: Options.pause, Options.now (AddVisits is paced too).
	pause func(time.Duration)
	now   func() time.Time
	// visitClock: Options.VisitClock; prunedHour: the hour whose
	// retention pruneVisits last applied.
	visitClock func() time.Time
	prunedHour atomic.Uint32
	// scanDayRecords makes all-links queries by day read the links' day
	// records, as format 2 did, instead of their span records: the
	// anchor of BenchmarkStatsQueryAllLinks30Days, in the same run.
	scanDayRecords bool
}

// LockedError is Open's error for a store another process (or another
// Open in this one) holds.
type LockedError struct {
	Dir string
	PID int // the holder's process id; 0 when the system does not say
	Err error
}

func (e *LockedError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("the store is locked by process %d", e.PID)
	}
	return fmt.Sprintf("the store is locked (%v)", e.Err)
}

func (e *LockedError) Unwrap() error { return e.Err }

// Open opens the store in dir, creating it (and dir) if needed. It fails
// at once with a *LockedError if another process holds the store.
func Open(dir string, opts Options) (*Store, error) {
	return OpenContext(context.Background(), dir, opts)
}

// OpenContext is Open that gives up when ctx ends: what opening may take
// minutes for — migrating a store of an earlier format, indexing its links
// for listing, reading them into the read index — stops between two
// batches, and OpenContext returns ctx's error (errors.Is context.Canceled
// or DeadlineExceeded) with the store closed. That work is resumable: the
// next open finishes it, and the answers are the same as if it had never
// stopped.
func OpenContext(ctx context.Context, dir string, opts Options) (*Store, error) {
	fs := opts.FS
	if fs == nil {
		fs = vfs.Default
	}
	if err := fs.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("open pebble store: %w", err)
	}
	lock, err := pebbledb.LockDirectory(dir, fs)
	if err != nil {
		return nil, fmt.Errorf("open pebble store %s: %w", dir, &LockedError{Dir: dir, PID: lockHolder(fs, dir), Err: err})
	}
	size := opts.CacheSize
	if size <= 0 {
		size = DefaultCacheSize
	}
	s := &Store{dir: dir, fs: fs, lock: lock, cache: pebbledb.NewCache(size), createSync: opts.createSync, visitChunkHook: opts.visitChunkHook, findReads: cmp.Or(opts.findReads, FindReads), pause: opts.pause, now: opts.now, visitClock: opts.VisitClock,
		openBatch: opts.openBatch, openHook: opts.openHook}
	if s.openBatch <= 0 {
		s.openBatch = openBatch
	}
	if s.createSync == nil {
		s.createSync = pebbledb.Sync
	}
	s.res.held = make(map[string]*reservation)
	s.keys.New = func() any { b := make([]byte, 0, 2+shortener.MaxKeyLength); return &b }
	s.guard = newGuard(fs, dir, opts.MinFreeBytes, opts.Logger, opts.clock)
	pfs := fs
	if s.guard != nil && !s.guard.unsupported {
		pfs = vfs.OnDiskFull(fs, s.guard.onDiskFull)
	}
	pfs = yieldFS{FS: pfs, pause: opts.pause, now: opts.now}
	po := &pebbledb.Options{
		FS:                 pfs,
		Cache:              s.cache,
		Lock:               lock,
		Merger:             merger,
		FormatMajorVersion: pebbledb.FormatNewest,
		Logger:             logger{opts.Logger},
		EventListener:      &pebbledb.EventListener{DataCorruption: s.onCorruption},
		WALMinSyncInterval: opts.syncGather,
		// See l0CompactionThreshold.
		L0CompactionThreshold: l0CompactionThreshold,
		L0StopWritesThreshold: l0StopWritesThreshold,
	}
	s.events.logger = opts.Logger
	s.events.listen(po.EventListener)
	if po.WALMinSyncInterval == nil {
		po.WALMinSyncInterval = syncGather
	}
	s.logger = opts.Logger
	if s.recovery, err = readNewestWAL(fs, dir); err != nil && s.logger != nil {
		s.logger.Warn("store: cannot read its write-ahead log before pebble replays it", "dir", dir, "error", err)
	}
	db, err := pebbledb.Open(dir, po)
	if err != nil {
		s.cache.Unref()
		lock.Close()
		return nil, fmt.Errorf("open pebble store %s: %w", dir, s.corrupt(err))
	}
	s.db = db
	if err := s.checkFormat(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open pebble store %s: %w", dir, s.corrupt(err))
	}
	if err := s.markOpen(); err != nil {
		s.Close()
		return nil, fmt.Errorf("open pebble store %s: %w", dir, s.corrupt(err))
	}
	s.reportRecovery()
	if err := s.buildListIndex(ctx); err != nil { // listindex.go
		s.Close()
		return nil, fmt.Errorf("open pebble store %s: index the links: %w", dir, s.corrupt(err))
	}
	if !opts.NoIndex && indexSupported {
		arenaDir := ""
		if fs == vfs.Default {
			arenaDir = dir
		}
		if err := s.buildIndex(ctx, arenaDir); err != nil {
			s.Close()
			return nil, fmt.Errorf("open pebble store %s: %w", dir, s.corrupt(err))
		}
	}
	return s, nil
}

// buildIndex reads every link into a new read index.
func (s *Store) buildIndex(ctx context.Context, arenaDir string) error {
	ix, err := newIndex(arenaDir, 0)
	if err != nil {
		return err
	}
	it, err := s.db.NewIter(&pebbledb.IterOptions{LowerBound: linksLower, UpperBound: linksUpper})
	if err != nil {
		ix.close()
		return err
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err == nil {
			if k := it.Key(); k[1] == 0 {
				err = ix.put(k[2:], v) // the default domain's: no copy
			} else {
				err = ix.put([]byte(linkKey(k)), v)
			}
		}
		if n++; err == nil && n%s.openBatch == 0 {
			err = s.openStep(ctx)
		}
		if err != nil {
			it.Close()
			ix.close()
			return fmt.Errorf("read index: %w", err)
		}
	}
	if err := it.Close(); err != nil {
		ix.close()
		return err
	}
	s.ix = ix
	s.ixOn.Store(true)
	return nil
}

// indexed records a committed change in the read index: val is the link's
// new value, nil when it was deleted. If the index cannot take it (its
// file cannot grow), the index is switched off and reads go to pebble.
func (s *Store) indexed(id string, val []byte) {
	if !s.ixOn.Load() {
		return
	}
	if val == nil {
		s.ix.delete([]byte(id))
		return
	}
	if err := s.ix.put([]byte(id), val); err != nil {
		s.ixOn.Store(false)
		if s.logger != nil {
			s.logger.Error("read index switched off; reads go to pebble", "error", err)
		}
	}
}

// value returns the stored value of the link id, from the read index or
// from pebble; release must be called once v is no longer used. kb is
// the buffer for pebble's key; nil: one is taken from s.keys only if
// pebble is read (the index needs none).
func (s *Store) value(kb *[]byte, id []byte) (v []byte, release func(), found bool, err error) {
	if s.ixOn.Load() {
		if s.closed.Load() {
			return nil, nil, false, errClosed
		}
		v = s.ix.get(id)
		return v, noRelease, v != nil, nil
	}
	if kb == nil {
		kb = s.keys.Get().(*[]byte)
		defer s.keys.Put(kb) // pebble keeps no reference to the key
	}
	*kb = appendKey((*kb)[:0], kindLink, id)
	v, closer, found, err := s.get(*kb)
	if !found || err != nil {
		return nil, nil, found, err
	}
	return v, func() { closer.Close() }, true, nil
}

func noRelease() {}

// checkFormat writes the format version into a new store, migrates a
// store of an earlier format and refuses one of another version.
func (s *Store) checkFormat(ctx context.Context) error {
	v, closer, err := s.db.Get(formatKey)
	switch {
	case errors.Is(err, pebbledb.ErrNotFound):
		floor := retainedSpan(uint32(s.statsClock().Unix() / 86400))
		s.spanFloor.Store(floor)
		b := s.db.NewBatch()
		defer b.Close()
		if err := errors.Join(b.Set(spanFloorKey, binary.BigEndian.AppendUint32(nil, floor), nil),
			b.Set(formatKey, []byte{format}, nil), b.Commit(pebbledb.Sync)); err != nil {
			return err
		}
		// The log a new store starts with was made before pebble
		// settled on FormatNewest, so it lacks the sync offsets with
		// which pebble tells a corrupt log from a torn one (recovery.go):
		// start the next one.
		return s.db.Flush()
	case err != nil:
		return err
	}
	version := slices.Clone(v)
	closer.Close()
	switch {
	case len(version) == 1 && version[0] == format:
		floor, err := readSpanFloor(s.db)
		s.spanFloor.Store(floor)
		return err
	case len(version) == 1 && version[0] == 1:
		// Format 1 kept lifetime visit statistics (vmigrate.go).
		if err := s.migrateVisits(ctx); err != nil {
			return err
		}
		return s.migrateBase(ctx)
	case len(version) == 1 && version[0] == 2:
		// Format 2 kept no span records (vmigrate.go).
		if err := s.migrateSpans(ctx); err != nil {
			return err
		}
		return s.migrateBase(ctx)
	case len(version) == 1 && version[0] == 3:
		// Format 3 merged every link's totals (vbase.go).
		return s.migrateBase(ctx)
	}
	return fmt.Errorf("unsupported store format %v (this build reads formats 1 to %d)", version, format)
}

// commit commits b with o once the free-space guard admits it.
func (s *Store) commit(b *pebbledb.Batch, o *pebbledb.WriteOptions) error {
	if err := s.guard.admit(len(b.Repr())); err != nil {
		return err
	}
	return b.Commit(o)
}

// unavailable wraps a pebble error as the domain's ErrUnavailable.
func unavailable(op string, err error) error {
	return fmt.Errorf("%s: %w: %w", op, shortener.ErrUnavailable, err)
}

// get returns the value under key and its closer; found=false when there
// is none.
func (s *Store) get(key []byte) (v []byte, closer io.Closer, found bool, err error) {
	if s.closed.Load() {
		return nil, nil, false, errClosed
	}
	v, closer, err = s.db.Get(key)
	switch {
	case errors.Is(err, pebbledb.ErrNotFound):
		return nil, nil, false, nil
	case err != nil:
		return nil, nil, false, err
	}
	return v, closer, true, nil
}

var errClosed = errors.New("store closed")

// exists reports whether a link is stored under id.
func (s *Store) exists(id string) (bool, error) {
	kb := s.keys.Get().(*[]byte)
	defer s.keys.Put(kb)
	_, release, found, err := s.value(kb, []byte(id))
	if found {
		release()
	}
	return found, err
}

// Create stores l unless its id is taken, and returns once it is synced.
func (s *Store) Create(ctx context.Context, l shortener.Link) error {
	release, err := s.res.acquire(ctx, l.ID)
	if err != nil {
		return fmt.Errorf("create link %q: %w", l.ID, err)
	}
	defer release()
	switch taken, err := s.exists(l.ID); {
	case err != nil:
		return unavailable(fmt.Sprintf("create link %q", l.ID), err)
	case taken:
		return shortener.ErrConflict
	}
	b := s.db.NewBatch()
	defer b.Close()
	key := appendKey(make([]byte, 0, 2+len(l.ID)), kindLink, l.ID)
	val := appendLink(nil, &l)
	if err := b.Set(key, val, nil); err != nil {
		return unavailable(fmt.Sprintf("create link %q", l.ID), err)
	}
	if err := indexLink(b, l.ID, nil, &l); err != nil { // listindex.go
		return unavailable(fmt.Sprintf("create link %q", l.ID), err)
	}
	if l.MaxVisits > 0 {
		// Its totals record is complete, from 0 (vbase.go): not the
		// base an earlier link under the id left.
		s.visitsMu.RLock()
		defer s.visitsMu.RUnlock()
		if err := b.Delete(appendKey(nil, kindStats, l.ID), nil); err != nil {
			return unavailable(fmt.Sprintf("create link %q", l.ID), err)
		}
	}
	if err := s.commit(b, s.createSync); err != nil {
		return unavailable(fmt.Sprintf("create link %q", l.ID), err)
	}
	s.indexed(l.ID, val)
	return nil
}

// Get returns the link under id. Its Visits include the stored visits for
// a link with a visit limit (for others they are the ones it was created
// with; VisitStats has them all).
func (s *Store) Get(ctx context.Context, id string) (shortener.Link, error) {
	kb := s.keys.Get().(*[]byte)
	defer s.keys.Put(kb)
	v, release, found, err := s.value(kb, []byte(id))
	if err != nil {
		return shortener.Link{}, unavailable(fmt.Sprintf("get link %q", id), err)
	}
	if !found {
		return shortener.Link{}, shortener.ErrNotFound
	}
	l, err := decodeLink(id, v)
	release()
	if err != nil {
		return shortener.Link{}, fmt.Errorf("get link %q: %w", id, err)
	}
	if l.MaxVisits > 0 {
		n, err := storedVisits(s, kb, id)
		if err != nil {
			return shortener.Link{}, fmt.Errorf("get link %q: %w", id, err)
		}
		l.Visits += n
	}
	return l, nil
}

// AppendURL is Get for the redirect hot path: it appends the URL to dst
// and allocates nothing for a link without a visit limit.
func (s *Store) AppendURL(ctx context.Context, dst, id []byte) ([]byte, shortener.Link, error) {
	v, release, found, err := s.value(nil, id)
	if err != nil {
		return dst, shortener.Link{}, unavailable("get link", err)
	}
	if !found {
		return dst, shortener.Link{}, shortener.ErrNotFound
	}
	l, url, err := decodeMeta(v)
	if err == nil {
		dst = append(dst, url...)
	}
	release()
	if err != nil {
		return dst, shortener.Link{}, fmt.Errorf("get link %q: %w", id, err)
	}
	if l.MaxVisits > 0 { // only a visit limit needs the count
		kb := s.keys.Get().(*[]byte)
		n, err := storedVisits(s, kb, id)
		s.keys.Put(kb)
		if err != nil {
			return dst, shortener.Link{}, fmt.Errorf("get link %q: %w", id, err)
		}
		l.Visits += n
	}
	return dst, l, nil
}

// Update edits the link under id: a read, the edit and a synced write, all
// under the id's reservation, which creates and deletes take too, so an
// update can neither lose another's change nor bring back a link deleted
// meanwhile. Statistics live under their own key and are merged there by
// visits, so they are kept, as is the CreatedAt that visits are checked
// against.
func (s *Store) Update(ctx context.Context, id string, u shortener.LinkUpdate) (shortener.Link, error) {
	release, err := s.res.acquire(ctx, id)
	if err != nil {
		return shortener.Link{}, fmt.Errorf("update link %q: %w", id, err)
	}
	defer release()
	kb := s.keys.Get().(*[]byte)
	defer s.keys.Put(kb)
	v, done, found, err := s.value(kb, []byte(id))
	switch {
	case err != nil:
		return shortener.Link{}, unavailable(fmt.Sprintf("update link %q", id), err)
	case !found:
		return shortener.Link{}, shortener.ErrNotFound
	}
	l, err := decodeLink(id, v)
	done()
	if err != nil {
		return shortener.Link{}, fmt.Errorf("update link %q: %w", id, err)
	}
	old := l
	u.Apply(&l)
	b := s.db.NewBatch()
	defer b.Close()
	val := appendLink(nil, &l)
	if err := b.Set(appendKey(nil, kindLink, id), val, nil); err != nil {
		return shortener.Link{}, unavailable(fmt.Sprintf("update link %q", id), err)
	}
	if err := indexLink(b, id, &old, &l); err != nil { // listindex.go
		return shortener.Link{}, unavailable(fmt.Sprintf("update link %q", id), err)
	}
	if limited := l.MaxVisits > 0; limited != (old.MaxVisits > 0) {
		// A limit set or removed: its totals record changes kind,
		// no flush in between (vbase.go).
		s.visitsMu.Lock()
		defer s.visitsMu.Unlock()
		if err := s.rebase(b, id, !limited, limited, false); err != nil {
			return shortener.Link{}, unavailable(fmt.Sprintf("update link %q", id), err)
		}
	}
	if err := s.commit(b, pebbledb.Sync); err != nil {
		return shortener.Link{}, unavailable(fmt.Sprintf("update link %q", id), err)
	}
	s.indexed(id, val)
	if l.MaxVisits > 0 {
		n, err := storedVisits(s, kb, id)
		if err != nil {
			return shortener.Link{}, fmt.Errorf("update link %q: %w", id, err)
		}
		l.Visits += n
	}
	return l, nil
}

// Delete removes the link under id and its statistics.
func (s *Store) Delete(ctx context.Context, id string) error {
	release, err := s.res.acquire(ctx, id)
	if err != nil {
		return fmt.Errorf("delete link %q: %w", id, err)
	}
	defer release()
	s.visitsMu.Lock()
	defer s.visitsMu.Unlock()
	kb := s.keys.Get().(*[]byte)
	defer s.keys.Put(kb)
	v, done, found, err := s.value(kb, []byte(id))
	switch {
	case err != nil:
		return unavailable(fmt.Sprintf("delete link %q", id), err)
	case !found:
		return shortener.ErrNotFound
	}
	old, err := decodeLink(id, v)
	done()
	if err != nil {
		return fmt.Errorf("delete link %q: %w", id, err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.Delete(appendKey(nil, kindLink, id), nil); err != nil {
		return unavailable(fmt.Sprintf("delete link %q", id), err)
	}
	if err := unindexLink(b, id, &old); err != nil { // listindex.go
		return unavailable(fmt.Sprintf("delete link %q", id), err)
	}
	// The next link under the id starts from 0: a base record of minus
	// the span records left (vbase.go).
	if err := s.rebase(b, id, old.MaxVisits > 0, false, true); err != nil {
		return unavailable(fmt.Sprintf("delete link %q", id), err)
	}
	if err := s.commit(b, pebbledb.Sync); err != nil {
		return unavailable(fmt.Sprintf("delete link %q", id), err)
	}
	s.indexed(id, nil)
	return nil
}

// List returns links in key order: the default domain's in id order,
// then each other domain's. The cursor is the last key of the previous
// page, base64url-encoded.
func (s *Store) List(ctx context.Context, cursor string, limit int) (shortener.Page, error) {
	lower, upper := linksLower, linksUpper
	start := lower
	if cursor != "" {
		after, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || !shortener.ValidKey(after) {
			return shortener.Page{}, shortener.Errorf(shortener.InvalidParameter, "invalid cursor")
		}
		start = append(appendKey(nil, kindLink, after), 0) // just after it
	}
	if s.closed.Load() {
		return shortener.Page{}, unavailable("list links", errClosed)
	}
	it, err := s.db.NewIter(&pebbledb.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return shortener.Page{}, unavailable("list links", err)
	}
	defer it.Close()
	var p shortener.Page
	var kb []byte
	for ok := it.SeekGE(start); ok; ok = it.Next() {
		if len(p.Links) == limit {
			p.Next = base64.RawURLEncoding.EncodeToString([]byte(p.Links[limit-1].ID))
			break
		}
		id := linkKey(it.Key())
		v, err := it.ValueAndErr()
		if err != nil {
			return shortener.Page{}, unavailable("list links", err)
		}
		l, err := decodeLink(id, v)
		if err != nil {
			return shortener.Page{}, fmt.Errorf("list links: link %q: %w", id, err)
		}
		if l.MaxVisits > 0 {
			n, err := storedVisits(s, &kb, id)
			if err != nil {
				return shortener.Page{}, fmt.Errorf("list links: %w", err)
			}
			l.Visits += n
		}
		p.Links = append(p.Links, l)
	}
	if err := it.Error(); err != nil {
		return shortener.Page{}, unavailable("list links", err)
	}
	return p, nil
}

// Ping checks that the store is open and answers a read.
func (s *Store) Ping(ctx context.Context) error {
	_, closer, found, err := s.get(formatKey)
	if err != nil {
		return unavailable("ping pebble store", err)
	}
	if found {
		closer.Close() // a read of a table holds its block until closed
	}
	return nil
}

// Close closes the database; pebble makes what is committed durable.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.guard.stop()
		var errs []error
		if s.db != nil {
			errs = append(errs, s.markClosed(), s.db.Close())
		}
		if s.ix != nil {
			s.ix.close()
		}
		s.cache.Unref()
		errs = append(errs, s.lock.Close())
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// reservations are the ids being created or deleted: an operation on an id
// waits until the one before it has committed, so the "is it free?" check
// and the write are one step.
type reservations struct {
	mu   sync.Mutex
	held map[string]*reservation
}

type reservation struct {
	done chan struct{} // made by the first waiter; closed at release
}

// acquire reserves id, waiting while another operation holds it, and
// returns the release.
func (r *reservations) acquire(ctx context.Context, id string) (func(), error) {
	for {
		r.mu.Lock()
		h, busy := r.held[id]
		if !busy {
			h = &reservation{}
			r.held[id] = h
			r.mu.Unlock()
			return func() { r.release(id, h) }, nil
		}
		if h.done == nil {
			h.done = make(chan struct{})
		}
		done := h.done
		r.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (r *reservations) release(id string, h *reservation) {
	r.mu.Lock()
	delete(r.held, id)
	done := h.done
	r.mu.Unlock()
	if done != nil {
		close(done)
	}
}

// acquireAll reserves every id of ids (repeats allowed), one at a time in
// sorted order so that two bulk operations cannot deadlock.
func (r *reservations) acquireAll(ctx context.Context, ids []string) (func(), error) {
	sorted := slices.Compact(slices.Sorted(slices.Values(ids)))
	var releases []func()
	releaseAll := func() {
		for _, f := range releases {
			f()
		}
	}
	for _, id := range sorted {
		f, err := r.acquire(ctx, id)
		if err != nil {
			releaseAll()
			return nil, err
		}
		releases = append(releases, f)
	}
	return releaseAll, nil
}

// logger passes pebble's messages to slog. Fatalf is called on an error
// pebble cannot continue from (a failed WAL write): the process exits
// after logging it, as pebble's own logger does; what was acknowledged is
// in the WAL and is recovered by the next Open.
type logger struct{ l *slog.Logger }

func (l logger) Infof(format string, args ...any) {
	if l.l != nil {
		l.l.Debug("pebble: " + fmt.Sprintf(format, args...))
	}
}

func (l logger) Errorf(format string, args ...any) {
	if l.l != nil {
		l.l.Error("pebble: " + fmt.Sprintf(format, args...))
	}
}

func (l logger) Fatalf(format string, args ...any) {
	msg := "pebble: " + fmt.Sprintf(format, args...)
	if l.l != nil {
		l.l.Error(msg)
	} else {
		fmt.Fprintln(os.Stderr, msg)
	}
	os.Exit(70)
}

// Compact compacts the whole store (tools and tests; pebble compacts by
// itself in the background).
func (s *Store) Compact() error {
	return s.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true)
}
