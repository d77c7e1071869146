// Package cache is a read cache in front of any shortener.Store, built on
// github.com/maypok86/otter/v2 (W-TinyLFU eviction, per-entry expiry,
// deduplicated loads).
//
// Redirects dominate a shortener's traffic and a DynamoDB read costs
// milliseconds and money, so lookups are served from memory for up to TTL.
// A lookup that finds nothing is remembered for NegativeTTL (shorter), so a
// flood of unknown ids does not become a flood of store reads. Concurrent
// misses of one id share a single store read.
//
// A link read in the second half of its TTL (at a random point of it, so
// links loaded together do not come due together) is reloaded in the
// background while the cached one is still served, so hot links never wait
// for the store. At most MaxRefreshes reloads run at once; a link that
// cannot be reloaded in time simply expires at TTL and is read again on
// its next use. So the store sees about (hot links) / (TTL/2) reads a
// second for the hot set, and never a burst when many links come due.
//
// Consistency: this instance's own writes are seen at once — Create puts
// the new link in the cache (so it resolves even if the store's reads are
// eventually consistent) and drops a remembered miss, Update puts the
// edited link in it, Delete drops the entry before returning. Writes made
// through other instances are not: a link deleted or edited elsewhere keeps
// resolving here as it was for at most TTL, and a link created elsewhere
// may answer not-found here for at most NegativeTTL.
// Expiry and visit limits stay exact, since the Service checks them on every
// read against the cached link's own fields.
package cache

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/maypok86/otter/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkgate/linkgate/shortener"
)

var (
	_ shortener.Store       = (*Store)(nil)
	_ shortener.KeyStore    = (*Store)(nil)
	_ shortener.URLAppender = (*Store)(nil)
	_ shortener.Updater     = (*Store)(nil)
	_ shortener.Finder      = (*Store)(nil)
)

// Options configure a cache.
type Options struct {
	// Size is the most entries (links and remembered misses) kept. > 0.
	Size int
	// TTL is how long a link is served from the cache after it was read
	// or created; the staleness bound for writes made elsewhere. > 0.
	TTL time.Duration
	// NegativeTTL is how long a lookup that found nothing is remembered;
	// 0 remembers nothing. At most TTL.
	NegativeTTL time.Duration
	// Registerer receives the cache's metrics (linkgate_cache_*); nil
	// registers none.
	Registerer prometheus.Registerer
	// Logger receives background refresh failures (the cached link keeps
	// being served until TTL); nil discards them.
	Logger *slog.Logger
	// Clock is the time expiry and refresh go by; nil is the system's.
	// Tests move a clock of their own instead of waiting out TTLs.
	Clock otter.Clock
}

// MaxRefreshes bounds the background reloads in flight.
const MaxRefreshes = 32

// refreshRetry is how soon a link whose reload was started (or failed)
// may be reloaded again.
const refreshRetry = time.Second

// entry is a cached lookup: a link, or the fact that there is none.
type entry struct {
	link  shortener.Link
	found bool
}

// Store is a shortener.Store that serves reads of another from memory.
type Store struct {
	// The store it wraps: what this type does not override (API keys,
	// records) passes through, uncached.
	shortener.Store
	cache  *otter.Cache[string, entry]
	loader otter.Loader[string, entry]
	negTTL time.Duration
	// deletes counts local deletes, so that a Create that races with a
	// Delete of the same id never leaves the deleted link cached.
	deletes atomic.Uint64
	// writes serialises this instance's updates and deletes of an id
	// (by a hash of it) from the store call to the cache change, so the
	// cache ends with the store's last word.
	writes     [64]sync.Mutex
	refreshing atomic.Int64 // background reloads in flight
	logger     *slog.Logger // nil: none
	m          *metrics
}

