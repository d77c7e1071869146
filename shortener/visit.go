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

// IsZero reports whether s counts nothing.
func (s *VisitStats) IsZero() bool {
	if s.Total != 0 || s.Bots != 0 {
		return false
	}
	for kind := range NumVisitKinds {
		if len(*s.Breakdown(kind)) > 0 {
			return false
		}
	}
	return true
}

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
	slices.SortFunc(out, countCmp)
	return out
}

// VisitKind names a breakdown of VisitStats.
type VisitKind uint8

// The breakdowns, in the order of VisitStats' fields.
const (
	KindDay       VisitKind = iota // VisitStats.Days
	KindReferrer                   // VisitStats.Referrers
	KindBrowser                    // VisitStats.Browsers
	KindBot                        // VisitStats.BotAgents
	KindCountry                    // VisitStats.Countries
	NumVisitKinds                  // how many kinds VisitStats keeps

	// Kinds of hourly counts only (VisitKey.Hour set): the series, and
	// the dimensions VisitStats does not keep.
	KindHour        = NumVisitKinds + iota - 6 // a link's visits in the hour (Name "")
	KindOS                                     // operating system family
	KindDevice                                 // desktop, mobile, tablet, bot
	KindUTMSource                              // utm_source; NoneKey when absent
	KindUTMMedium                              // utm_medium
	KindUTMCampaign                            // utm_campaign
	NumKinds                                   // every kind
)

// KindDimension maps a kind to the Dimension it counts (ok=false for the
// day and hour kinds).
func KindDimension(k VisitKind) (Dimension, bool) {
	switch k {
	case KindReferrer:
		return DimReferrer, true
	case KindBrowser:
		return DimBrowser, true
	case KindBot:
		return DimBot, true
	case KindCountry:
		return DimCountry, true
	case KindOS:
		return DimOS, true
	case KindDevice:
		return DimDevice, true
	case KindUTMSource:
		return DimUTMSource, true
	case KindUTMMedium:
		return DimUTMMedium, true
	case KindUTMCampaign:
		return DimUTMCampaign, true
	}
	return 0, false
}

// Breakdown returns the breakdown of s that kind names.
func (s *VisitStats) Breakdown(kind VisitKind) *Breakdown {
	switch kind {
	case KindDay:
		return &s.Days
	case KindReferrer:
		return &s.Referrers
	case KindBrowser:
		return &s.Browsers
	case KindBot:
		return &s.BotAgents
	default:
		return &s.Countries
	}
}

// VisitKey is a key of one of the breakdowns: a day, a referrer host…
//
// A key with an Hour counts visits of that hour (hours since 1970-01-01
// UTC), of people or (Bot) of bots: the hourly form the visit aggregator
// writes, which a range store (VisitRangeStore) keeps as it is. A key
// without an Hour is of the lifetime form VisitStats keeps (kinds below
// NumVisitKinds only). A batch is in one form or the other: Legacy turns
// the hourly form into the lifetime one.
type VisitKey struct {
	Kind VisitKind
	Name string
	Hour int32
	Bot  bool
}

// HourlyFrom returns a batch of the lifetime form in the hourly form, for
// a store that keeps hours and days: each day's count as people's visits
// in that day's first hour; the breakdowns (bots under KindBot as bots,
// the others as people's) in the first hour of the link's latest day, or
// of now's day without days. Lifetime statistics do not say more. Its
// Links are copies, in the same order.
func (b *VisitBatch) HourlyFrom(now time.Time) *VisitBatch {
	if b.Hourly() {
		return b
	}
	out := &VisitBatch{Links: make([]LinkVisits, len(b.Links))}
	index := map[VisitKey]uint32{}
	key := func(k VisitKey) uint32 {
		i, ok := index[k]
		if !ok {
			i = uint32(len(out.Keys))
			index[k] = i
			out.Keys = append(out.Keys, k)
		}
		return i
	}
	for i, l := range b.Links {
		latest := int32(now.Unix() / 86400)
		seen := false
		for _, c := range l.Counts {
			if k := b.Keys[c.Key]; k.Kind == KindDay {
				if t, err := time.Parse(DayFormat, k.Name); err == nil && (!seen || int32(t.Unix()/86400) > latest) {
					latest, seen = int32(t.Unix()/86400), true
				}
			}
		}
		counts := make([]KeyCount, 0, len(l.Counts))
		for _, c := range l.Counts {
			k := b.Keys[c.Key]
			switch {
			case k.Kind == KindDay:
				t, err := time.Parse(DayFormat, k.Name)
				if err != nil || t.Unix() < 0 {
					continue
				}
				k = VisitKey{Kind: KindHour, Hour: int32(t.Unix() / 3600)}
			default:
				k = VisitKey{Kind: k.Kind, Name: k.Name, Hour: latest * 24, Bot: k.Kind == KindBot}
			}
			counts = append(counts, KeyCount{key(k), c.N})
		}
		l.Counts = counts
		out.Links[i] = l
	}
	return out
}

