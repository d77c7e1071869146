// Package bolt is a gateway.Store in one bbolt file: the single-node
// config store (linkgate gateway --config-store bolt:PATH). Writes are
// durable when Put returns; Watch feeds them to the data plane in order.
package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/linkgate/linkgate/gateway"
)

var (
	bucketKV   = []byte("kv")
	bucketMeta = []byte("meta")
	keyRev     = []byte("revision")
)

// Store is a gateway.Store backed by bbolt.
type Store struct {
	db *bbolt.DB

	mu   sync.Mutex // orders writes with their notifications
	subs map[*watcher]struct{}
}

// watchQueue is how many changes a watcher may have pending.
const watchQueue = 256

// watcher is one Watch call's queue. Only Watch receives from it: notify
// never takes changes back out of a queue its watcher is reading (it did,
// and the watcher could receive a change from the middle of the queue
// while the ones before it were being thrown away).
type watcher struct {
	changes chan gateway.Update
	// behind (guarded by Store.mu) is set when changes overflowed: nothing
	// more is queued until the watcher has re-listed, which clears it.
	behind bool
	relist chan struct{} // signalled when behind is set
}

var _ gateway.Store = (*Store)(nil)

// Open opens (creating if needed) the store at path.
func Open(path string) (*Store, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("open gateway store: %w", err)
		}
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open gateway store %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketKV, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open gateway store %s: %w", path, err)
	}
	return &Store{db: db, subs: map[*watcher]struct{}{}}, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

func dbKey(k gateway.Kind, id string) []byte { return []byte(string(k) + "/" + id) }

// A stored record is created (8 bytes), modified (8 bytes), then the value.
func encode(created, modified int64, value []byte) []byte {
	b := make([]byte, 16+len(value))
	binary.BigEndian.PutUint64(b, uint64(created))
	binary.BigEndian.PutUint64(b[8:], uint64(modified))
	copy(b[16:], value)
	return b
}

func decode(k gateway.Kind, id string, b []byte) (gateway.Entry, error) {
	if len(b) < 16 {
		return gateway.Entry{}, fmt.Errorf("corrupt record %s/%s", k, id)
	}
	return gateway.Entry{Kind: k, ID: id,
		CreatedIndex:  int64(binary.BigEndian.Uint64(b)),
		ModifiedIndex: int64(binary.BigEndian.Uint64(b[8:])),
		Value:         append([]byte(nil), b[16:]...)}, nil
}

func nextRev(tx *bbolt.Tx) (int64, error) {
	m := tx.Bucket(bucketMeta)
	var rev uint64
	if b := m.Get(keyRev); len(b) == 8 {
		rev = binary.BigEndian.Uint64(b)
	}
	rev++
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], rev)
	return int64(rev), m.Put(keyRev, buf[:])
}

func currentRev(tx *bbolt.Tx) int64 {
	if b := tx.Bucket(bucketMeta).Get(keyRev); len(b) == 8 {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

// Get returns one entry.
func (s *Store) Get(_ context.Context, k gateway.Kind, id string) (gateway.Entry, error) {
	id = strings.Clone(id)
	var e gateway.Entry
	err := s.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketKV).Get(dbKey(k, id))
		if b == nil {
			return gateway.ErrNotFound
		}
		var err error
		e, err = decode(k, id, b)
		return err
	})
	return e, err
}

// List returns the entries of a kind, sorted by key as etcd does.
func (s *Store) List(_ context.Context, k gateway.Kind) ([]gateway.Entry, error) {
	var out []gateway.Entry
	err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		out, err = list(tx, k)
		return err
	})
	return out, err
}

