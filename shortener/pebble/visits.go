package pebble

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/linkgate/linkgate/internal/pace"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/internal/statsrec"
)

var _ shortener.VisitRangeStore = (*Store)(nil)

// visitChunk is how many links AddVisits commits at a time, paced between
// commits (internal/pace): on a server with one core (GOMAXPROCS=1) a
// flush of 20,000 links in one commit held the core while pebble applied
// the whole batch to its memtable (about 10 ms, until the runtime
// preempted it), and every redirect arriving meanwhile waited for it. A
// yield (runtime.Gosched) between commits was not enough: in a runtime
// trace of make bench-visits' fixed rate over a million links the flush
// still ran 1.1–4.2 ms chunks back to back, the redirects getting the P
// only between them (docs/visits.md, "Visit flushes paced").
const visitChunk = 512

// Retention of the bucket records (vrecord.go): a day beyond what queries
// may ask for (shortener.StatsQuery.Resolve), so a query at the edge finds
// its first bucket whole.
const (
	keepHours = uint32(shortener.HourRetention/time.Hour) + 24
	keepDays  = uint32(shortener.DayRetention/(24*time.Hour)) + 1
)

// AddVisits adds a batch: per link that exists, a Merge of its lifetime
// totals and of a bucket record into its hour's and its day's keys, plus
// per chunk the records of the scopes its links belong to (all links,
// their domains, their tags), committed visitChunk links at a time. Every
// commit but the last is unsynced and the last is synced, which makes the
// write-ahead log durable up to it, so a batch costs one fsync whatever
// its size; a link is marked Applied once the commit holding it succeeds
// (it is in the store and must not be retried), so after an error the
// links of the committed chunks are Applied and the rest are not. Visits
// of links deleted meanwhile are dropped, and so are those of an earlier
// link under the same id (their CreatedAt differs from the link's). A
// batch of the lifetime form (shortener.NewVisitBatch) is taken in the
// hourly form (VisitBatch.HourlyFrom).
//
// The links of a chunk are first looked up in the read index together
// (index.touch): checked one by one among a million links, each waited
// for two cache misses in turn (BenchmarkIndexGetBatch: 470–640 ns a
// link, 250–330 ns touched first).
func (s *Store) AddVisits(ctx context.Context, batch *shortener.VisitBatch) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("add visits: %w", err)
	}
	if !batch.Hourly() {
		orig, hourly := batch, batch.HourlyFrom(s.statsClock())
		defer func() {
			for i := range orig.Links {
				orig.Links[i].Applied = hourly.Links[i].Applied
			}
		}()
		batch = hourly
	}
	if err := s.foldSpans(); err != nil {
		return unavailable("add visits", err)
	}
	s.visitsMu.RLock()
	defer s.visitsMu.RUnlock()
	if s.closed.Load() {
		return unavailable("add visits", errClosed)
	}
	if err := s.pruneVisits(); err != nil {
		return unavailable("add visits", err)
	}
	b := s.db.NewBatch()
	defer func() { b.Close() }()
	w := visitWriter{names: make([][]byte, len(batch.Keys)), scopes: map[string]*scopeAcc{}, floor: s.spanFloor.Load()}
	for i, k := range batch.Keys {
		w.names[i] = []byte(k.Name)
	}
	from := 0         // the first link of the chunk being built
	unsynced := false // a chunk before it was committed without a sync
	var ids []string  // the chunk's, to touch
	var hs [visitChunk]uint64
	pacer := pace.New(s.pause, s.now)
	for i := range batch.Links {
		if i == from && s.ixOn.Load() {
			ids = ids[:0]
			for j := from; j < min(from+visitChunk, len(batch.Links)); j++ {
				ids = append(ids, batch.Links[j].ID)
			}
			s.ix.touch(ids, hs[:])
		}
		l := &batch.Links[i]
		switch m, found, err := s.linkMeta(l.ID); {
		case err != nil:
			return unavailable("add visits", err)
		case !found:
		case l.CreatedAt != 0 && m.created != 0 && m.created != l.CreatedAt:
			// visits of an earlier link under the id, deleted meanwhile
		default:
			if err := w.link(b, batch, l, m); err != nil {
				return unavailable("add visits", err)
			}
		}
		last := i == len(batch.Links)-1
		if !last && i-from < visitChunk-1 {
			continue
		}
		if err := w.flushScopes(b); err != nil {
			return unavailable("add visits", err)
		}
		o := pebbledb.NoSync
		if last {
			o = pebbledb.Sync
			if b.Empty() && unsynced {
				// Nothing left to merge, but the chunks before are
				// not synced yet: a log-only record makes the commit.
				if err := b.LogData(nil, nil); err != nil {
					return unavailable("add visits", err)
				}
			}
		}
		if err := s.commitVisits(b, o, batch.Links[from:i+1]); err != nil {
			return unavailable("add visits", err)
		}
		if !last {
			unsynced = unsynced || !b.Empty()
			b.Close()
			b = s.db.NewBatch()
			from = i + 1
			pacer.Step()
		}
	}
	return nil
}