// Hourly reports whether the batch's keys are of the hourly form.
func (b *VisitBatch) Hourly() bool {
	return len(b.Keys) > 0 && b.Keys[0].Hour != 0
}

// Legacy returns the batch in the lifetime form (VisitStats' kinds, the
// hour kind as days); its Links are copies (Applied is not shared), in
// the same order. A batch already in that form is returned as it is.
func (b *VisitBatch) Legacy() *VisitBatch {
	if !b.Hourly() {
		return b
	}
	out := &VisitBatch{Links: make([]LinkVisits, len(b.Links))}
	index := map[VisitKey]uint32{}
	keyOf := make([]int64, len(b.Keys)) // index into out.Keys + 1; 0: dropped
	for i, k := range b.Keys {
		switch {
		case k.Kind == KindHour:
			k = VisitKey{Kind: KindDay, Name: time.Unix(int64(k.Hour)*3600, 0).UTC().Format(DayFormat)}
		case k.Kind < NumVisitKinds:
			k = VisitKey{Kind: k.Kind, Name: k.Name}
		default:
			continue
		}
		j, ok := index[k]
		if !ok {
			j = uint32(len(out.Keys))
			index[k] = j
			out.Keys = append(out.Keys, k)
		}
		keyOf[i] = int64(j) + 1
	}
	for i, l := range b.Links {
		counts := make([]KeyCount, 0, len(l.Counts))
		for _, c := range l.Counts {
			j := keyOf[c.Key]
			if j == 0 {
				continue
			}
			if n := slices.IndexFunc(counts, func(x KeyCount) bool { return x.Key == uint32(j-1) }); n >= 0 {
				counts[n].N += c.N
			} else {
				counts = append(counts, KeyCount{uint32(j - 1), c.N})
			}
		}
		l.Counts = counts
		out.Links[i] = l
	}
	return out
}

// KeyCount counts visits under one of a batch's keys.
type KeyCount struct {
	Key uint32 // index into VisitBatch.Keys
	N   int64
}

// LinkVisits is what one batch adds to one link's statistics.
type LinkVisits struct {
	ID          string
	Total, Bots int64
	Counts      []KeyCount // at most one per key
	// Limited marks a link with a visit limit: the store must make these
	// visits part of the count Get and AppendURL report before AddVisits
	// returns (other links' counts there may lag; VisitStats has them all
	// at once).
	Limited bool
	// CreatedAt is the visited link's CreatedAt in Unix seconds, 0 when
	// unknown. A store may use it to keep the visits of a link apart from
	// those of an earlier link under the same id that was deleted while
	// its visits were pending.
	CreatedAt int64
	// Applied is set by VisitStore.AddVisits for each link it added, so a
	// batch that failed half-way is retried without counting twice.
	Applied bool
}

// VisitBatch is what one flush of the visit aggregator adds to the store:
// per link, counters by key, with the keys written once per batch. Links
// are sorted by ID, each ID once.
type VisitBatch struct {
	Keys  []VisitKey
	Links []LinkVisits
}

// Stats returns the statistics the batch adds to its link i.
func (b *VisitBatch) Stats(i int) VisitStats {
	l := &b.Links[i]
	st := VisitStats{Total: l.Total, Bots: l.Bots}
	if b.Hourly() {
		return b.Legacy().Stats(i)
	}
	for _, c := range l.Counts {
		k := b.Keys[c.Key]
		bd := st.Breakdown(k.Kind)
		if *bd == nil {
			*bd = Breakdown{}
		}
		(*bd)[k.Name] += c.N
	}
	return st
}

