package cache_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/cache"
	"github.com/linkgate/linkgate/shortener/pebble"
	"github.com/linkgate/linkgate/shortener/storetest"
)

// countingStore wraps a real store and counts (and can hold up, or fail)
// the reads that reach it.
type countingStore struct {
	shortener.Store
	gets    atomic.Int64
	hold    chan struct{} // if set, Get waits for it to be closed
	failing atomic.Bool   // Get answers ErrUnavailable
}

func (s *countingStore) Get(ctx context.Context, id string) (shortener.Link, error) {
	s.gets.Add(1)
	if s.hold != nil {
		<-s.hold
	}
	if s.failing.Load() {
		return shortener.Link{}, fmt.Errorf("get: %w", shortener.ErrUnavailable)
	}
	return s.Store.Get(ctx, id)
}

func openBolt(t testing.TB) shortener.Store {
	t.Helper()
	s, err := pebble.Open(filepath.Join(t.TempDir(), "links"), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// testClock is the caches' clock in these tests (otter's Clock): time moves
// only when a test advances it, so TTLs pass without waiting them out. It
// never ticks: otter then finds expired entries when they are read.
type testClock struct{ ns atomic.Int64 }

func newClock() *testClock {
	c := &testClock{}
	c.ns.Store(base.UnixNano())
	return c
}

func (c *testClock) NowNano() int64                      { return c.ns.Load() }
func (c *testClock) Tick(time.Duration) <-chan time.Time { return nil }
func (c *testClock) Advance(d time.Duration)             { c.ns.Add(int64(d)) }

// newCache returns a cache over store with its own metrics registry.
func newCache(t testing.TB, store shortener.Store, opts cache.Options) (*cache.Store, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts.Registerer = reg
	if opts.Size == 0 {
		opts.Size = 1000
	}
	if opts.TTL == 0 {
		opts.TTL = time.Minute
	}
	c, err := cache.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, reg
}

var (
	ctx  = context.Background()
	base = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
)

func link(id string) shortener.Link {
	return shortener.Link{ID: id, URL: "https://" + id + ".example/", CreatedAt: base}
}

func counter(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i, lp := range m.GetLabel() {
				if i*2+1 >= len(labels) || lp.GetName() != labels[i*2] || lp.GetValue() != labels[i*2+1] {
					continue metric
				}
			}
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
	}
	t.Fatalf("metric %s%v not found", name, labels)
	return 0
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) shortener.Store {
		c, _ := newCache(t, openBolt(t), cache.Options{NegativeTTL: time.Second})
		return c
	})
}

func TestConformanceNoNegativeCache(t *testing.T) {
	storetest.Run(t, func(t *testing.T) shortener.Store {
		c, _ := newCache(t, openBolt(t), cache.Options{Size: 3})
		return c
	})
}

func TestHitsServedFromMemory(t *testing.T) {
	store := &countingStore{Store: openBolt(t)}
	c, reg := newCache(t, store, cache.Options{})
	l := link("hit0000001")
	if err := store.Store.Create(ctx, l); err != nil { // behind the cache's back
		t.Fatal(err)
	}
	for range 3 {
		got, err := c.Get(ctx, l.ID)
		if err != nil || !storetest.Equal(got, l) {
			t.Fatalf("Get = %+v, %v", got, err)
		}
	}
	buf, meta, err := c.AppendURL(ctx, []byte("Location: "), []byte(l.ID))
	if err != nil || string(buf) != "Location: "+l.URL || meta.ID != "" || meta.URL != "" || !meta.CreatedAt.Equal(l.CreatedAt) {
		t.Fatalf("AppendURL = %q, %+v, %v", buf, meta, err)
	}
	if n := store.gets.Load(); n != 1 {
		t.Errorf("store read %d times, want 1", n)
	}
	if h, m := counter(t, reg, "linkgate_cache_hits_total"), counter(t, reg, "linkgate_cache_misses_total"); h != 3 || m != 1 {
		t.Errorf("hits %v misses %v, want 3 and 1", h, m)
	}
}

