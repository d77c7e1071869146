package gateway

import (
	"context"
	"errors"
)

// Store errors; adapters translate their driver's errors into these.
var (
	// ErrNotFound: no such key. The admin API answers 404 {"message":"Key not found"}.
	ErrNotFound = errors.New("Key not found")
	// ErrConflict: a conditional write lost a race.
	ErrConflict = errors.New("value changed before overwritten")
	// ErrUnavailable: the store cannot be reached. The admin API answers 503.
	ErrUnavailable = errors.New("config store unavailable")
)

// Entry is one stored resource: its JSON value and the store revisions at
// which it was created and last modified (etcd's create/mod revision).
type Entry struct {
	Kind          Kind
	ID            string
	Value         []byte
	CreatedIndex  int64
	ModifiedIndex int64
}

// Key is the entry's etcd key relative to the prefix: "/routes/1".
func (e Entry) Key() string { return "/" + string(e.Kind) + "/" + e.ID }

// Update is what a Store's Watch delivers: the whole configuration when
// Reset is true (the first call, and after etcd compaction), else changes.
type Update struct {
	Reset    bool
	Entries  []Entry // Reset: every entry. Otherwise: created or modified entries.
	Deleted  []Entry // only Kind and ID are set
	Revision int64
}

// Store keeps the gateway's resources. Implementations: gateway/bolt (one
// node) and gateway/etcd (a cluster, APISIX's layout).
//
// A Store keeps no reference to the memory of its arguments (ids and
// values may be views of a request buffer that is reused afterwards), and
// the entries it returns or delivers share no memory with them.
type Store interface {
	Get(ctx context.Context, k Kind, id string) (Entry, error)
	List(ctx context.Context, k Kind) ([]Entry, error)
	// Put stores value under k/id. With prevRev > 0 it only succeeds while
	// the entry's ModifiedIndex is prevRev (ErrConflict otherwise). created
	// reports whether the key was new.
	Put(ctx context.Context, k Kind, id string, value []byte, prevRev int64) (e Entry, created bool, err error)
	// Delete removes k/id; ErrNotFound if absent.
	Delete(ctx context.Context, k Kind, id string) error
	// NextID returns a new unique id for POST: a counter zero-padded to 20 digits.
	NextID(ctx context.Context) (string, error)
	// Watch calls fn with a Reset update, then with every change, until ctx
	// ends. It keeps retrying through store outages.
	Watch(ctx context.Context, fn func(Update)) error
	Close() error
}

// Reachability is implemented by stores that can be unreachable (etcd).
type Reachability interface {
	Reachable() bool
}
