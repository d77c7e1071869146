// Package visits counts visits off the redirect path.
//
// Record, called by every followed redirect, appends a compact raw record
// of the visit (link id, referrer host, browser or bot, day, and the
// client's address with a GeoIP database) to one of a few buffers: a
// short critical section, no allocation, no map. A drainer goroutine
// takes the buffers every few milliseconds and aggregates them — per link:
// a total, per-day counts, referrer hosts, browser or bot family, country
// — and a flusher hands the aggregate to the store in batches, every
// FlushInterval or as soon as FlushLinks links are pending. The store
// writes a batch as it can (shortener.VisitStore): pebble in commits of a
// few hundred links synced once, DynamoDB one UpdateItem ADD per link with
// a visit limit and its visit log for the others.
//
// Memory is bounded: a full buffer (the drainer fell behind) drops the
// visit, and beyond MaxLinks pending links visits of further links are
// dropped; both are counted (Metrics.Dropped), never queued. A clean Close
// flushes everything; a crash loses at most what was recorded since the
// last flush.
//
// Visits of links with a visit limit are also counted per link at once,
// so the live count (Pending) is exact without reading the buffers.
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
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkgate/linkgate/internal/pace"
	"github.com/linkgate/linkgate/shortener"
)

var (
	_ shortener.VisitCounter      = (*Aggregator)(nil)
	_ shortener.VisitRangeCounter = (*Aggregator)(nil)
)

// Agent is what a User-Agent header says about a visitor.
type Agent struct {
	Name   string // browser or bot family, e.g. "Chrome", "Slackbot"
	Bot    bool   // a crawler, a link-preview fetcher or an HTTP library
	OS     string // operating system family, e.g. "Android"; "" or shortener.UnknownKey: unknown
	Device string // shortener.DeviceDesktop, DeviceMobile, DeviceTablet or DeviceBot ("": desktop, or bot for bots)
	// ID, if not 0, numbers this class (name, OS and device) for the
	// classifier's lifetime (below MaxAgentID), so the aggregate finds
	// its keys without a map.
	ID uint16
}

// MaxAgentID bounds Agent.ID.
const MaxAgentID = 4096

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
	DefaultBufferBytes   = 2 << 20
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
	// BufferBytes bounds the raw records waiting for the drainer (about
	// 50 bytes a visit); default DefaultBufferBytes.
	BufferBytes int
}

// drainDelay is how long the drainer lets records gather after the first
// one arrives: short enough to keep the buffers small, long enough that a
// busy server drains hundreds of visits at a time.
const drainDelay = 5 * time.Millisecond

// paceEvery is how many records a drain aggregates, or links a flush
// builds, between two looks at its pacer (internal/pace): with one core
// (GOMAXPROCS=1) they then take at most a third of it while requests wait,
// and requests wait for them by a millisecond at most. Yielding
// (runtime.Gosched) every 2,048 instead still let a flush's build run
// 1.3–1.8 ms stretches back to back under the fixed-rate load of make
// bench-visits (docs/visits.md, "Visit flushes paced").
const paceEvery = 256

// pacerPause and pacerNow are the pacers' pause and clock; nil: time.Sleep,
// time.Now (tests set them, before New and back after Close).
var (
	pacerPause func(time.Duration)
	pacerNow   func() time.Time
)

// Aggregator is the visit buffers, the aggregate and their goroutines.
// Create it with New; Close it once.
type Aggregator struct {
	cfg    Config
	seed   maphash.Seed
	closed atomic.Bool

	bufMu   sync.Mutex
	buf     []byte // raw records (ring.go), up to cap(buf)
	lastRec int    // where the last record in buf starts; -1: none
	_       [64]byte

	// aggMu guards the aggregate, the buffer the drainer owns (spare)
	// and failed, a batch the store refused (retried with the next one).
	aggMu  sync.Mutex
	agg    *aggregate
	spare  []byte
	failed *shortener.VisitBatch
	geo    geoCache

	// flushMu is held by a flush from taking the aggregate until the
	// store write is settled, and by Stats readers, so Stats never counts
	// a batch twice nor misses it.
	flushMu sync.RWMutex
	batch   shortener.VisitBatch // the batch being written (flushMu)

	// limMu guards lim: per link with a visit limit, its visits recorded
	// and those taken by a flush (written, or being written).
	limMu sync.Mutex
	lim   map[string]*limCount

	drainKick, drainNow, flushKick chan struct{}
	stop, done                     chan struct{}
	drainDone                      chan struct{}
	close                          sync.Once

	recorded, dropped, flushes, flushErrors, flushedVisits atomic.Uint64
}