// VisitDelta is a link's statistics to add, in the map form of
// VisitStats: NewVisitBatch turns deltas into a batch (tests, tools).
type VisitDelta struct {
	ID        string
	Stats     VisitStats
	Limited   bool  // see LinkVisits.Limited
	CreatedAt int64 // see LinkVisits.CreatedAt
}

// NewVisitBatch returns the batch that adds deltas; deltas of the same
// link are added together.
func NewVisitBatch(deltas ...VisitDelta) *VisitBatch {
	b := &VisitBatch{}
	keys := map[VisitKey]uint32{}
	byID := map[string]int{}
	for _, d := range deltas {
		i, ok := byID[d.ID]
		if !ok {
			i = len(b.Links)
			byID[d.ID] = i
			b.Links = append(b.Links, LinkVisits{ID: d.ID})
		}
		l := &b.Links[i]
		l.Total += d.Stats.Total
		l.Bots += d.Stats.Bots
		l.Limited = l.Limited || d.Limited
		l.CreatedAt = max(l.CreatedAt, d.CreatedAt)
		for kind := range NumVisitKinds {
			for name, n := range *d.Stats.Breakdown(kind) {
				k := VisitKey{Kind: kind, Name: name}
				ki, ok := keys[k]
				if !ok {
					ki = uint32(len(b.Keys))
					keys[k] = ki
					b.Keys = append(b.Keys, k)
				}
				if j := slices.IndexFunc(l.Counts, func(c KeyCount) bool { return c.Key == ki }); j >= 0 {
					l.Counts[j].N += n
				} else {
					l.Counts = append(l.Counts, KeyCount{ki, n})
				}
			}
		}
	}
	slices.SortFunc(b.Links, func(x, y LinkVisits) int { return cmp.Compare(x.ID, y.ID) })
	return b
}

// VisitStore is the Store's part that keeps visit statistics. The
// pebble and DynamoDB stores implement it and storetest checks it.
type VisitStore interface {
	// AddVisits adds each link's visits to its stored statistics, in as
	// few writes as the backend allows: pebble in commits of a few
	// hundred links, synced once; DynamoDB with one UpdateItem ADD per
	// link with a visit limit, the others gathered in its visit log.
	// Visits of a link that does not exist (deleted meanwhile) are dropped. It marks every
	// link it added (or dropped) Applied; on error the others are to be
	// retried. Get and AppendURL report a link's stored visits in Visits
	// at once for Limited links; for others they may lag.
	AddVisits(ctx context.Context, batch *VisitBatch) error

	// VisitStats returns the stored statistics of the link under id, zero
	// for a link without visits, ErrNotFound when there is no such link.
	VisitStats(ctx context.Context, id string) (VisitStats, error)
}

// VisitCounter is the Service's view of the in-memory visit aggregator
// (visits.Aggregator): visits recorded but not yet in the store.
type VisitCounter interface {
	// Pending returns the visits of the link id, which has a visit
	// limit, recorded but not yet in the store. Read it after the link:
	// visits the aggregator has started to write are left out, so the
	// live count (stored plus pending) may be short by one batch while
	// it is written, and never counts a visit twice.
	Pending(id []byte) int64
	// Stats returns the link's stored statistics plus those not yet
	// flushed.
	Stats(ctx context.Context, id string) (VisitStats, error)
}

// Stats returns the visit statistics of the link id of domain, the live
// ones (stored plus not yet flushed) when the Service counts visits.
func (s *Service) Stats(ctx context.Context, domain, id string) (VisitStats, error) {
	key, ok := checkedKey(domain, id)
	if !ok {
		return VisitStats{}, ErrNotFound
	}
	id = key
	var st VisitStats
	var err error
	if s.visits != nil {
		st, err = s.visits.Stats(ctx, id)
	} else {
		st, err = s.store.VisitStats(ctx, id)
	}
	if err != nil {
		return VisitStats{}, storeError("visit stats", err)
	}
	return st, nil
}

// Today returns the Days key of t.
func Today(t time.Time) string { return t.UTC().Format(DayFormat) }