// visitWriter builds the merges of one AddVisits.
type visitWriter struct {
	names  [][]byte // the batch's key names, converted once
	scopes map[string]*scopeAcc
	es     []ventry
	hours  []int32
	key    []byte
	rec    []byte
	span   []byte
	// floor: the span floor (vbase.go), below which no span record is
	// written; spanned: what the last buckets call wrote into span records.
	floor   uint32
	spanned shortener.PeopleBots
}

// scopeAcc is what a chunk adds to one scope's bucket: its entries kept
// sorted as links add theirs (sorted, a few each), merged in one pass
// while they are few; beyond scopeMerged, appended and sorted once by
// flushScopes (appending every link's entries and sorting a chunk's
// thousands at the end was most of the flush's own time over a million
// links).
type scopeAcc struct {
	people, bots int64
	es, spare    []ventry
	unsorted     bool
}

const scopeMerged = 64

// add adds a link's counts and its sorted entries es.
func (acc *scopeAcc) add(people, bots int64, es []ventry) {
	acc.people += people
	acc.bots += bots
	if acc.unsorted || len(acc.es)+len(es) > scopeMerged {
		acc.es, acc.unsorted = append(acc.es, es...), true
		return
	}
	acc.es, acc.spare = mergeEntries(acc.spare[:0], acc.es, es), acc.es
}

// link adds the merges of link l (of meta m) of batch to b, and its
// counts to the scopes of the chunk: its totals only if it has a visit
// limit (vbase.go), else into its base record only what its span records
// do not get (none but visits of days before the span floor: late ones).
func (w *visitWriter) link(b *pebbledb.Batch, batch *shortener.VisitBatch, l *shortener.LinkVisits, m meta) error {
	if err := w.buckets(b, batch, l, m.tags, resHour, resDay); err != nil {
		return err
	}
	if !m.limited {
		return w.rest(b, l.ID, l.Total, l.Bots)
	}
	t := totals{total: l.Total, bots: l.Bots}
	for _, c := range l.Counts {
		day := uint32(batch.Keys[c.Key].Hour)/24 + 1
		if t.first == 0 || day < t.first {
			t.first = day
		}
		t.last = max(t.last, day)
	}
	w.rec = appendTotals(w.rec[:0], t)
	w.key = appendKey(w.key[:0], kindStats, l.ID)
	return b.Merge(w.key, w.rec, nil)
}

// rest merges into the base record of id what of total visits (bots of
// them) the last buckets call did not write into span records, if any.
func (w *visitWriter) rest(b *pebbledb.Batch, id string, total, bots int64) error {
	t := totals{total: total - w.spanned.People - w.spanned.Bots, bots: bots - w.spanned.Bots, base: true}
	if t == (totals{base: true}) {
		return nil
	}
	w.key = appendKey(w.key[:0], kindStats, id)
	return b.Merge(w.key, appendTotals(w.rec[:0], t), nil)
}