// The redirect hot path allocates nothing on a hit.
func TestAppendURLHitDoesNotAllocate(t *testing.T) {
	c, _ := newCache(t, openBolt(t), cache.Options{})
	l := link("alloc00001")
	if err := c.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	id, buf := []byte(l.ID), make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(1000, func() {
		var err error
		if buf, _, err = c.AppendURL(ctx, buf[:0], id); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("AppendURL hit: %v allocations per call, want 0", allocs)
	}
}

// AppendURL must not keep the id it is given: the caller reuses the buffer.
func TestAppendURLDoesNotRetainID(t *testing.T) {
	c, _ := newCache(t, openBolt(t), cache.Options{NegativeTTL: time.Minute})
	if err := c.Create(ctx, link("keyA000001")); err != nil {
		t.Fatal(err)
	}
	id := []byte("keyB000001") // a miss, remembered under a copy of the id
	if _, _, err := c.AppendURL(ctx, nil, id); !errors.Is(err, shortener.ErrNotFound) {
		t.Fatalf("AppendURL(missing) = %v", err)
	}
	copy(id, "keyA000001") // the caller reuses its buffer
	if got, _, err := c.AppendURL(ctx, nil, id); err != nil || string(got) != link("keyA000001").URL {
		t.Errorf("AppendURL(keyA) after reuse = %q, %v", got, err)
	}
	if _, err := c.Get(ctx, "keyB000001"); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("Get(keyB) = %v, want ErrNotFound", err)
	}
}

func TestNegativeCache(t *testing.T) {
	store := &countingStore{Store: openBolt(t)}
	clock := newClock()
	c, reg := newCache(t, store, cache.Options{NegativeTTL: 50 * time.Millisecond, Clock: clock})
	for range 3 {
		if _, err := c.Get(ctx, "absent0001"); !errors.Is(err, shortener.ErrNotFound) {
			t.Fatalf("Get(absent) = %v", err)
		}
		if _, _, err := c.AppendURL(ctx, nil, []byte("absent0001")); !errors.Is(err, shortener.ErrNotFound) {
			t.Fatalf("AppendURL(absent) = %v", err)
		}
	}
	if n := store.gets.Load(); n != 1 {
		t.Errorf("store read %d times for a remembered miss, want 1", n)
	}
	if got := counter(t, reg, "linkgate_cache_negative_hits_total"); got != 5 {
		t.Errorf("negative hits %v, want 5", got)
	}
	// Created elsewhere: seen once the remembered miss expires.
	if err := store.Store.Create(ctx, link("absent0001")); err != nil {
		t.Fatal(err)
	}
	clock.Advance(49 * time.Millisecond)
	if _, err := c.Get(ctx, "absent0001"); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("Get within the negative TTL = %v, want the remembered miss", err)
	}
	clock.Advance(2 * time.Millisecond)
	if _, err := c.Get(ctx, "absent0001"); err != nil {
		t.Errorf("Get after the negative TTL: %v", err)
	}
}

func TestNoNegativeCache(t *testing.T) {
	store := &countingStore{Store: openBolt(t)}
	c, _ := newCache(t, store, cache.Options{})
	for range 3 {
		if _, err := c.Get(ctx, "absent0001"); !errors.Is(err, shortener.ErrNotFound) {
			t.Fatalf("Get(absent) = %v", err)
		}
	}
	if n := store.gets.Load(); n != 3 {
		t.Errorf("store read %d times, want 3 (misses not remembered)", n)
	}
}

