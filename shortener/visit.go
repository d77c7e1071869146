package shortener

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// Visit statistics. A redirect that is followed (GET, never HEAD or the
// seed's getFullURL) counts one visit. Visits are aggregated in memory and
// added to the store in batches (see the visits package); the store keeps,
// per link, the totals and the breakdowns below. Every breakdown is bounded
// (Bounds), so a link's statistics never grow without limit.

// Breakdown counts visits by a key: a day, a referrer host, a browser…
type Breakdown map[string]int64

// VisitStats are the statistics of one link's visits.
type VisitStats struct {
	Total     int64     // every visit, bots included (and the Visits a link was created with)
	Bots      int64     // visits by known bots and link-preview fetchers
	Days      Breakdown // "2006-01-02" (UTC) → visits
	Referrers Breakdown // referrer host → visits; DirectReferrer when none
	Browsers  Breakdown // browser family of human visits → visits
	BotAgents Breakdown // bot or link-preview fetcher → visits
	Countries Breakdown // ISO 3166 country code → visits (with a GeoIP database)
}

// Keys with a meaning of their own in breakdowns.
const (
	DirectReferrer = "(direct)" // no Referer header
	OtherKey       = "(other)"  // what bounding folded together
	UnknownKey     = "(unknown)"
)

// DayFormat is the layout of the keys of VisitStats.Days.
const DayFormat = "2006-01-02"

// Bounds of the stored breakdowns.
const (
	MaxStatDays      = 400 // the most recent days are kept
	MaxStatReferrers = 100 // the busiest referrer hosts are kept, the rest is (other)
	MaxStatKeys      = 100 // browsers, bots, countries
)

// Add adds o's counts to s.
func (s *VisitStats) Add(o VisitStats) {
	s.Total += o.Total
	s.Bots += o.Bots
	s.Days = s.Days.add(o.Days)
	s.Referrers = s.Referrers.add(o.Referrers)
	s.Browsers = s.Browsers.add(o.Browsers)
	s.BotAgents = s.BotAgents.add(o.BotAgents)
	s.Countries = s.Countries.add(o.Countries)
}

func (b Breakdown) add(o Breakdown) Breakdown {
	if len(o) == 0 {
		return b
	}
	if b == nil {
		b = make(Breakdown, len(o))
	}
	for k, n := range o {
		b[k] += n
	}
	return b
}

// Bound trims s to the stored bounds: the latest MaxStatDays days (older
// days stay counted in Total), the busiest MaxStatReferrers referrers and
// MaxStatKeys of the other breakdowns, the rest folded into OtherKey.
func (s *VisitStats) Bound() {
	if len(s.Days) > MaxStatDays {
		days := s.Days.Sorted()
		slices.SortFunc(days, func(a, b Count) int { return cmp.Compare(b.Key, a.Key) })
		for _, d := range days[MaxStatDays:] {
			delete(s.Days, d.Key)
		}
	}
	s.Referrers.fold(MaxStatReferrers)
	s.Browsers.fold(MaxStatKeys)
	s.BotAgents.fold(MaxStatKeys)
	s.Countries.fold(MaxStatKeys)
}

// fold keeps the max-1 largest counts and folds the rest into OtherKey.
func (b Breakdown) fold(max int) {
	if len(b) <= max {
		return
	}
	var other int64
	for i, c := range b.Sorted() {
		if i >= max-1 && c.Key != OtherKey {
			other += c.N
			delete(b, c.Key)
		}
	}
	b[OtherKey] += other
}

// Count is one entry of a breakdown.
type Count struct {
	Key string
	N   int64
}

// Sorted returns the entries of b, largest count first, then by key.
func (b Breakdown) Sorted() []Count {
	out := make([]Count, 0, len(b))
	for k, n := range b {
		out = append(out, Count{k, n})
	}
	slices.SortFunc(out, func(a, b Count) int {
		if c := cmp.Compare(b.N, a.N); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return out
}

// VisitDelta is what one batch adds to one link's statistics.
type VisitDelta struct {
	ID    string
	Stats VisitStats
	// Applied is set by VisitStore.AddVisits for each delta it added, so a
	// batch that failed half-way is retried without counting twice.
	Applied bool
}

// VisitStore is the Store extension that keeps visit statistics. The bolt
// and DynamoDB stores implement it and storetest checks it.
type VisitStore interface {
	// AddVisits adds each delta to its link's stored statistics (and its
	// total to the link's Visits, as Get reports it), in as few writes as
	// the backend allows: bolt in one transaction, DynamoDB with one
	// UpdateItem ADD per link. A delta for a link that does not exist
	// (deleted meanwhile) is dropped and marked Applied. It marks every
	// delta it added Applied; on error the others are to be retried.
	AddVisits(ctx context.Context, batch []VisitDelta) error

	// VisitStats returns the stored statistics of the link under id, zero
	// for a link without visits, ErrNotFound when there is no such link.
	VisitStats(ctx context.Context, id string) (VisitStats, error)
}

// VisitCounter is the Service's view of the in-memory visit aggregator
// (visits.Aggregator): visits recorded but not yet in the store.
type VisitCounter interface {
	// Gen returns the flush generation; call it before reading a link
	// from the store and pass it to Pending.
	Gen() uint64
	// Pending returns the visits of id recorded but not yet in the store
	// as of a store read made after Gen returned gen. When a flush ran in
	// between it leaves out the batch being flushed: the live count may
	// then be short by one batch, never counted twice.
	Pending(id []byte, gen uint64) int64
	// Stats returns the link's stored statistics plus those not yet
	// flushed.
	Stats(ctx context.Context, id string) (VisitStats, error)
}

// Stats returns the visit statistics of the link under id, the live ones
// (stored plus not yet flushed) when the Service counts visits.
func (s *Service) Stats(ctx context.Context, id string) (VisitStats, error) {
	if !ValidID(id) {
		return VisitStats{}, ErrNotFound
	}
	var st VisitStats
	var err error
	switch vs, ok := s.store.(VisitStore); {
	case s.visits != nil:
		st, err = s.visits.Stats(ctx, id)
	case ok:
		st, err = vs.VisitStats(ctx, id)
	default:
		return VisitStats{}, Errorf(Unavailable, "this store keeps no visit statistics")
	}
	if err != nil {
		return VisitStats{}, storeError("visit stats", err)
	}
	return st, nil
}

// Today returns the Days key of t.
func Today(t time.Time) string { return t.UTC().Format(DayFormat) }