// buckets adds the bucket records of link l of batch (of resolutions
// res; with days, its span records too) to b, and its counts to the
// scopes of the chunk.
func (w *visitWriter) buckets(b *pebbledb.Batch, batch *shortener.VisitBatch, l *shortener.LinkVisits, tags []string, res ...byte) error {
	w.hours = w.hours[:0]
	for _, c := range l.Counts {
		if h := batch.Keys[c.Key].Hour; !containsHour(w.hours, h) {
			w.hours = append(w.hours, h)
		}
	}
	domain, _ := shortener.SplitKey(l.ID)
	w.spanned = shortener.PeopleBots{}
	for _, h := range w.hours {
		var people, bots int64
		w.es = w.es[:0]
		for _, c := range l.Counts {
			k := &batch.Keys[c.Key]
			switch {
			case k.Hour != h:
			case k.Kind == shortener.KindHour && k.Bot:
				bots += c.N
			case k.Kind == shortener.KindHour:
				people += c.N
			default:
				w.es = append(w.es, ventry{kind: k.Kind, bot: k.Bot, name: w.names[c.Key], n: c.N})
			}
		}
		w.es = sortEntries(w.es)
		w.rec = appendBrec(w.rec[:0], people, bots, w.es)
		for _, r := range res {
			bucket := uint32(h)
			if r == resDay {
				bucket /= 24
			}
			w.key = linkBucketKey(w.key[:0], r, bucket, l.ID)
			if err := b.Merge(w.key, w.rec, nil); err != nil {
				return err
			}
			if r == resDay && bucket/spanDays >= w.floor {
				w.spanned.Add(shortener.PeopleBots{People: people, Bots: bots})
				w.key = linkBucketKey(w.key[:0], resSpan, bucket/spanDays, l.ID)
				w.span = appendSpanDay(append(w.span[:0], spanVersion), byte(bucket%spanDays), people, bots)
				if err := b.Merge(w.key, w.span, nil); err != nil {
					return err
				}
			}
			w.scope(r, bucket, subjectAll, "", people, bots)
			w.scope(r, bucket, subjectDomain, domain, people, bots)
			for _, t := range tags {
				w.scope(r, bucket, subjectTag, t, people, bots)
			}
		}
	}
	return nil
}

func containsHour(hs []int32, h int32) bool {
	for _, x := range hs {
		if x == h {
			return true
		}
	}
	return false
}

// scope adds the bucket record just built (w.es) to a scope's.
func (w *visitWriter) scope(res byte, bucket uint32, subject byte, name string, people, bots int64) {
	w.key = bucketKey(w.key[:0], res, bucket, subject, name)
	acc := w.scopes[string(w.key)]
	if acc == nil {
		acc = &scopeAcc{}
		w.scopes[string(w.key)] = acc
	}
	acc.add(people, bots, w.es)
}

// flushScopes adds the chunk's scope records to b, in the commit of the
// links they count: a chunk is applied whole or not at all. The scopes
// are kept, emptied, for the next chunk (which mostly counts the same).
func (w *visitWriter) flushScopes(b *pebbledb.Batch) error {
	for k, acc := range w.scopes {
		if acc.people == 0 && acc.bots == 0 && len(acc.es) == 0 {
			continue
		}
		if acc.unsorted {
			acc.es = sortEntries(acc.es)
		}
		w.rec = appendBrec(w.rec[:0], acc.people, acc.bots, acc.es)
		if err := b.Merge([]byte(k), w.rec, nil); err != nil {
			return err
		}
		acc.people, acc.bots, acc.es, acc.unsorted = 0, 0, acc.es[:0], false
	}
	return nil
}

// linkBucketKey appends the key of a link's bucket record: the subject
// is the link's key as appendKey lays it out ('l' domain 0x00 id), so a
// domain's links are a prefix of a bucket's.
func linkBucketKey[T string | []byte](dst []byte, res byte, bucket uint32, id T) []byte {
	dst = append(dst, kindVisits, res)
	dst = binary.BigEndian.AppendUint32(dst, bucket)
	return appendKey(dst, subjectLink, id)
}

// statsClock is the clock of the retention and of VisitStats' days.
func (s *Store) statsClock() time.Time {
	if s.visitClock != nil {
		return s.visitClock()
	}
	return time.Now()
}

