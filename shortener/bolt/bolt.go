// Package bolt is the embedded shortener.Store, a single bbolt file.
//
// Creates go through bbolt's group commit (db.Batch, MaxBatchDelay 1 ms):
// concurrent creates share one transaction and one fsync, so Create returns
// only once the link is on disk, at tens of thousands of creates a second.
// Reads are bbolt read transactions over its memory map; the file's pages
// live in the page cache, not in the Go heap.
package bolt

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// MaxBatchDelay is how long a create waits for others to share its commit.
// bbolt's default (10 ms) caps a few dozen concurrent writers at about 5k
// creates/s; 1 ms gives about 21k/s on this project's reference machine.
const MaxBatchDelay = time.Millisecond

// Store is a shortener.Store in one bbolt file.
type Store struct {
	db    *bbolt.DB
	snaps *snapshots // shared read transactions for point reads
	vlog  *visitLog  // the visit log and its fold (fold.go)
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
	db.MaxBatchDelay = MaxBatchDelay
	s := &Store{db: db, snaps: &snapshots{db: db}, vlog: newVisitLog()}
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
	if fold {
		s.startFolder()
	}
	return s, nil
}

// Create stores l unless its id is taken. Concurrent creates share one
// commit (db.Batch); the insert-if-absent check runs inside the batch and
// reports a taken id through a captured variable, so one conflict never
// fails (and re-runs) the other creates in the batch.
//
// If ctx ends first (a stalled disk), Create returns its error without
// waiting: the caller then answers 503, never 201, and the link may or may
// not be stored.
func (s *Store) Create(ctx context.Context, l shortener.Link) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("create link: %w", err)
	}
	key, val := []byte(l.ID), encode(l)
	type result struct {
		taken bool
		err   error
	}
	done := make(chan result, 1)
	go func() {
		var taken bool
		err := s.db.Batch(func(tx *bbolt.Tx) error {
			b := tx.Bucket(linksBucket)
			taken = b.Get(key) != nil
			if taken {
				return nil
			}
			return b.Put(key, val)
		})
		s.snaps.retire() // later reads must see the new link
		done <- result{taken, err}
	}()
	select {
	case r := <-done:
		switch {
		case r.err != nil:
			return fmt.Errorf("create link %q: %w", l.ID, r.err)
		case r.taken:
			return fmt.Errorf("create link %q: %w", l.ID, shortener.ErrConflict)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("create link %q: %w", l.ID, ctx.Err())
	}
}

// Import stores links in one transaction (one fsync), skipping ids that are
// taken, and returns how many it stored. It is for bulk loads (benchmark
// preloads, migrations); creates on the request path use Create.
func (s *Store) Import(ctx context.Context, links []shortener.Link) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("import links: %w", err)
	}
	n := 0
	err := s.db.Update(func(tx *bbolt.Tx) error {
		n = 0
		b := tx.Bucket(linksBucket)
		for _, l := range links {
			if l.ID == "" || b.Get([]byte(l.ID)) != nil {
				continue
			}
			if err := b.Put([]byte(l.ID), encode(l)); err != nil {
				return fmt.Errorf("link %q: %w", l.ID, err)
			}
			n++
		}
		return nil
	})
	s.snaps.retire()
	if err != nil {
		return 0, fmt.Errorf("import links: %w", err)
	}
	return n, nil
}

// Get returns the link under id.
func (s *Store) Get(ctx context.Context, id string) (shortener.Link, error) {
	sn, err := s.snaps.borrow()
	if err != nil {
		return shortener.Link{}, fmt.Errorf("get link %q: %w", id, err)
	}
	defer sn.release()
	v := sn.get([]byte(id))
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
	sn, err := s.snaps.borrow()
	if err != nil {
		return dst, shortener.Link{}, fmt.Errorf("get link: %w", err)
	}
	defer sn.release()
	v := sn.get(id)
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

// Delete removes the link under id.
func (s *Store) Delete(ctx context.Context, id string) error {
	err := s.db.Update(func(tx *bbolt.Tx) error {
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
	s.snaps.retire()
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
	if err != nil {
		return fmt.Errorf("ping bolt store: %w: %w", shortener.ErrUnavailable, err)
	}
	return nil
}

// Close closes the file. Pending batched creates finish first; a fold of
// the visit log stops between two steps (it resumes on the next Open).
func (s *Store) Close() error {
	s.stopFolder()
	s.snaps.retire()
	return s.db.Close()
}