// A local create is seen at once, even over a remembered miss.
func TestCreateInvalidatesRememberedMiss(t *testing.T) {
	store := &countingStore{Store: openBolt(t)}
	c, _ := newCache(t, store, cache.Options{NegativeTTL: time.Minute})
	if _, err := c.Get(ctx, "slug-taken"); !errors.Is(err, shortener.ErrNotFound) {
		t.Fatal(err)
	}
	l := link("slug-taken")
	if err := c.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, l.ID)
	if err != nil || !storetest.Equal(got, l) {
		t.Errorf("Get after Create = %+v, %v", got, err)
	}
	if n := store.gets.Load(); n != 1 {
		t.Errorf("store read %d times, want 1 (Create caches the new link)", n)
	}
	// A conflicting create leaves the cached link alone.
	if err := c.Create(ctx, link("slug-taken")); !errors.Is(err, shortener.ErrConflict) {
		t.Errorf("second Create = %v", err)
	}
	if got, err := c.Get(ctx, l.ID); err != nil || got.URL != l.URL {
		t.Errorf("Get after a conflict = %+v, %v", got, err)
	}
}

// A local delete is seen at once; a delete made through another instance
// is seen here within the cache TTL.
func TestDeleteInvalidatesAndStalenessBound(t *testing.T) {
	shared := openBolt(t)
	const ttl = 100 * time.Millisecond
	clock := newClock()
	a, _ := newCache(t, shared, cache.Options{TTL: ttl, Clock: clock})
	b, _ := newCache(t, shared, cache.Options{TTL: ttl, Clock: clock})
	l := link("stale00001")
	if err := a.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*cache.Store{a, b} {
		if _, err := c.Get(ctx, l.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Delete(ctx, l.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, l.ID); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("Get on the deleting instance = %v, want ErrNotFound at once", err)
	}
	if _, err := a.Get(ctx, l.ID); err != nil {
		t.Errorf("Get on the other instance before its TTL = %v, want the (stale) cached link", err)
	}
	clock.Advance(ttl + time.Millisecond)
	if _, err := a.Get(ctx, l.ID); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("Get on the other instance after its TTL = %v, want ErrNotFound", err)
	}
}

// A link read in the second half of its TTL is reloaded in the background:
// the reader gets the cached link at once, later readers the reloaded one,
// and a link read steadily never expires, so it never waits for the store.
func TestRefreshAhead(t *testing.T) {
	store := &countingStore{Store: openBolt(t)}
	const ttl = 200 * time.Millisecond
	clock := newClock()
	c, reg := newCache(t, store, cache.Options{TTL: ttl, Clock: clock})
	v1 := link("fresh00001")
	if err := store.Store.Create(ctx, v1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, v1.ID); err != nil {
		t.Fatal(err)
	}
	// Changed behind the cache's back (as another instance would).
	if err := store.Store.Delete(ctx, v1.ID); err != nil {
		t.Fatal(err)
	}
	v2 := v1
	v2.URL = "https://v2.example/"
	if err := store.Store.Create(ctx, v2); err != nil {
		t.Fatal(err)
	}
	// Due at a random point of [ttl/2, 3ttl/4] after the load.
	clock.Advance(3*ttl/4 + time.Millisecond)
	if got, _, err := c.AppendURL(ctx, nil, []byte(v1.ID)); err != nil || string(got) != v1.URL {
		t.Fatalf("stale read = %q, %v; want the cached %q at once", got, err, v1.URL)
	}
	eventually.True(t, 10*time.Second, "the background refresh to land", func() bool {
		got, err := c.Get(ctx, v1.ID)
		return err == nil && got.URL == v2.URL
	})
	// Read steadily for several TTLs, one read every ttl/8: never a miss.
	// Each step waits for the reload it started, as time would not wait.
	for range 24 {
		clock.Advance(ttl / 8)
		if _, _, err := c.AppendURL(ctx, nil, []byte(v1.ID)); err != nil {
			t.Fatal(err)
		}
		eventually.True(t, 10*time.Second, "the reload in flight to end", func() bool { return c.RefreshesInFlight() == 0 })
	}
	if m := counter(t, reg, "linkgate_cache_misses_total"); m != 1 {
		t.Errorf("%v misses, want 1: a steadily read link expired", m)
	}
	if n := store.gets.Load(); n < 3 {
		t.Errorf("%d store reads, want the first plus background refreshes", n)
	}
}