type limCount struct{ recorded, taken int64 }

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
	if cfg.BufferBytes <= 0 {
		cfg.BufferBytes = DefaultBufferBytes
	}
	a := &Aggregator{
		cfg:       cfg,
		seed:      maphash.MakeSeed(),
		buf:       make([]byte, 0, max(cfg.BufferBytes/2, 1024)),
		lastRec:   -1,
		spare:     make([]byte, 0, max(cfg.BufferBytes/2, 1024)),
		lim:       map[string]*limCount{},
		drainKick: make(chan struct{}, 1),
		drainNow:  make(chan struct{}, 1),
		flushKick: make(chan struct{}, 1),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		drainDone: make(chan struct{}),
	}
	a.agg = newAggregate(a.seed)
	go a.drainLoop()
	go a.flushLoop()
	return a, nil
}

// UsesAddr reports whether Record uses the client's address: only to find
// its country, with Config.Geo (httpapi.AddrUser).
func (a *Aggregator) UsesAddr() bool { return a.cfg.Geo != nil }

// Record counts one visit of the link id: its Referer and User-Agent
// header values, the query string of the request (for its utm_source,
// utm_medium and utm_campaign), the client's address (used only with a
// GeoIP database), its country when a trusted front end said it
// (CloudFront-Viewer-Country; "" otherwise, and then the GeoIP database
// decides), the time, and the link as the redirect found it (ID and URL
// unused): whether it has a visit limit, and its CreatedAt, which tells it
// from an earlier link under the same id (shortener.LinkVisits.CreatedAt).
// It retains none of its arguments and never blocks on the store; when
// the buffers are full the visit is dropped and counted.
func (a *Aggregator) Record(id, referrer, userAgent, query []byte, ip netip.Addr, country string, now time.Time, link shortener.Link) {
	if len(id) == 0 || len(id) > maxIDLength || a.closed.Load() {
		return
	}
	limited := link.MaxVisits > 0
	var hostBuf [MaxHostLength]byte
	v := rawVisit{id: id, host: ReferrerHost(referrer, hostBuf[:])}
	if !link.CreatedAt.IsZero() {
		v.created = link.CreatedAt.Unix()
	}
	hostLen := byte(len(v.host))
	if v.host == nil {
		hostLen = hostInvalid
	}
	agent := Agent{Name: shortener.UnknownKey}
	if a.cfg.Classifier != nil {
		agent = a.cfg.Classifier.Classify(userAgent)
	}
	v.agentName, v.osName, v.deviceName = clip(agent.Name), clip(agent.OS), clip(agent.Device)
	if agent.ID > 0 && agent.ID < MaxAgentID {
		v.agentID = agent.ID
	}
	if agent.Bot {
		v.flags |= flagBot
	}
	if limited {
		v.flags |= flagLimited
	}
	var utmBufs [3][MaxUTMLength]byte
	if len(query) > 0 {
		v.utm = UTMValues(query, &utmBufs)
	}
	var ipBuf [16]byte
	switch ip = ip.Unmap(); {
	case countryCode(country):
		v.ip, v.flags = ipBuf[:copy(ipBuf[:], country)], v.flags|flagCountry
	case a.cfg.Geo == nil:
	case ip.Is4():
		a4 := ip.As4()
		v.ip, v.flags = ipBuf[:copy(ipBuf[:], a4[:])], v.flags|flagIP4
	case ip.Is6():
		ipBuf = ip.As16()
		v.ip, v.flags = ipBuf[:], v.flags|flagIP16
	}
	if s := now.Unix(); s > 0 {
		v.hour = uint32(s / 3600)
	}
	v.hash = maphash.Bytes(a.seed, id)
	size := recordSize(&v)

	a.bufMu.Lock()
	n := len(a.buf)
	if cap(a.buf)-n < size {
		a.bufMu.Unlock()
		a.dropped.Add(1)
		a.kick(a.drainNow)
		return
	}
	b := appendRecord(a.buf, &v, hostLen)
	if a.lastRec >= 0 && repeat(b[a.lastRec:n], b[n:]) {
		a.bufMu.Unlock() // counted by the last record, whose drain is due
	} else {
		a.buf, a.lastRec = b, n
		half := cap(b) / 2
		a.bufMu.Unlock()
		switch {
		case n == 0:
			a.kick(a.drainKick)
		case n < half && n+size >= half:
			a.kick(a.drainNow)
		}
	}
	if limited {
		a.limMu.Lock()
		c := a.lim[string(id)]
		if c == nil {
			c = &limCount{}
			a.lim[string(id)] = c
		}
		c.recorded++
		a.limMu.Unlock()
	}
}

