// Package bolt is the embedded shortener.Store, a single bbolt file.
//
// Creates are appended to a create log next to the file (wal.go) and
// return once it is synced: concurrent creates share one write and one
// fdatasync. Logged links are applied to the bbolt file in large batches
// in the background (pending.go), and replayed from the log after a crash.
// Reads look at the few pending links in memory, then at bbolt read
// transactions over its memory map; the file's pages live in the page
// cache, not in the Go heap.
package bolt

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/linkgate/linkgate/shortener"
)

var (
	_ shortener.Store       = (*Store)(nil)
	_ shortener.URLAppender = (*Store)(nil)
)

var (
	linksBucket = []byte("links")
	metaBucket  = []byte("meta")
	formatKey   = []byte("format")
)

// format is the on-disk format version kept in the meta bucket.
const format = 1

// Store is a shortener.Store in one bbolt file and its create log.
type Store struct {
	db    *bbolt.DB
	snaps *snapshots // shared read transactions for point reads
	vlog  *visitLog  // the visit log and its fold (fold.go)
	wal   *wal

	mu       sync.RWMutex            // guards the fields below and the wal's queue
	pending  map[string]*pendingLink // logged links not yet applied, by id
	nextSeq  uint64                  // last sequence number given to a record
	drained  chan struct{}           // closed (and replaced) after each apply
	closed   bool
	npending atomic.Int64 // len(pending), read without the lock

	applyMu    sync.Mutex    // serializes applies
	applyDelay time.Duration // applyDelay and maxApply when opened
	maxApply   int
	batch      []pendingEntry
	applied    atomic.Uint64 // last sequence number applied to the file
	applyErr   atomic.Pointer[error]
	applyKick  chan struct{} // wake the applier: apply after applyDelay
	applyNow   chan struct{} // wake the applier: apply at once
	applyStop  chan struct{}
	applyDone  chan struct{}
	closeOnce  sync.Once
	closeErr   error
}

// Open opens (creating if needed, with its directory) the bbolt file at
// path. It fails after a second if another process holds the file.
func Open(path string) (*Store, error) { return open(path, true) }

// open is Open; fold says whether to start the background fold of the
// visit log (tests fold by hand).
func open(path string, fold bool) (*Store, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("open bolt store: %w", err)
		}
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{
		Timeout:        time.Second,
		FreelistType:   bbolt.FreelistMapType,
		NoFreelistSync: true, // the freelist is rebuilt on open; commits write less
		MmapFlags:      mmapFlags,
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("open bolt store %s: the file is locked by another process", path)
	}
	if err != nil {
		return nil, fmt.Errorf("open bolt store %s: %w", path, err)
	}
	s := &Store{
		db:         db,
		snaps:      &snapshots{db: db},
		vlog:       newVisitLog(),
		pending:    make(map[string]*pendingLink),
		drained:    make(chan struct{}),
		applyKick:  make(chan struct{}, 1),
		applyNow:   make(chan struct{}, 1),
		applyStop:  make(chan struct{}),
		applyDone:  make(chan struct{}),
		applyDelay: applyDelay,
		maxApply:   maxApply,
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(linksBucket); err != nil {
			return err
		}
		if err := s.initVisits(tx); err != nil {
			return err
		}
		meta, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		switch v := meta.Get(formatKey); {
		case v == nil:
			return meta.Put(formatKey, []byte{format})
		case len(v) != 1 || v[0] != format:
			return fmt.Errorf("unsupported store format %v (this build reads format %d)", v, format)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open bolt store %s: %w", path, err)
	}
	if err := s.openLog(path); err != nil {
		db.Close()
		return nil, fmt.Errorf("open bolt store %s: %w", path, err)
	}
	go s.wal.run()
	go s.applyLoop()
	if fold {
		s.startFolder()
	}
	return s, nil
}

// openLog opens the create log and applies the records a crash left in
// it.
func (s *Store) openLog(path string) error {
	w, recs, err := openWAL(path, &s.mu, &s.applied)
	if err != nil {
		return err
	}
	last, err := s.replay(recs)
	if err == nil {
		err = w.reset()
	}
	if err != nil {
		w.closeFiles()
		return err
	}
	s.wal, s.nextSeq = w, last
	s.applied.Store(last)
	return nil
}