func list(tx *bbolt.Tx, k gateway.Kind) ([]gateway.Entry, error) {
	var out []gateway.Entry
	prefix := []byte(string(k) + "/")
	c := tx.Bucket(bucketKV).Cursor()
	for key, v := c.Seek(prefix); key != nil && strings.HasPrefix(string(key), string(prefix)); key, v = c.Next() {
		e, err := decode(k, string(key[len(prefix):]), v)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Put stores a value; see gateway.Store.
func (s *Store) Put(_ context.Context, k gateway.Kind, id string, value []byte, prevRev int64) (gateway.Entry, bool, error) {
	id = strings.Clone(id) // kept in the watch notification
	s.mu.Lock()
	defer s.mu.Unlock()
	var e gateway.Entry
	var created bool
	err := s.db.Update(func(tx *bbolt.Tx) error {
		kv := tx.Bucket(bucketKV)
		key := dbKey(k, id)
		old := kv.Get(key)
		createdRev := int64(0)
		if old != nil {
			oe, err := decode(k, id, old)
			if err != nil {
				return err
			}
			createdRev = oe.CreatedIndex
			if prevRev > 0 && oe.ModifiedIndex != prevRev {
				return gateway.ErrConflict
			}
		} else if prevRev > 0 {
			return gateway.ErrConflict
		}
		rev, err := nextRev(tx)
		if err != nil {
			return err
		}
		if createdRev == 0 {
			createdRev, created = rev, true
		}
		e = gateway.Entry{Kind: k, ID: id, Value: append([]byte(nil), value...), CreatedIndex: createdRev, ModifiedIndex: rev}
		return kv.Put(key, encode(createdRev, rev, value))
	})
	if err != nil {
		return gateway.Entry{}, false, err
	}
	s.notify(gateway.Update{Entries: []gateway.Entry{e}, Revision: e.ModifiedIndex})
	return e, created, nil
}

// Delete removes an entry.
func (s *Store) Delete(_ context.Context, k gateway.Kind, id string) error {
	id = strings.Clone(id) // kept in the watch notification
	s.mu.Lock()
	defer s.mu.Unlock()
	var rev int64
	err := s.db.Update(func(tx *bbolt.Tx) error {
		kv := tx.Bucket(bucketKV)
		if kv.Get(dbKey(k, id)) == nil {
			return gateway.ErrNotFound
		}
		var err error
		if rev, err = nextRev(tx); err != nil {
			return err
		}
		return kv.Delete(dbKey(k, id))
	})
	if err != nil {
		return err
	}
	s.notify(gateway.Update{Deleted: []gateway.Entry{{Kind: k, ID: id}}, Revision: rev})
	return nil
}

// NextID returns a fresh id: the bumped revision, zero-padded to 20 digits
// like APISIX's ids from etcd.
func (s *Store) NextID(_ context.Context) (string, error) {
	var rev int64
	err := s.db.Update(func(tx *bbolt.Tx) error {
		var err error
		rev, err = nextRev(tx)
		return err
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%020d", rev), nil
}

// notify hands u to every watcher; called with s.mu held, so watchers see
// changes in commit order. A watcher's queue is buffered; a watcher too
// slow to keep up re-lists instead: the changes it already has queued stay
// (they come before u), u and the later ones are left to its listing.
func (s *Store) notify(u gateway.Update) {
	for w := range s.subs {
		if w.behind {
			continue
		}
		select {
		case w.changes <- u:
		default:
			w.behind = true
			w.relist <- struct{}{} // never blocks: behind was false, so relist is empty
		}
	}
}

// Watch implements gateway.Store.
func (s *Store) Watch(ctx context.Context, fn func(gateway.Update)) error {
	w := &watcher{changes: make(chan gateway.Update, watchQueue), relist: make(chan struct{}, 1)}
	s.mu.Lock()
	s.subs[w] = struct{}{}
	first, err := s.all()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.subs, w)
		s.mu.Unlock()
	}()
	if err != nil {
		return err
	}
	fn(first)
	listed := first.Revision // the changes up to it are in a listing fn had
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.relist:
			s.mu.Lock()
			u, err := s.all()
			w.behind = false
			s.mu.Unlock()
			if err != nil {
				return err
			}
			listed = u.Revision
			fn(u)
		case u := <-w.changes:
			if u.Revision <= listed {
				// Queued before a listing that holds this change or a
				// later one: replaying it would take the watcher back.
				continue
			}
			fn(u)
		}
	}
}

// all lists every kind in one read transaction.
func (s *Store) all() (gateway.Update, error) {
	u := gateway.Update{Reset: true}
	err := s.db.View(func(tx *bbolt.Tx) error {
		for _, k := range gateway.Kinds {
			es, err := list(tx, k)
			if err != nil {
				return err
			}
			u.Entries = append(u.Entries, es...)
		}
		u.Revision = currentRev(tx)
		return nil
	})
	if err != nil && !errors.Is(err, gateway.ErrNotFound) {
		return u, err
	}
	return u, nil
}