// Store failures are returned, never cached.
func TestErrorsAreNotCached(t *testing.T) {
	store := &countingStore{Store: openBolt(t)}
	c, _ := newCache(t, store, cache.Options{NegativeTTL: time.Minute})
	l := link("flaky00001")
	if err := store.Store.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	store.failing.Store(true)
	if _, err := c.Get(ctx, l.ID); !errors.Is(err, shortener.ErrUnavailable) {
		t.Fatalf("Get while the store fails = %v, want ErrUnavailable", err)
	}
	if _, _, err := c.AppendURL(ctx, nil, []byte(l.ID)); !errors.Is(err, shortener.ErrUnavailable) {
		t.Fatalf("AppendURL while the store fails = %v, want ErrUnavailable", err)
	}
	store.failing.Store(false)
	if got, err := c.Get(ctx, l.ID); err != nil || got.URL != l.URL {
		t.Errorf("Get once the store recovers = %+v, %v", got, err)
	}
}

// Concurrent misses of one id share one store read.
func TestConcurrentMissesShareOneRead(t *testing.T) {
	store := &countingStore{Store: openBolt(t), hold: make(chan struct{})}
	c, reg := newCache(t, store, cache.Options{})
	l := link("herd000001")
	if err := store.Store.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	const n = 20
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, errs[i] = c.Get(ctx, l.ID) })
	}
	// Every caller has missed (the first read is held) before it ends.
	eventually.True(t, 10*time.Second, "every caller to miss", func() bool {
		return counter(t, reg, "linkgate_cache_misses_total") == n
	})
	close(store.hold)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Get %d: %v", i, err)
		}
	}
	if got := store.gets.Load(); got != 1 {
		t.Errorf("%d store reads for %d concurrent misses, want 1", got, n)
	}
}

// Whatever the interleaving of creates, deletes and reads of one id on one
// instance, the cache ends agreeing with the store.
func TestConcurrentWritesStayCoherent(t *testing.T) {
	backing := openBolt(t)
	c, _ := newCache(t, backing, cache.Options{NegativeTTL: time.Minute})
	for round := range 200 {
		id := fmt.Sprintf("race%06d", round)
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Go(func() {
				switch i % 3 {
				case 0:
					c.Create(ctx, link(id))
				case 1:
					c.Delete(ctx, id)
				default:
					c.Get(ctx, id)
				}
			})
		}
		wg.Wait()
		_, cerr := c.Get(ctx, id)
		_, serr := backing.Get(ctx, id)
		if (cerr == nil) != (serr == nil) {
			t.Fatalf("round %d: cache says %v, store says %v", round, cerr, serr)
		}
	}
}

func TestEvictionsAndExpirationsCounted(t *testing.T) {
	clock := newClock()
	c, reg := newCache(t, openBolt(t), cache.Options{Size: 10, TTL: 20 * time.Millisecond, Clock: clock})
	for i := range 200 {
		if err := c.Create(ctx, link(fmt.Sprintf("evict%05d", i))); err != nil {
			t.Fatal(err)
		}
	}
	eventually.True(t, 10*time.Second, "a size eviction counted after 200 entries in a cache of 10", func() bool {
		return counter(t, reg, "linkgate_cache_evictions_total", "cause", "size") > 0
	})
	if n := counter(t, reg, "linkgate_cache_entries"); n > 20 {
		t.Errorf("%v entries in a cache of 10", n)
	}
	clock.Advance(21 * time.Millisecond)
	for i := range 200 { // reads find the expired entries
		c.Get(ctx, fmt.Sprintf("evict%05d", i))
	}
	eventually.True(t, 10*time.Second, "an expiration counted", func() bool {
		return counter(t, reg, "linkgate_cache_evictions_total", "cause", "expired") > 0
	})
}