// clip bounds a name to what a raw record's length byte holds.
func clip(s string) string {
	if len(s) > 200 {
		return s[:200]
	}
	return s
}

func (a *Aggregator) kick(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Pending implements shortener.VisitCounter: the visits of id, a link
// with a visit limit, recorded and not yet taken by a flush.
func (a *Aggregator) Pending(id []byte) int64 {
	a.limMu.Lock()
	var n int64
	if c := a.lim[string(id)]; c != nil {
		n = c.recorded - c.taken
	}
	a.limMu.Unlock()
	return max(n, 0)
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
	a.aggMu.Lock()
	a.drainLocked()
	if e := a.agg.find(maphash.String(a.seed, id), []byte(id)); e >= 0 {
		st.Add(a.agg.stats(&a.agg.entries[e]))
	}
	if f := a.failed; f != nil {
		for i := range f.Links {
			if f.Links[i].ID == id {
				st.Add(f.Stats(i))
			}
		}
	}
	a.aggMu.Unlock()
	st.Bound()
	return st, nil
}

// VisitCounts implements shortener.VisitRangeCounter: the store's counts
// (which must implement shortener.VisitRangeStore) plus, for one link's
// query, its visits not yet flushed, each visit counted once. All-links
// queries count what is stored: at most a flush interval behind.
func (a *Aggregator) VisitCounts(ctx context.Context, q shortener.StatsQuery) (shortener.VisitCounts, error) {
	rs, ok := a.cfg.Store.(shortener.VisitRangeStore)
	if !ok {
		return shortener.VisitCounts{}, shortener.ErrNoRanges
	}
	if q.ID == "" {
		return rs.VisitCounts(ctx, q)
	}
	a.flushMu.RLock()
	defer a.flushMu.RUnlock()
	c, err := rs.VisitCounts(ctx, q)
	if err != nil {
		return c, err
	}
	a.aggMu.Lock()
	defer a.aggMu.Unlock()
	a.drainLocked()
	if e := a.agg.find(maphash.String(a.seed, q.ID), []byte(q.ID)); e >= 0 {
		a.agg.rangeCounts(&a.agg.entries[e], &q, &c)
	}
	if f := a.failed; f != nil {
		for i := range f.Links {
			if f.Links[i].ID == q.ID {
				batchRangeCounts(f, i, &q, &c)
			}
		}
	}
	return c, nil
}

// batchRangeCounts adds the visits of link i of b (hourly form) within
// q's range to c.
func batchRangeCounts(b *shortener.VisitBatch, i int, q *shortener.StatsQuery, c *shortener.VisitCounts) {
	for _, kc := range b.Links[i].Counts {
		c.AddKey(q, b.Keys[kc.Key], kc.N)
	}
}

// Metrics are the aggregator's counters since it started.
type Metrics struct {
	Recorded      uint64 // visits recorded
	Dropped       uint64 // visits dropped: buffers full, too many links pending, or a batch the store kept refusing
	Flushes       uint64 // batches written
	FlushErrors   uint64 // batch writes that failed (retried with the next batch)
	FlushedVisits uint64 // visits written to the store
	PendingLinks  int64  // links with visits not yet flushed
}

// Metrics returns the current counters, the visits waiting in the buffers
// aggregated first.
func (a *Aggregator) Metrics() Metrics {
	a.aggMu.Lock()
	a.drainLocked()
	pending := a.agg.links()
	a.aggMu.Unlock()
	return Metrics{
		Recorded: a.recorded.Load(), Dropped: a.dropped.Load(), Flushes: a.flushes.Load(),
		FlushErrors: a.flushErrors.Load(), FlushedVisits: a.flushedVisits.Load(), PendingLinks: int64(pending),
	}
}

// drainLoop aggregates the buffers a little while after visits arrive,
// and asks for a flush once FlushLinks links are pending.
func (a *Aggregator) drainLoop() {
	defer close(a.drainDone)
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-a.drainKick:
			t.Reset(drainDelay)
			select {
			case <-a.stop:
				return
			case <-t.C:
			case <-a.drainNow:
				t.Stop()
			}
		case <-a.drainNow:
		}
		a.aggMu.Lock()
		a.drainLocked()
		full := a.agg.links() >= a.cfg.FlushLinks
		a.aggMu.Unlock()
		if full {
			a.kick(a.flushKick)
		}
	}
}