// New returns a cache of opts.Size entries in front of store.
func New(store shortener.Store, opts Options) (*Store, error) {
	switch {
	case opts.Size <= 0:
		return nil, fmt.Errorf("cache size must be at least 1, got %d", opts.Size)
	case opts.TTL <= 0:
		return nil, fmt.Errorf("cache TTL must be positive, got %s", opts.TTL)
	case opts.NegativeTTL < 0 || opts.NegativeTTL > opts.TTL:
		return nil, fmt.Errorf("negative cache TTL must be between 0 and the cache TTL (%s), got %s", opts.TTL, opts.NegativeTTL)
	}
	c := &Store{Store: store, negTTL: opts.NegativeTTL, logger: opts.Logger, m: newMetrics()}
	ttl, negTTL := opts.TTL, opts.NegativeTTL
	cache, err := otter.New(&otter.Options[string, entry]{
		MaximumSize: opts.Size,
		// A write (a load, a refresh, a local create) restarts the TTL.
		ExpiryCalculator: otter.ExpiryWritingFunc(func(e otter.Entry[string, entry]) time.Duration {
			if e.Value.found {
				return ttl
			}
			return negTTL
		}),
		RefreshCalculator: refreshCalculator{ttl: ttl},
		OnAtomicDeletion:  c.m.deleted,
		Logger:            &otter.NoopLogger{}, // refresh failures are counted (and logged) by refresh
		Clock:             opts.Clock,
	})
	if err != nil {
		return nil, fmt.Errorf("new cache: %w", err)
	}
	c.cache = cache
	c.loader = otter.LoaderFunc[string, entry](c.load)
	if opts.Registerer != nil {
		if err := c.m.register(opts.Registerer, func() float64 { return float64(cache.EstimatedSize()) }); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// load reads id from the store for the cache. A missing link is a
// negative entry, or no entry at all without a negative TTL.
func (c *Store) load(ctx context.Context, id string) (entry, error) {
	l, err := c.Store.Get(ctx, id)
	switch {
	case err == nil:
		return entry{link: l, found: true}, nil
	case errors.Is(err, shortener.ErrNotFound) && c.negTTL > 0:
		return entry{}, nil
	case errors.Is(err, shortener.ErrNotFound):
		return entry{}, otter.ErrNotFound
	default:
		return entry{}, err
	}
}

// cached returns the cached entry of key, if any, and starts its
// background refresh when it is due. alias says key aliases a caller's
// buffer: a refresh, which keeps the key, gets a copy.
func (c *Store) cached(ctx context.Context, key string, alias bool) (entry, bool) {
	ent, ok := c.cache.GetEntry(key)
	if !ok {
		return entry{}, false
	}
	c.m.hit(ent.Value.found)
	if ent.SnapshotAtNano >= ent.RefreshableAtNano {
		c.refresh(key, alias)
	}
	return ent.Value, true
}

// refresh reloads the link under key in the background, unless
// MaxRefreshes reloads are running already (then a later read tries
// again). Readers meanwhile keep getting the cached link; a delete or a
// write of the key during the reload discards the reloaded value.
func (c *Store) refresh(key string, alias bool) {
	if c.refreshing.Load() >= MaxRefreshes {
		return
	}
	if alias {
		key = strings.Clone(key)
	}
	// The entry is not due again before the reload ends (which sets its
	// next refresh time) or fails: the other readers do not pile on.
	c.cache.SetRefreshableAfter(key, refreshRetry)
	c.refreshing.Add(1)
	go func() {
		defer c.refreshing.Add(-1)
		r := <-c.cache.Refresh(context.Background(), key, c.loader)
		if r.Err != nil && !errors.Is(r.Err, otter.ErrNotFound) {
			c.m.refreshFailures.Inc()
			if c.logger != nil {
				c.logger.Debug("read cache: reload failed; serving the cached link until its TTL", "id", key, "error", r.Err)
			}
		}
	}()
}

// refreshCalculator makes a link due for reloading at a random point of the
// second half of its TTL after every write (load, reload, local create), so
// links loaded together come due apart. Remembered misses just expire.
type refreshCalculator struct{ ttl time.Duration }

func (r refreshCalculator) due(e otter.Entry[string, entry]) time.Duration {
	if !e.Value.found {
		return math.MaxInt64
	}
	half := r.ttl / 2
	return half + rand.N(half/2+1)
}

func (r refreshCalculator) RefreshAfterCreate(e otter.Entry[string, entry]) time.Duration {
	return r.due(e)
}
func (r refreshCalculator) RefreshAfterUpdate(e otter.Entry[string, entry], _ entry) time.Duration {
	return r.due(e)
}
func (r refreshCalculator) RefreshAfterReload(e otter.Entry[string, entry], _ entry) time.Duration {
	return r.due(e)
}
func (r refreshCalculator) RefreshAfterReloadFailure(e otter.Entry[string, entry], _ error) time.Duration {
	return refreshRetry
}

// lookup answers id from the cache, or from the store through the cache
// (one read per id however many callers miss at once). The store read is
// not cancelled with ctx: other callers may be waiting for it, and the
// store bounds every call itself.
func (c *Store) lookup(ctx context.Context, id string) (entry, error) {
	if e, ok := c.cached(ctx, id, false); ok {
		return e, nil
	}
	c.m.misses.Inc()
	e, err := c.cache.Get(context.WithoutCancel(ctx), id, c.loader)
	if errors.Is(err, otter.ErrNotFound) {
		return entry{}, nil
	}
	return e, err
}

// Get returns the link under id, from the cache when it holds it.
func (c *Store) Get(ctx context.Context, id string) (shortener.Link, error) {
	e, err := c.lookup(ctx, id)
	if err != nil {
		return shortener.Link{}, err
	}
	if !e.found {
		return shortener.Link{}, shortener.ErrNotFound
	}
	return e.link, nil
}

// AppendURL is Get for the redirect hot path: a hit allocates nothing.
func (c *Store) AppendURL(ctx context.Context, dst, id []byte) ([]byte, shortener.Link, error) {
	// The lookup key aliases id: GetEntry does not keep its key, and id
	// outlives the call. A miss or a refresh copies it before the cache
	// may store it.
	e, ok := c.cached(ctx, unsafe.String(unsafe.SliceData(id), len(id)), true)
	if !ok {
		var err error
		if e, err = c.lookup(ctx, string(id)); err != nil {
			return dst, shortener.Link{}, err
		}
	}
	if !e.found {
		return dst, shortener.Link{}, shortener.ErrNotFound
	}
	l := e.link
	l.ID, l.URL = "", ""
	return append(dst, e.link.URL...), l, nil
}

// Create stores l and caches it, so it resolves here at once even if the
// store's reads lag (DynamoDB's eventually consistent reads).
func (c *Store) Create(ctx context.Context, l shortener.Link) error {
	d := c.deletes.Load()
	if err := c.Store.Create(ctx, l); err != nil {
		c.cache.Invalidate(l.ID) // e.g. a stale remembered miss of a taken id
		return err
	}
	c.cache.Set(l.ID, entry{link: l, found: true})
	if c.deletes.Load() != d {
		// A Delete ran meanwhile and may have removed this link from the
		// store before the Set above: do not keep it.
		c.cache.Invalidate(l.ID)
	}
	return nil
}

// Delete removes the link from the store and the cache; once it returns,
// this instance no longer resolves it.
func (c *Store) Delete(ctx context.Context, id string) error {
	mu := c.writeLock(id)
	mu.Lock()
	defer mu.Unlock()
	err := c.Store.Delete(ctx, id)
	c.deletes.Add(1)
	c.cache.Invalidate(id) // also discards a load of id in flight
	return err
}

// Update edits the link in the store and caches the edited link, so this
// instance redirects to the new target at once (even if the store's reads
// lag). A failed edit drops the entry: the store may or may not have it.
func (c *Store) Update(ctx context.Context, id string, u shortener.LinkUpdate) (shortener.Link, error) {
	mu := c.writeLock(id)
	mu.Lock()
	defer mu.Unlock()
	l, err := c.Store.Update(ctx, id, u)
	if err != nil {
		c.cache.Invalidate(id)
		return shortener.Link{}, err
	}
	c.cache.Set(id, entry{link: l, found: true}) // also discards a load of id in flight
	return l, nil
}

var writeSeed = maphash.MakeSeed()

func (c *Store) writeLock(id string) *sync.Mutex {
	return &c.writes[maphash.String(writeSeed, id)%uint64(len(c.writes))]
}

// Find is not cached: the store's, if it has one.
func (c *Store) Find(ctx context.Context, after *shortener.Link, limit int, f shortener.ListFilter) (shortener.Page, error) {
	fs, ok := c.Store.(shortener.Finder)
	if !ok {
		return shortener.Page{}, shortener.ErrNoFinder
	}
	return fs.Find(ctx, after, limit, f)
}

// List is not cached.
func (c *Store) List(ctx context.Context, cursor string, limit int) (shortener.Page, error) {
	return c.Store.List(ctx, cursor, limit)
}

// Ping asks the store.
func (c *Store) Ping(ctx context.Context) error { return c.Store.Ping(ctx) }

// Close stops the cache's clean-up goroutine, unregisters its metrics and
// closes the store.
func (c *Store) Close() error {
	c.cache.StopAllGoroutines()
	c.m.unregister()
	return c.Store.Close()
}