// pruneVisits drops the bucket records older than the retention once an
// hour: two range deletions (not synced; the next synced commit makes
// them durable, and a lost one is done again). The span records whose
// days all are are folded into the base records (foldSpans).
func (s *Store) pruneVisits() error {
	hour := uint32(s.statsClock().Unix() / 3600)
	if s.prunedHour.Load() == hour {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	day := hour / 24
	for _, r := range [3]struct {
		res    byte
		before uint32
	}{{resHour, hour - min(hour, keepHours)}, {resDay, day - min(day, keepDays)}} {
		lo := bucketKey[string](nil, r.res, 0, 0, "")[:2]
		hi := bucketKey[string](nil, r.res, r.before, 0, "")[:visitsKeyPrefix]
		if err := b.DeleteRange(lo, hi, nil); err != nil {
			return err
		}
	}
	if err := s.commit(b, pebbledb.NoSync); err != nil {
		return err
	}
	s.prunedHour.Store(hour)
	return nil
}

// commitVisits commits b (nothing if it is empty), the visits of links,
// with o, and marks links Applied.
func (s *Store) commitVisits(b *pebbledb.Batch, o *pebbledb.WriteOptions, links []shortener.LinkVisits) error {
	if !b.Empty() {
		if s.visitChunkHook != nil {
			if err := s.visitChunkHook(len(links), o.Sync); err != nil {
				return err
			}
		}
		if err := s.commit(b, o); err != nil {
			return err
		}
	}
	for i := range links {
		links[i].Applied = true
	}
	return nil
}

// VisitCounts implements shortener.VisitRangeStore: a bucket record per
// bucket of the range (the link's, or the scope's: all links, a domain's,
// a tag's), and for all links every link's records of each bucket, for
// the top links.
func (s *Store) VisitCounts(ctx context.Context, q shortener.StatsQuery) (shortener.VisitCounts, error) {
	if s.closed.Load() {
		return shortener.VisitCounts{}, unavailable("visit counts", errClosed)
	}
	c := shortener.NewVisitCounts(&q)
	res, first := bucketOf(&q)
	var key []byte
	for i := range c.Series {
		if err := ctx.Err(); err != nil {
			return c, err
		}
		switch {
		case q.ID != "":
			key = linkBucketKey(key[:0], res, first+uint32(i), q.ID)
		case q.Tag != "":
			key = bucketKey(key[:0], res, first+uint32(i), subjectTag, q.Tag)
		case q.DomainSet:
			key = bucketKey(key[:0], res, first+uint32(i), subjectDomain, q.Domain)
		default:
			key = bucketKey(key[:0], res, first+uint32(i), subjectAll, "")
		}
		v, closer, found, err := s.get(key)
		if err != nil {
			return c, unavailable("visit counts", err)
		}
		if found {
			err = addBrec(&c, i, v)
			closer.Close()
			if err != nil {
				return c, fmt.Errorf("visit counts: %w", err)
			}
		}
	}
	if q.ID == "" {
		if err := s.linkCounts(ctx, &q, res, first, &c); err != nil {
			return c, err
		}
	}
	return c, nil
}

// bucketOf returns the records a resolved query reads, and its first
// bucket.
func bucketOf(q *shortener.StatsQuery) (res byte, first uint32) {
	if q.Granularity == shortener.GranularityHour {
		return resHour, uint32(q.From.Unix() / 3600)
	}
	return resDay, uint32(q.From.Unix() / 86400)
}

// linkCounts sets c.Links to the links' visits in q's range, their series
// counts only (the q.Top busiest, shortener.VisitCounts, when q.Top > 0;
// every link's otherwise): by hour, the link records of every hour bucket;
// by day, the links' span records (at most two per link for 30 days:
// a million links' day records, with their dimensions, took 6–8 s of
// CPU to read), or with s.scanDayRecords their day records as format 2
// read them (the benchmark's anchor). Of a domain's links only with a
// domain, of a tag's only with a tag.
func (s *Store) linkCounts(ctx context.Context, q *shortener.StatsQuery, res byte, first uint32, c *shortener.VisitCounts) error {
	last := first + uint32(len(c.Series)) - 1
	rec, lo, hi := res, first, last
	if res == resDay && !s.scanDayRecords {
		rec, lo, hi = resSpan, first/spanDays, last/spanDays
	}
	h, err := s.linkIters(rec, lo, hi, q)
	if err != nil {
		return unavailable("visit counts", err)
	}
	top := topLinks{n: q.Top, f: q.Bots}
	var sum shortener.PeopleBots
	err = mergeLinks(ctx, h, func(key, v []byte) error {
		if rec != resSpan {
			people, bots, _, err := brecHeader(v)
			sum.Add(shortener.PeopleBots{People: people, Bots: bots})
			return err
		}
		start := binary.BigEndian.Uint32(key[2:]) * spanDays
		pb, err := spanSum(v, byte(max(first, start)-start), byte(min(last, start+spanDays-1)-start))
		sum.Add(pb)
		return err
	}, func(link []byte) {
		switch {
		case sum == shortener.PeopleBots{}:
		case q.Tag != "" && !s.hasTag(linkKey(link), q.Tag):
		case q.Top > 0:
			top.offer(link, sum)
		default:
			c.Links[linkKey(link)] = sum
		}
		sum = shortener.PeopleBots{}
	})
	for _, l := range top.links {
		c.Links[l.id] = l.pb
	}
	switch {
	case errors.Is(err, errCorruptVisits):
		return fmt.Errorf("visit counts: %w", err)
	case err != nil && ctx.Err() == nil:
		return unavailable("visit counts", err)
	}
	return err
}

// topLinks keeps the n busiest links offered after filter f, in
// shortener's order (busiest first, then by key): a link is named (its
// key made a string) only when it is one of them so far, and a million
// links are not put in a map (which took 0.9 s of the 1.4 s a million
// links' 30 days took to count).
type topLinks struct {
	n     int
	f     shortener.BotFilter
	links []topLink // sorted, at most n
}

type topLink struct {
	id string
	pb shortener.PeopleBots
	v  int64 // pb.Of(f)
}

// offer offers the link under pebble key link (the subject of a link
// record) with its visits pb.
func (t *topLinks) offer(link []byte, pb shortener.PeopleBots) {
	v := pb.Of(t.f)
	if v == 0 {
		return
	}
	full := len(t.links) == t.n
	if full && v < t.links[t.n-1].v {
		return
	}
	id := linkKey(link)
	if full && v == t.links[t.n-1].v && id > t.links[t.n-1].id {
		return
	}
	l := topLink{id, pb, v}
	i, _ := slices.BinarySearchFunc(t.links, l, func(a, b topLink) int {
		if c := cmp.Compare(b.v, a.v); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	t.links = slices.Insert(t.links, i, l)
	if len(t.links) > t.n {
		t.links = t.links[:t.n]
	}
}

// linkIters returns the iterators over the link records of buckets (or
// spans) lo to hi of res, of q's domain's links only with a domain, each
// at its first record (the empty ones left out).
func (s *Store) linkIters(res byte, lo, hi uint32, q *shortener.StatsQuery) (iterHeap, error) {
	var h iterHeap
	var lk, hk []byte
	for b := lo; b <= hi; b++ {
		lk = bucketKey[string](lk[:0], res, b, subjectLink, "")
		if q.DomainSet {
			lk = append(append(lk, q.Domain...), 0)
		}
		hk = append(hk[:0], lk...)
		hk[len(hk)-1]++
		it, err := s.db.NewIter(&pebbledb.IterOptions{LowerBound: slices.Clone(lk), UpperBound: slices.Clone(hk)})
		if err != nil {
			h.close()
			return nil, err
		}
		if !it.First() {
			if err := it.Close(); err != nil {
				h.close()
				return nil, err
			}
			continue
		}
		h = append(h, it)
	}
	return h, nil
}

// mergeLinks reads the records of the iterators of h (linkIters) together
// in link order, one heap of iterators (each bucket's records are sorted
// by link): rec is called with every record's key and value, a link's
// records one after another, then done with the link's key (valid until
// the next call), so a link is named once rather than looked up in a map
// of every link for every record (which made a million links' 30 days
// wait on a cache miss per record). It closes the iterators.
func mergeLinks(ctx context.Context, h iterHeap, rec func(key, v []byte) error, done func(link []byte)) (err error) {
	defer func() {
		if cerr := h.close(); err == nil {
			err = cerr
		}
	}()
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
	var cur []byte // the link key being read (have: one is)
	var have bool
	for n := 0; len(h) > 0; n++ {
		if n%(1<<16) == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		it := h[0]
		k := it.Key()[visitsKeyPrefix:]
		if !have || !bytes.Equal(k, cur) {
			if have {
				done(cur)
			}
			cur, have = append(cur[:0], k...), true
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if err := rec(it.Key(), v); err != nil {
			return err
		}
		if !it.Next() {
			last := len(h) - 1
			h[0], h = h[last], h[:last]
			if err := it.Close(); err != nil {
				return err
			}
		}
		h.down(0)
	}
	if have {
		done(cur)
	}
	return nil
}

// iterHeap orders bucket iterators by the link of their current record.
type iterHeap []*pebbledb.Iterator

// close closes the iterators.
func (h iterHeap) close() error {
	var err error
	for _, it := range h {
		err = errors.Join(err, it.Close())
	}
	return err
}

func (h iterHeap) less(i, j int) bool {
	return bytes.Compare(h[i].Key()[visitsKeyPrefix:], h[j].Key()[visitsKeyPrefix:]) < 0
}

// down restores the heap order below i.
func (h iterHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// hasTag reports whether the link under key exists and has tag.
func (s *Store) hasTag(key, tag string) bool {
	m, found, err := s.linkMeta(key)
	if err != nil || !found {
		return false
	}
	for _, t := range m.tags {
		if t == tag {
			return true
		}
	}
	return false
}

// VisitStats returns the lifetime statistics of the link under id: its
// totals, and the days and breakdowns of its day records (the last
// DayRetention).
func (s *Store) VisitStats(ctx context.Context, id string) (shortener.VisitStats, error) {
	l, err := s.Get(ctx, id)
	if err != nil {
		return shortener.VisitStats{}, err
	}
	st, err := lifetimeStats(s.db, &l, s.statsClock())
	if err != nil {
		return shortener.VisitStats{}, fmt.Errorf("visit stats %q: %w", id, err)
	}
	// Get counted the stored visits into a limited link's Visits; the
	// rest of Visits is what the link was created with (imports).
	if l.MaxVisits > 0 {
		l.Visits -= st.Total
	}
	st.Total += l.Visits
	st.Bound()
	return st, nil
}

// lifetimeStats reads the lifetime statistics of link l from r (the
// store or a snapshot of it): its totals and its day records up to now —
// of a complete record, the days between its first and last; of a base
// record, the days its span records have from the record's first day
// (vrecord.go).
func lifetimeStats(r pebbledb.Reader, l *shortener.Link, now time.Time) (shortener.VisitStats, error) {
	var st shortener.VisitStats
	id := l.ID
	today := uint32(now.Unix() / 86400)
	from, to := today-min(today, keepDays), today
	var days []uint32 // of a base record
	t, complete, err := lifetimeTotals(r, id, l.MaxVisits > 0, today, func(d uint32) {
		if d >= from && d <= to {
			days = append(days, d)
		}
	})
	if err != nil || t.total == 0 && t.bots == 0 {
		return st, err
	}
	st.Total, st.Bots = t.total, t.bots
	if t.first != 0 { // the days it has records for (complete), or from (base)
		from, to = max(from, t.first-1), min(to, t.last-1)
	}
	if !complete {
		days = slices.DeleteFunc(days, func(d uint32) bool { return d < from })
		from, to = 1, 0
	}
	for day := from; day <= to; day++ {
		days = append(days, day)
	}
	q := shortener.StatsQuery{ID: id, Granularity: shortener.GranularityDay}
	c := shortener.NewVisitCounts(&q)
	c.Series = make([]shortener.PeopleBots, 1)
	var key []byte
	for _, day := range days {
		key = linkBucketKey(key[:0], resDay, day, id)
		v, closer, err := r.Get(key)
		if errors.Is(err, pebbledb.ErrNotFound) {
			continue
		} else if err != nil {
			return st, err
		}
		c.Series[0] = shortener.PeopleBots{}
		err = addBrec(&c, 0, v)
		closer.Close()
		if err != nil {
			return st, err
		}
		if n := c.Series[0].People + c.Series[0].Bots; n > 0 {
			if st.Days == nil {
				st.Days = shortener.Breakdown{}
			}
			st.Days[time.Unix(int64(day)*86400, 0).UTC().Format(shortener.DayFormat)] = n
		}
	}
	for kind, d := range map[shortener.VisitKind]shortener.Dimension{shortener.KindReferrer: shortener.DimReferrer,
		shortener.KindBrowser: shortener.DimBrowser, shortener.KindBot: shortener.DimBot, shortener.KindCountry: shortener.DimCountry} {
		for name, n := range c.Dims[d] {
			bd := st.Breakdown(kind)
			if *bd == nil {
				*bd = shortener.Breakdown{}
			}
			(*bd)[name] += n.People + n.Bots
		}
	}
	return st, nil
}

// storedVisits returns the stored visit total of id, a link with a visit
// limit (its record is complete, vbase.go); kb is a key buffer.
func storedVisits[T string | []byte](s *Store, kb *[]byte, id T) (int64, error) {
	*kb = appendKey((*kb)[:0], kindStats, id)
	v, closer, found, err := s.get(*kb)
	if err != nil || !found {
		return 0, err
	}
	defer closer.Close()
	t, err := decodeTotals(v)
	return t.total, err
}

func decodeStatsV1(v []byte) (shortener.VisitStats, error) { return statsrec.Decode(v) }

// merger adds records: the operands of a lifetime totals key are totals
// records, those of a bucket key bucket records, those of a span key span
// records, and so are their sums.
// Other kinds of keys have no merge operands. (Its name is format 1's:
// pebble refuses a store opened with another merger's name.)
var merger = &pebbledb.Merger{
	Name: "linkgate.visits.v1",
	Merge: func(key, value []byte) (pebbledb.ValueMerger, error) {
		if len(key) == 0 || key[0] != kindStats && key[0] != kindVisits {
			return nil, fmt.Errorf("merge operand under key %q, which is not visit statistics", key)
		}
		m := mergers.Get().(*visitsMerger)
		m.add = addTotals
		if key[0] == kindVisits {
			m.add = mergeBrec
			if len(key) > 1 && key[1] == resSpan {
				m.add = mergeSpan
			}
		}
		m.acc = append(m.acc[:0], value...)
		return m, nil
	},
}

// mergers are reused: Finish gives pebble the merger as the Closer of its
// result, and Close puts it back.
var mergers = sync.Pool{New: func() any { return new(visitsMerger) }}

// visitsMerger adds records as pebble hands them over, into acc. The
// first operand is kept as it is, not decoded: a key with a single
// operand is what most keys of a flush or a compaction are.
type visitsMerger struct {
	add        func(dst, a, b []byte) ([]byte, error) // of the key's records
	acc, spare []byte
}

func (m *visitsMerger) merge(v []byte) error {
	out, err := m.add(m.spare[:0], m.acc, v)
	if err != nil {
		return err
	}
	m.acc, m.spare = out, m.acc
	return nil
}

// addTotals appends the sum of two totals records (a format-1 record
// counts its totals).
func addTotals(dst, a, b []byte) ([]byte, error) {
	ta, err := decodeTotals(a)
	if err != nil {
		return dst, err
	}
	tb, err := decodeTotals(b)
	if err != nil {
		return dst, err
	}
	if ta.base != tb.base {
		// Records of both kinds are never merged (a link's record
		// changes kind by a Set, under visitsMu held exclusively).
		return dst, errCorruptVisits
	}
	if a[0] == 1 || b[0] == 1 {
		// A format-1 record does not say which days it has: neither
		// does the sum.
		ta.first, tb.first = 0, 0
	}
	ta.add(tb)
	return appendTotals(dst, ta), nil
}

// MergeNewer and MergeOlder add: the sum does not depend on the order.
func (m *visitsMerger) MergeNewer(v []byte) error { return m.merge(v) }
func (m *visitsMerger) MergeOlder(v []byte) error { return m.merge(v) }

func (m *visitsMerger) Finish(includesBase bool) ([]byte, io.Closer, error) {
	return m.acc, m, nil
}

// Close returns m to the pool once pebble is done with its result.
func (m *visitsMerger) Close() error {
	mergers.Put(m)
	return nil
}

// String is for pebble's debugging output.
func (m *visitsMerger) String() string { return fmt.Sprintf("visits(%d bytes)", len(m.acc)) }

// meta is what AddVisits needs of a link.
type meta struct {
	created int64 // Unix seconds, 0: none
	tags    []string
	limited bool // it has a visit limit
}

// linkMeta returns the CreatedAt and tags of the link under id,
// found=false if there is none.
func (s *Store) linkMeta(id string) (m meta, found bool, err error) {
	kb := s.keys.Get().(*[]byte)
	defer s.keys.Put(kb)
	v, release, found, err := s.value(kb, []byte(id))
	if !found || err != nil {
		return meta{}, found, err
	}
	defer release()
	l, _, tags, err := decodeValue(v)
	if err != nil {
		return meta{}, true, err
	}
	if !l.CreatedAt.IsZero() {
		m.created = l.CreatedAt.Unix()
	}
	m.limited = l.MaxVisits > 0
	for len(tags) > 0 {
		n, k := binary.Uvarint(tags)
		m.tags = append(m.tags, string(tags[k:k+int(n)])) // checked by decodeValue
		tags = tags[k+int(n):]
	}
	return m, true, nil
}