// Import stores links in one transaction (one fsync), skipping ids that are
// taken, and returns how many it stored. It is for bulk loads (benchmark
// preloads, migrations); creates on the request path use Create.
func (s *Store) Import(ctx context.Context, links []shortener.Link) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("import links: %w", err)
	}
	n := 0
	err := s.update(func(tx *bbolt.Tx) error {
		n = 0
		b := tx.Bucket(linksBucket)
		for _, l := range links {
			if l.ID == "" || b.Get([]byte(l.ID)) != nil || s.isPending(l.ID) {
				continue
			}
			if err := b.Put([]byte(l.ID), encode(l)); err != nil {
				return fmt.Errorf("link %q: %w", l.ID, err)
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("import links: %w", err)
	}
	return n, nil
}

// Get returns the link under id.
func (s *Store) Get(ctx context.Context, id string) (shortener.Link, error) {
	v := s.pendingValue([]byte(id)) // first: a link leaves pending once the file has it
	sn, err := s.snaps.borrow()
	if err != nil {
		return shortener.Link{}, fmt.Errorf("get link %q: %w", id, err)
	}
	defer sn.release()
	if v == nil {
		v = sn.get([]byte(id))
	}
	if v == nil {
		return shortener.Link{}, shortener.ErrNotFound
	}
	l, err := decode(id, v)
	if err != nil {
		return shortener.Link{}, fmt.Errorf("get link %q: %w", id, err)
	}
	l.Visits += storedVisits(sn.visits, []byte(id))
	return l, nil
}

// AppendURL is Get for the redirect hot path: it appends the URL straight
// from the memory map to dst and does not allocate.
func (s *Store) AppendURL(ctx context.Context, dst, id []byte) ([]byte, shortener.Link, error) {
	v := s.pendingValue(id) // first: a link leaves pending once the file has it
	sn, err := s.snaps.borrow()
	if err != nil {
		return dst, shortener.Link{}, fmt.Errorf("get link: %w", err)
	}
	defer sn.release()
	if v == nil {
		v = sn.get(id)
	}
	if v == nil {
		return dst, shortener.Link{}, shortener.ErrNotFound
	}
	l, url, err := decodeMeta(v)
	if err != nil {
		return dst, shortener.Link{}, fmt.Errorf("get link %q: %w", id, err)
	}
	if l.MaxVisits > 0 { // only a visit limit needs the count
		l.Visits += storedVisits(sn.visits, id)
	}
	return append(dst, url...), l, nil
}

// Delete removes the link under id. Its transaction applies the pending
// links first, so a link created a moment ago is deleted like any other,
// and a replay of the log never brings it back.
func (s *Store) Delete(ctx context.Context, id string) error {
	err := s.update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(linksBucket)
		if b.Get([]byte(id)) == nil {
			return shortener.ErrNotFound
		}
		if err := tx.Bucket(visitsBucket).Delete([]byte(id)); err != nil {
			return err
		}
		if err := buryVisits(tx, []byte(id)); err != nil {
			return err
		}
		return b.Delete([]byte(id))
	})
	if err != nil {
		return fmt.Errorf("delete link %q: %w", id, err)
	}
	return nil
}

// List returns links in id order. The cursor is the last id of the previous
// page, base64url-encoded.
func (s *Store) List(ctx context.Context, cursor string, limit int) (shortener.Page, error) {
	var after []byte
	if cursor != "" {
		var err error
		after, err = base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || !shortener.ValidID(after) {
			return shortener.Page{}, shortener.Errorf(shortener.InvalidParameter, "invalid cursor")
		}
	}
	if err := s.settle(); err != nil { // list pending links too
		return shortener.Page{}, fmt.Errorf("list links: %w", err)
	}
	var p shortener.Page
	err := s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket(linksBucket).Cursor()
		k, v := c.First()
		if after != nil {
			k, v = c.Seek(after)
			if k != nil && string(k) == string(after) {
				k, v = c.Next()
			}
		}
		for ; k != nil; k, v = c.Next() {
			if len(p.Links) == limit {
				p.Next = base64.RawURLEncoding.EncodeToString([]byte(p.Links[limit-1].ID))
				break
			}
			l, err := decode(string(k), v)
			if err != nil {
				return err
			}
			l.Visits += storedVisits(tx.Bucket(visitsBucket), k)
			p.Links = append(p.Links, l)
		}
		return nil
	})
	if err != nil {
		return shortener.Page{}, fmt.Errorf("list links: %w", err)
	}
	return p, nil
}

// Ping checks that the database is open and readable.
func (s *Store) Ping(ctx context.Context) error {
	err := s.db.View(func(tx *bbolt.Tx) error {
		if tx.Bucket(linksBucket) == nil {
			return errors.New("links bucket missing")
		}
		return nil
	})
	if err == nil {
		if e := s.applyErr.Load(); e != nil {
			err = *e // the last background apply failed
		}
	}
	if err == nil {
		s.mu.RLock()
		err = s.wal.failed // creates fail until a restart
		s.mu.RUnlock()
	}
	if err != nil {
		return fmt.Errorf("ping bolt store: %w: %w", shortener.ErrUnavailable, err)
	}
	return nil
}

// Close applies the pending links, so that the create log holds nothing
// to replay, and closes the files. A fold of the visit log stops between
// two steps (it resumes on the next Open).
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stopFolder()
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.applyStop)
		<-s.applyDone
		s.wal.close()
		var errs []error
		if err := s.update(nil); err != nil {
			errs = append(errs, fmt.Errorf("apply created links: %w", err))
		} else if err := s.wal.reset(); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, s.wal.closeFiles())
		s.snaps.retire()
		errs = append(errs, s.db.Close())
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