func TestMetricsRegistration(t *testing.T) {
	c, reg := newCache(t, openBolt(t), cache.Options{})
	for _, name := range []string{"linkgate_cache_entries", "linkgate_cache_hits_total",
		"linkgate_cache_misses_total", "linkgate_cache_negative_hits_total"} {
		counter(t, reg, name) // fails the test if missing
	}
	// A second cache on the same registry is refused, not a panic.
	if _, err := cache.New(openBolt(t), cache.Options{Size: 1, TTL: time.Second, Registerer: reg}); err == nil ||
		!strings.Contains(err.Error(), "register cache metrics") {
		t.Errorf("second cache on one registry: %v", err)
	}
	// Close unregisters them.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n, _ := testutil.GatherAndCount(reg); n != 0 {
		t.Errorf("%d metrics left after Close", n)
	}
}

func TestOptionsValidated(t *testing.T) {
	store := openBolt(t)
	for _, o := range []cache.Options{
		{Size: 0, TTL: time.Second},
		{Size: 10, TTL: 0},
		{Size: 10, TTL: time.Second, NegativeTTL: 2 * time.Second},
		{Size: 10, TTL: time.Second, NegativeTTL: -1},
	} {
		if _, err := cache.New(store, o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

func BenchmarkAppendURLHit(b *testing.B) {
	c, _ := newCache(b, openBolt(b), cache.Options{Size: 100_000, TTL: time.Hour})
	ids := make([][]byte, 1000)
	var wg sync.WaitGroup
	for i := range ids {
		l := link(fmt.Sprintf("bench%05d", i))
		ids[i] = []byte(l.ID)
		wg.Go(func() { c.Create(ctx, l) }) // concurrent: pebble commits them together
	}
	wg.Wait()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 0, 256)
		i := 0
		for pb.Next() {
			buf, _, _ = c.AppendURL(ctx, buf[:0], ids[i%len(ids)])
			i++
		}
	})
}

// slowUpdates holds each Update, after the store has applied it, until
// release is closed; updated is closed once the store applied one.
type slowUpdates struct {
	shortener.Store
	updated, release chan struct{}
	once             sync.Once
}

func (s *slowUpdates) Update(ctx context.Context, id string, u shortener.LinkUpdate) (shortener.Link, error) {
	l, err := s.Store.Update(ctx, id, u)
	s.once.Do(func() { close(s.updated) })
	<-s.release
	return l, err
}

// An edit seen at once here, and a delete that follows an edit still in
// flight is never undone by the edit's cache write.
func TestUpdateCachedAndNeverUndoesADelete(t *testing.T) {
	inner := &slowUpdates{Store: openBolt(t), updated: make(chan struct{}), release: make(chan struct{})}
	c, _ := newCache(t, inner, cache.Options{TTL: time.Hour, NegativeTTL: time.Minute})
	ctx := context.Background()
	if err := c.Create(ctx, link("edited0001")); err != nil {
		t.Fatal(err)
	}
	c.Get(ctx, "edited0001") // cached
	url := "https://edited.example/"
	upDone := make(chan error, 1)
	go func() {
		_, err := c.Update(ctx, "edited0001", shortener.LinkUpdate{URL: &url})
		upDone <- err
	}()
	<-inner.updated
	delDone := make(chan error, 1)
	go func() { delDone <- c.Delete(ctx, "edited0001") }()
	// The delete waits for the edit to finish on this instance (if it did
	// not, it would return now and the edit's cache write would follow it).
	select {
	case err := <-delDone:
		delDone <- err
	case <-time.After(100 * time.Millisecond):
	}
	close(inner.release)
	if err := <-upDone; err != nil {
		t.Fatal(err)
	}
	if err := <-delDone; err != nil {
		t.Fatal(err)
	}
	if l, err := c.Get(ctx, "edited0001"); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("after the edit and then the delete: Get = %+v, %v; want ErrNotFound", l, err)
	}
	// An edit is served at once from the cache.
	if err := c.Create(ctx, link("edited0002")); err != nil {
		t.Fatal(err)
	}
	c.Get(ctx, "edited0002")
	if _, err := c.Update(ctx, "edited0002", shortener.LinkUpdate{URL: &url}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := c.AppendURL(ctx, nil, []byte("edited0002")); string(got) != url {
		t.Errorf("redirect after the edit goes to %q, want %q", got, url)
	}
}
