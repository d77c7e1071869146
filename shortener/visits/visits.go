// Package visits counts visits off the redirect path. Record, called by
// every followed redirect, adds the visit to an in-memory aggregate — per
// link: a total, per-day counts, referrer hosts, browser or bot family,
// country — under a short per-shard lock, and never waits for the store.
// A background flusher hands the aggregate to the store in batches, every
// FlushInterval or as soon as FlushLinks links are pending: one transaction
// per batch on bolt, one UpdateItem ADD per link on DynamoDB.
//
// Memory is bounded: beyond MaxLinks pending links, visits of further
// links are dropped and counted (Metrics.Dropped), never queued. A clean
// Close flushes everything; a crash loses at most what was recorded since
// the last flush.
//
// It imports only the standard library and the shortener domain; the
// User-Agent classifier and the GeoIP lookup are injected.
package visits

import (
	"context"
	"errors"
	"hash/maphash"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

var _ shortener.VisitCounter = (*Aggregator)(nil)

// Agent is what a User-Agent header says about a visitor.
type Agent struct {
	Name string // browser or bot family, e.g. "Chrome", "Slackbot"
	Bot  bool   // a crawler, a link-preview fetcher or an HTTP library
	// ID, if not 0, numbers this class for the classifier's lifetime
	// (below MaxAgentID), so the aggregate keeps a number, not a name.
	ID uint16
}

// MaxAgentID bounds Agent.ID.
const MaxAgentID = 256

// Classifier tells browsers from bots. Classify must be safe for
// concurrent use, must not retain ua, and should not allocate: it runs on
// every redirect.
type Classifier interface {
	Classify(ua []byte) Agent
}

// Geo maps an IP address to an ISO 3166 country code, "" when unknown.
type Geo interface {
	Country(ip net.IP) string
}

// Defaults of Config.
const (
	DefaultFlushInterval = time.Second
	DefaultFlushLinks    = 20000
	DefaultStoreTimeout  = 10 * time.Second
)

// Config configures an Aggregator. Zero fields take defaults.
type Config struct {
	Store         shortener.VisitStore // where batches go (required)
	Classifier    Classifier           // nil: every visitor is a browser named (unknown)
	Geo           Geo                  // nil: no countries
	Logger        *slog.Logger         // required
	FlushInterval time.Duration        // default DefaultFlushInterval
	FlushLinks    int                  // flush early at this many pending links; default DefaultFlushLinks
	MaxLinks      int                  // drop visits of new links beyond this many pending; default 4×FlushLinks
	StoreTimeout  time.Duration        // bound of one batch's store write; default DefaultStoreTimeout
}

const numShards = 16

// yieldEvery is how many links a flush converts between yields to the
// scheduler, so that with one core (GOMAXPROCS=1) request handlers wait
// for a flush by microseconds, not by a whole 10 ms scheduler slice.
const yieldEvery = 128

// Aggregator is the in-memory visit aggregate and its flusher. Create it
// with New; Close it once.
type Aggregator struct {
	cfg    Config
	seed   maphash.Seed
	shards [numShards]shard
	spares [numShards]*pending // the other batch of each shard (flush only)
	links  atomic.Int64        // distinct links pending in the shards

	// flushMu is held by a flush from taking the shards until the store
	// write is settled, and by Stats readers, so Stats never counts a
	// batch twice nor misses it.
	flushMu sync.RWMutex
	// gen is odd while a batch is being written. infMu guards it and
	// failed; a Pending reader counts failed only when gen did not move
	// since its store read.
	infMu     sync.Mutex
	gen       atomic.Uint64
	failed    map[string]*shortener.VisitDelta // batches the store refused, to retry
	failedSum map[string]int64                 // their totals, for Pending

	kick  chan struct{}
	stop  chan struct{}
	done  chan struct{}
	close sync.Once

	recorded, dropped, flushes, flushErrors, flushedVisits atomic.Uint64
}

type shard struct {
	mu  sync.Mutex
	cur *pending // this batch's visits
	_   [48]byte // keep shards on separate cache lines
}

// New returns a running Aggregator.
func New(cfg Config) (*Aggregator, error) {
	if cfg.Store == nil || cfg.Logger == nil {
		return nil, errors.New("visits: Store and Logger are required")
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	if cfg.FlushLinks <= 0 {
		cfg.FlushLinks = DefaultFlushLinks
	}
	if cfg.MaxLinks <= 0 {
		cfg.MaxLinks = 4 * cfg.FlushLinks
	}
	if cfg.MaxLinks < cfg.FlushLinks {
		cfg.MaxLinks = cfg.FlushLinks
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = DefaultStoreTimeout
	}
	a := &Aggregator{
		cfg:  cfg,
		seed: maphash.MakeSeed(),
		kick: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	for i := range a.shards {
		a.shards[i].cur = newPending()
		a.spares[i] = newPending()
	}
	go a.run()
	return a, nil
}

// Record counts one visit of the link id: its Referer and User-Agent
// header values, the client's address (used only with a GeoIP database)
// and the time. It retains none of its arguments and never blocks on the
// store; when MaxLinks links are already pending, a visit of another link
// is dropped and counted.
func (a *Aggregator) Record(id, referrer, userAgent []byte, ip net.IP, now time.Time) {
	var hostBuf [MaxHostLength]byte
	host := ReferrerHost(referrer, hostBuf[:])
	agent := Agent{Name: shortener.UnknownKey}
	if a.cfg.Classifier != nil {
		agent = a.cfg.Classifier.Classify(userAgent)
	}
	var country string
	if a.cfg.Geo != nil && ip != nil {
		country = a.cfg.Geo.Country(ip)
	}
	day := int32(now.Unix() / 86400)

	sh := &a.shards[maphash.Bytes(a.seed, id)%numShards]
	sh.mu.Lock()
	p := sh.cur
	idx, ok := p.index[string(id)]
	if !ok {
		if a.links.Load() >= int64(a.cfg.MaxLinks) {
			sh.mu.Unlock()
			a.dropped.Add(1)
			return
		}
		idx = int32(len(p.links))
		p.links = append(p.links, linkAgg{})
		p.index[string(id)] = idx
		if a.links.Add(1) == int64(a.cfg.FlushLinks) {
			select {
			case a.kick <- struct{}{}:
			default:
			}
		}
	}
	p.add(&p.links[idx], idx, a.seed, day, host, agent, country)
	sh.mu.Unlock()
	a.recorded.Add(1)
}

// Gen implements shortener.VisitCounter.
func (a *Aggregator) Gen() uint64 { return a.gen.Load() }

// Pending implements shortener.VisitCounter: the visits of id recorded
// and not yet stored.
func (a *Aggregator) Pending(id []byte, gen uint64) int64 {
	sh := &a.shards[maphash.Bytes(a.seed, id)%numShards]
	var n int64
	sh.mu.Lock()
	if idx, ok := sh.cur.index[string(id)]; ok {
		n = int64(sh.cur.links[idx].total)
	}
	sh.mu.Unlock()
	a.infMu.Lock()
	if gen%2 == 0 && a.gen.Load() == gen {
		n += a.failedSum[string(id)]
	}
	a.infMu.Unlock()
	return n
}

// Stats implements shortener.VisitCounter: the stored statistics of id
// plus those pending, each visit counted once.
func (a *Aggregator) Stats(ctx context.Context, id string) (shortener.VisitStats, error) {
	a.flushMu.RLock()
	defer a.flushMu.RUnlock()
	st, err := a.cfg.Store.VisitStats(ctx, id)
	if err != nil {
		return shortener.VisitStats{}, err
	}
	sh := &a.shards[maphash.String(a.seed, id)%numShards]
	sh.mu.Lock()
	if idx, ok := sh.cur.index[id]; ok {
		st.Add(sh.cur.stats(idx))
	}
	sh.mu.Unlock()
	a.infMu.Lock()
	if d := a.failed[id]; d != nil {
		st.Add(d.Stats)
	}
	a.infMu.Unlock()
	st.Bound()
	return st, nil
}

// Metrics are the aggregator's counters since it started.
type Metrics struct {
	Recorded      uint64 // visits recorded
	Dropped       uint64 // visits dropped: too many links pending, or a batch the store kept refusing
	Flushes       uint64 // batches written
	FlushErrors   uint64 // batch writes that failed (retried with the next batch)
	FlushedVisits uint64 // visits written to the store
	PendingLinks  int64  // links with visits not yet flushed
}

// Metrics returns the current counters.
func (a *Aggregator) Metrics() Metrics {
	return Metrics{
		Recorded: a.recorded.Load(), Dropped: a.dropped.Load(), Flushes: a.flushes.Load(),
		FlushErrors: a.flushErrors.Load(), FlushedVisits: a.flushedVisits.Load(), PendingLinks: a.links.Load(),
	}
}

func (a *Aggregator) run() {
	defer close(a.done)
	t := time.NewTicker(a.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
		case <-a.kick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), a.cfg.StoreTimeout)
		a.flush(ctx)
		cancel()
	}
}

// Flush writes everything pending now: one batch.
func (a *Aggregator) Flush(ctx context.Context) error {
	return a.flush(ctx)
}

func (a *Aggregator) flush(ctx context.Context) error {
	a.flushMu.Lock()
	defer a.flushMu.Unlock()

	// Take every shard's batch; Record goes on into the spare one.
	batch := make(map[string]*shortener.VisitDelta)
	for i := range a.shards {
		sh := &a.shards[i]
		spare := a.spares[i]
		sh.mu.Lock()
		p := sh.cur
		taken := len(p.index) > 0
		if taken {
			sh.cur = spare
		}
		sh.mu.Unlock()
		if !taken {
			continue // p is still the shard's: not ours to read
		}
		a.links.Add(-int64(len(p.index)))
		j := 0
		for id, idx := range p.index {
			batch[id] = &shortener.VisitDelta{ID: id, Stats: p.stats(idx)}
			if j++; j%yieldEvery == 0 {
				runtime.Gosched() // see yieldEvery
			}
		}
		p.reset()
		a.spares[i] = p
	}

	a.infMu.Lock()
	for id, d := range a.failed {
		if b := batch[id]; b != nil {
			b.Stats.Add(d.Stats)
		} else {
			batch[id] = d
		}
	}
	a.failed, a.failedSum = nil, nil
	if len(batch) == 0 {
		a.infMu.Unlock()
		return nil
	}
	a.gen.Add(1) // odd: writing
	a.infMu.Unlock()

	deltas := make([]shortener.VisitDelta, 0, len(batch))
	for _, d := range batch {
		d.Applied = false
		deltas = append(deltas, *d)
	}
	err := a.cfg.Store.AddVisits(ctx, deltas)

	failed := map[string]*shortener.VisitDelta{}
	failedSum := map[string]int64{}
	var written, lost uint64
	for i := range deltas {
		d := &deltas[i]
		if d.Applied {
			written += uint64(d.Stats.Total)
			continue
		}
		if len(failed) >= a.cfg.MaxLinks {
			lost += uint64(d.Stats.Total)
			continue
		}
		failed[d.ID] = d
		failedSum[d.ID] = d.Stats.Total
	}
	a.infMu.Lock()
	if len(failed) > 0 {
		a.failed, a.failedSum = failed, failedSum
	}
	a.gen.Add(1) // even: settled
	a.infMu.Unlock()

	a.flushedVisits.Add(written)
	a.dropped.Add(lost)
	if err != nil {
		a.flushErrors.Add(1)
		a.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "visits flush failed; retrying with the next batch",
			slog.Int("links", len(deltas)), slog.Int("unwritten_links", len(failed)), slog.String("error", err.Error()))
		return err
	}
	a.flushes.Add(1)
	return nil
}

// Close stops the flusher and flushes everything pending, retrying a
// failed batch until ctx is done. Visits recorded after Close are not
// flushed. It returns an error if some visits could not be stored.
func (a *Aggregator) Close(ctx context.Context) error {
	a.close.Do(func() { close(a.stop) })
	<-a.done
	for {
		err := a.flush(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}