// drainLocked aggregates every buffered record. The caller holds aggMu.
func (a *Aggregator) drainLocked() {
	a.bufMu.Lock()
	buf := a.buf
	if len(buf) == 0 {
		a.bufMu.Unlock()
		return
	}
	a.buf, a.lastRec = a.spare, -1
	a.bufMu.Unlock()
	var v rawVisit
	done := 0
	pacer := pace.New(pacerPause, pacerNow)
	for b := buf; len(b) > 0; {
		b = nextRecord(b, &v)
		a.add(&v)
		if done++; done%paceEvery == 0 {
			pacer.Step()
		}
	}
	a.spare = buf[:0]
}

// add aggregates one visit. The caller holds aggMu.
func (a *Aggregator) add(v *rawVisit) {
	g := a.agg
	ei := g.find(v.hash, v.id)
	n := v.n
	if ei < 0 && g.links() >= a.cfg.MaxLinks || len(g.pairs)+numDims > maxPairsPerLink*a.cfg.MaxLinks {
		a.dropped.Add(uint64(n))
		if v.flags&flagLimited != 0 {
			a.forget(string(v.id), int64(n))
		}
		return
	}
	if ei < 0 {
		ei = g.insert(v.hash, v.id)
	}
	e := &g.entries[ei]
	a.recorded.Add(uint64(n))
	e.total += n
	bot := v.flags&flagBot != 0
	if bot {
		e.bots += n
	}
	if v.flags&flagLimited != 0 {
		e.limited = true
	}
	e.created = max(e.created, v.created)
	d := &g.dict
	h := v.hour
	g.count(ei, dimHour, d.key(shortener.KindHour, d.fixedName(fixedHour), h, bot), n)
	g.count(ei, dimReferrer, d.key(shortener.KindReferrer, d.referrer(v.host), h, bot), n)
	agent, os, device := d.agent(v)
	kind := shortener.KindBrowser
	if bot {
		kind = shortener.KindBot
	}
	g.count(ei, dimAgent, d.key(kind, agent, h, bot), n)
	g.count(ei, dimOS, d.key(shortener.KindOS, os, h, bot), n)
	g.count(ei, dimDevice, d.key(shortener.KindDevice, device, h, bot), n)
	switch {
	case v.flags&flagCountry != 0:
		g.count(ei, dimCountry, d.key(shortener.KindCountry, d.country(uint16(v.ip[0])<<8|uint16(v.ip[1])), h, bot), n)
	case v.ip != nil && a.cfg.Geo != nil:
		if c := a.geo.country(a.cfg.Geo, a.seed, v.ip); len(c) == 2 {
			g.count(ei, dimCountry, d.key(shortener.KindCountry, d.country(uint16(c[0])<<8|uint16(c[1])), h, bot), n)
		}
	}
	for i, u := range v.utm {
		if u != nil {
			g.count(ei, dimUTM+i, d.key(shortener.KindUTMSource+shortener.VisitKind(i), d.utm(i, u), h, bot), n)
		}
	}
}

