// Package storemetrics wraps any shortener.Store with Prometheus metrics:
// the latency of every store operation, by operation and result.
package storemetrics

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkgate/linkgate/shortener"
)

var (
	_ shortener.Store           = (*Store)(nil)
	_ shortener.URLAppender     = (*Store)(nil)
	_ shortener.VisitStore      = (*Store)(nil)
	_ shortener.Updater         = (*Store)(nil)
	_ shortener.VisitRangeStore = (*Store)(nil)
	_ shortener.Finder          = (*Store)(nil)
)

type op int

const (
	opCreate op = iota
	opGet
	opDelete
	opList
	opPing
	opAddVisits
	opVisitStats
	opUpdate
	opVisitCounts
	numOps
)

var opNames = [numOps]string{"create", "get", "delete", "list", "ping", "add_visits", "visit_stats", "update", "visit_counts"}

type result int

const (
	resultOK result = iota
	resultNotFound
	resultConflict
	resultError
	numResults
)

var resultNames = [numResults]string{"ok", "not_found", "conflict", "error"}

// Store is a shortener.Store that times the calls of the Store it wraps
// that serve links and visits; API keys and records pass through untimed.
type Store struct {
	shortener.Store // the inner store: what is not timed passes through
	obs             [numOps][numResults]prometheus.Observer

	sampleMask uint32        // AppendURL times one call in sampleMask+1
	lookups    atomic.Uint32 // AppendURL calls, for sampling
}

// SampleLookups makes AppendURL (the redirect's lookup) time one call in
// n (a power of two; 1: every call, the default), whatever its result, so
// that the histogram's op="get" count is then about 1/n of the redirects'
// lookups plus every Get. For a store whose lookups take a fraction of a
// microsecond (the embedded one reads from memory), the two clock reads
// and the observation cost about as much as the lookup itself; the
// latency distribution they show is the same with a sample. Call it
// before the store is used.
func (s *Store) SampleLookups(n int) {
	if n < 1 || n&(n-1) != 0 {
		panic("storemetrics: SampleLookups wants a power of two")
	}
	s.sampleMask = uint32(n - 1)
}

// Wrap returns inner instrumented; backend ("pebble", "dynamodb") labels the
// metrics, which are registered on reg.
func Wrap(inner shortener.Store, reg prometheus.Registerer, backend string) *Store {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:        "linkgate_store_operation_duration_seconds",
		Help:        "Latency of store operations, by operation and result.",
		ConstLabels: prometheus.Labels{"backend": backend},
		Buckets:     []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
	}, []string{"op", "result"})
	reg.MustRegister(h)
	s := &Store{Store: inner}
	for o := range numOps {
		for r := range numResults {
			s.obs[o][r] = h.WithLabelValues(opNames[o], resultNames[r])
		}
	}
	return s
}

// clockBase anchors the timing: time.Since(clockBase) reads the monotonic
// clock only, where time.Now also reads the wall clock (the redirect path
// times every lookup).
var clockBase = time.Now()

func now() time.Duration { return time.Since(clockBase) }

// observe records one call that started at now() == start.
func (s *Store) observe(o op, start time.Duration, err error) {
	r := resultOK
	switch {
	case err == nil:
	case errors.Is(err, shortener.ErrNotFound):
		r = resultNotFound
	case errors.Is(err, shortener.ErrConflict):
		r = resultConflict
	default:
		r = resultError
	}
	s.obs[o][r].Observe((now() - start).Seconds())
}

func (s *Store) Create(ctx context.Context, l shortener.Link) error {
	start := now()
	err := s.Store.Create(ctx, l)
	s.observe(opCreate, start, err)
	return err
}

func (s *Store) Get(ctx context.Context, id string) (shortener.Link, error) {
	start := now()
	l, err := s.Store.Get(ctx, id)
	s.observe(opGet, start, err)
	return l, err
}

// AppendURL is timed as a "get" (one call in n with SampleLookups).
func (s *Store) AppendURL(ctx context.Context, dst, id []byte) ([]byte, shortener.Link, error) {
	if s.sampleMask != 0 && (s.lookups.Add(1)-1)&s.sampleMask != 0 {
		return s.Store.AppendURL(ctx, dst, id)
	}
	start := now()
	dst, l, err := s.Store.AppendURL(ctx, dst, id)
	s.observe(opGet, start, err)
	return dst, l, err
}

func (s *Store) Delete(ctx context.Context, id string) error {
	start := now()
	err := s.Store.Delete(ctx, id)
	s.observe(opDelete, start, err)
	return err
}

// Update times the inner store's Update.
func (s *Store) Update(ctx context.Context, id string, u shortener.LinkUpdate) (shortener.Link, error) {
	start := now()
	l, err := s.Store.Update(ctx, id, u)
	s.observe(opUpdate, start, err)
	return l, err
}

// Find times the inner store's Find (as a list), if it has one.
func (s *Store) Find(ctx context.Context, after *shortener.Link, limit int, f shortener.ListFilter) (shortener.Page, error) {
	fs, ok := s.Store.(shortener.Finder)
	if !ok {
		return shortener.Page{}, shortener.ErrNoFinder
	}
	start := now()
	p, err := fs.Find(ctx, after, limit, f)
	s.observe(opList, start, err)
	return p, err
}

func (s *Store) List(ctx context.Context, cursor string, limit int) (shortener.Page, error) {
	start := now()
	p, err := s.Store.List(ctx, cursor, limit)
	s.observe(opList, start, err)
	return p, err
}

func (s *Store) Ping(ctx context.Context) error {
	start := now()
	err := s.Store.Ping(ctx)
	s.observe(opPing, start, err)
	return err
}

// AddVisits times the inner store's AddVisits.
func (s *Store) AddVisits(ctx context.Context, batch *shortener.VisitBatch) error {
	start := now()
	err := s.Store.AddVisits(ctx, batch)
	s.observe(opAddVisits, start, err)
	return err
}

// VisitCounts times the inner store's VisitCounts.
func (s *Store) VisitCounts(ctx context.Context, q shortener.StatsQuery) (shortener.VisitCounts, error) {
	rs, ok := s.Store.(shortener.VisitRangeStore)
	if !ok {
		return shortener.VisitCounts{}, shortener.ErrNoRanges
	}
	start := now()
	c, err := rs.VisitCounts(ctx, q)
	s.observe(opVisitCounts, start, err)
	return c, err
}

// VisitStats times the inner store's VisitStats.
func (s *Store) VisitStats(ctx context.Context, id string) (shortener.VisitStats, error) {
	start := now()
	st, err := s.Store.VisitStats(ctx, id)
	s.observe(opVisitStats, start, err)
	return st, err
}

func (s *Store) Close() error { return s.Store.Close() }
