package bolt

import (
	"sync"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// Reads share read transactions. Opening a bbolt read transaction costs
// about 0.7 µs and ten allocations (Tx, meta copy, bucket, cursor), more
// than the lookup itself and more than the whole budget of a redirect next
// to nginx. So point reads borrow the current snapshot: one read-only
// transaction, its links bucket and a pool of reusable cursors, shared by
// every reader until it is retired. A snapshot is retired
//
//   - right after every write this Store commits, so a read that starts
//     after a create (or delete) has returned always sees it, and
//   - at the latest maxSnapshotAge after it was opened, so a long-lived
//     reader never holds up a writer that must grow the memory map, nor
//     keeps freed pages from being reused for long.
//
// A retired snapshot's transaction is rolled back when its last reader
// returns it. bbolt allows a read-only transaction to be used from several
// goroutines as long as nothing writes through it; cursors, which keep
// state, are never shared.
const maxSnapshotAge = 10 * time.Millisecond

type snapshot struct {
	gen     uint64 // snapshots.gen when it was opened
	tx      *bbolt.Tx
	links   *bbolt.Bucket
	visits  *bbolt.Bucket // visit statistics (visits.go)
	cursors sync.Pool     // of *bbolt.Cursor over links
	// refs counts users: each borrowing reader, plus one while it is the
	// current snapshot. At zero the transaction is rolled back and the
	// snapshot must not be borrowed again.
	refs atomic.Int64
}

func (s *snapshot) release() {
	if s.refs.Add(-1) == 0 {
		s.tx.Rollback()
	}
}

// snapshots hands out the current snapshot of a database.
type snapshots struct {
	db  *bbolt.DB
	cur atomic.Pointer[snapshot]
	mu  sync.Mutex // serializes opening a new snapshot
	// gen counts retirements. A snapshot opened at generation g may miss
	// any commit retired after g, so readers refuse snapshots older than
	// the current generation: a snapshot opened concurrently with a
	// commit is never handed to a read that starts after that commit's
	// retire.
	gen atomic.Uint64
}

// borrow returns a snapshot with a reference held for the caller, who
// must release it.
func (s *snapshots) borrow() (*snapshot, error) {
	for {
		sn := s.cur.Load()
		if sn == nil || sn.gen != s.gen.Load() {
			var err error
			if sn, err = s.open(); err != nil {
				return nil, err
			}
		}
		for {
			r := sn.refs.Load()
			if r == 0 {
				break // retired and closed meanwhile: take the next one
			}
			if sn.refs.CompareAndSwap(r, r+1) {
				return sn, nil
			}
		}
	}
}

// open makes a new current snapshot, unless another goroutine just did.
// A timer retires it after maxSnapshotAge; when nothing reads, nothing is
// open and nothing ticks.
func (s *snapshots) open() (*snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gen := s.gen.Load() // before Begin: the snapshot sees every commit retired so far
	if sn := s.cur.Load(); sn != nil {
		if sn.gen == gen {
			return sn, nil
		}
		if s.cur.CompareAndSwap(sn, nil) { // opened before a later commit
			sn.release()
		}
	}
	tx, err := s.db.Begin(false)
	if err != nil {
		return nil, err
	}
	sn := &snapshot{gen: gen, tx: tx, links: tx.Bucket(linksBucket), visits: tx.Bucket(visitsBucket)}
	sn.cursors.New = func() any { return sn.links.Cursor() }
	sn.refs.Store(1)
	s.cur.Store(sn)
	time.AfterFunc(maxSnapshotAge, func() {
		if s.cur.CompareAndSwap(sn, nil) {
			sn.release()
		}
	})
	return sn, nil
}

// retire stops handing out the current snapshot; it closes once its
// readers are done. Writers call it after every commit, and Close before
// closing the database (which waits for every read transaction).
func (s *snapshots) retire() {
	s.gen.Add(1)
	if sn := s.cur.Swap(nil); sn != nil {
		sn.release()
	}
}

// get returns the value under key, or nil. The value points into the
// memory map: it is valid until the snapshot is released.
func (sn *snapshot) get(key []byte) []byte {
	c := sn.cursors.Get().(*bbolt.Cursor)
	k, v := c.Seek(key)
	sn.cursors.Put(c)
	if v == nil || string(k) != string(key) {
		return nil
	}
	return v
}