// forget stops counting n visits of a limited link as pending: they were
// dropped.
func (a *Aggregator) forget(id string, n int64) {
	a.limMu.Lock()
	c := a.lim[id]
	if c == nil {
		c = &limCount{}
		a.lim[id] = c
	}
	c.taken += n
	a.limMu.Unlock()
}

func (a *Aggregator) flushLoop() {
	defer close(a.done)
	t := time.NewTicker(a.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
		case <-a.flushKick:
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

	a.aggMu.Lock()
	a.drainLocked()
	if a.failed != nil {
		a.agg.addBatch(a.failed)
		a.failed = nil
	}
	if a.agg.links() == 0 {
		a.aggMu.Unlock()
		return nil
	}
	b := &a.batch
	a.agg.build(b)
	a.aggMu.Unlock()

	// Visits of limited links being written no longer count as pending:
	// a reader that sees them stored never counts them twice.
	a.limMu.Lock()
	for i := range b.Links {
		if l := &b.Links[i]; l.Limited {
			c := a.lim[l.ID]
			if c == nil {
				c = &limCount{}
				a.lim[l.ID] = c
			}
			c.taken += l.Total
		}
	}
	a.limMu.Unlock()

	err := a.cfg.Store.AddVisits(ctx, b)

	var written, lost uint64
	var failed []shortener.LinkVisits
	for i := range b.Links {
		l := &b.Links[i]
		switch {
		case l.Applied:
			written += uint64(l.Total)
		case len(failed) >= a.cfg.MaxLinks:
			lost += uint64(l.Total)
		default:
			failed = append(failed, *l)
		}
	}
	a.limMu.Lock()
	for i := range failed {
		if l := &failed[i]; l.Limited {
			a.lim[l.ID].taken -= l.Total // pending again
		}
	}
	for id, c := range a.lim {
		if c.recorded == c.taken {
			delete(a.lim, id)
		}
	}
	a.limMu.Unlock()
	if len(failed) > 0 {
		// The next flush adds failed to its aggregate before it builds
		// the next batch into b's memory, which failed shares.
		a.aggMu.Lock()
		a.failed = &shortener.VisitBatch{Keys: b.Keys, Links: failed}
		a.aggMu.Unlock()
	}

	a.flushedVisits.Add(written)
	a.dropped.Add(lost)
	if err != nil {
		a.flushErrors.Add(1)
		a.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "visits flush failed; retrying with the next batch",
			slog.Int("links", len(b.Links)), slog.Int("unwritten_links", len(failed)), slog.String("error", err.Error()))
		return err
	}
	a.flushes.Add(1)
	return nil
}

// Close stops the drainer and the flusher and flushes everything pending,
// retrying a failed batch until ctx is done. Visits recorded after Close
// are not counted. It returns an error if some visits could not be
// stored.
func (a *Aggregator) Close(ctx context.Context) error {
	a.close.Do(func() {
		a.closed.Store(true)
		close(a.stop)
	})
	<-a.done
	<-a.drainDone
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

// countryCode reports whether c is an ISO 3166-1 alpha-2 code: two
// capital letters.
func countryCode(c string) bool {
	return len(c) == 2 && 'A' <= c[0] && c[0] <= 'Z' && 'A' <= c[1] && c[1] <= 'Z'
}

// geoCache remembers the countries of recent client addresses (a GeoIP
// lookup decodes a database record).
type geoCache [256]struct {
	ip   [net.IPv6len]byte
	n    uint8
	code string
}

func (c *geoCache) country(g Geo, seed maphash.Seed, ip net.IP) string {
	s := &c[maphash.Bytes(seed, ip)&255]
	if s.n == uint8(len(ip)) && string(s.ip[:s.n]) == string(ip) {
		return s.code
	}
	s.code = g.Country(ip)
	s.n = uint8(copy(s.ip[:], ip))
	return s.code
}
