package shortener

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Visit statistics over a range of time (the statistics API): totals,
// people and bots, a series by hour or day, the top values of every
// dimension and, across all links, the top links. A store that keeps
// visits by hour and day (VisitRangeStore) answers them exactly; for one
// that keeps only VisitStats the Service answers from those (ReportFrom).

// Granularity is a series' bucket: an hour or a day (UTC).
type Granularity uint8

// Granularities. GranularityAuto is hour for ranges up to 48 hours, else
// day.
const (
	GranularityAuto Granularity = iota
	GranularityHour
	GranularityDay
)

// ParseGranularity parses "hour" or "day" ("": auto).
func ParseGranularity(s string) (Granularity, bool) {
	switch s {
	case "":
		return GranularityAuto, true
	case "hour":
		return GranularityHour, true
	case "day":
		return GranularityDay, true
	}
	return 0, false
}

func (g Granularity) String() string {
	switch g {
	case GranularityHour:
		return "hour"
	case GranularityDay:
		return "day"
	}
	return "auto"
}

// Step is the length of one bucket.
func (g Granularity) Step() time.Duration {
	if g == GranularityHour {
		return time.Hour
	}
	return 24 * time.Hour
}

// BotFilter says which visits a report counts.
type BotFilter uint8

// Bot filters.
const (
	BotsInclude BotFilter = iota // people and bots
	BotsExclude                  // people only
	BotsOnly                     // bots and link-preview fetchers only
)

// ParseBotFilter parses "include", "exclude" or "only" ("": include).
func ParseBotFilter(s string) (BotFilter, bool) {
	switch s {
	case "", "include":
		return BotsInclude, true
	case "exclude":
		return BotsExclude, true
	case "only":
		return BotsOnly, true
	}
	return 0, false
}

// Dimension is something a visit is counted by besides its time.
type Dimension uint8

// Dimensions. Browser counts people's visits only and Bot bots' only;
// every other dimension counts every visit (a bot's device is "bot").
const (
	DimReferrer    Dimension = iota // referrer host; DirectReferrer when none
	DimCountry                      // ISO 3166 code (--geoip or a trusted front end); UnknownKey
	DimBrowser                      // browser family of people
	DimOS                           // operating system family; UnknownKey
	DimDevice                       // desktop, mobile, tablet or bot
	DimBot                          // bot or link-preview fetcher
	DimUTMSource                    // the visitor's utm_source; NoneKey when absent
	DimUTMMedium                    // utm_medium
	DimUTMCampaign                  // utm_campaign
	NumDimensions
)

var dimensionNames = [NumDimensions]string{"referrer", "country", "browser", "os", "device", "bot", "utm_source", "utm_medium", "utm_campaign"}

func (d Dimension) String() string { return dimensionNames[d] }

// ParseDimension parses a dimension's name.
func ParseDimension(s string) (Dimension, bool) {
	i := slices.Index(dimensionNames[:], s)
	return Dimension(i), i >= 0
}

// Devices (DimDevice's values).
const (
	DeviceDesktop = "desktop"
	DeviceMobile  = "mobile"
	DeviceTablet  = "tablet"
	DeviceBot     = "bot"
)

// NoneKey stands for an absent UTM value.
const NoneKey = "(none)"

// Retention: hourly counts are kept for at least HourRetention, daily
// ones for at least DayRetention, both back from the current bucket.
const (
	HourRetention = 7 * 24 * time.Hour
	DayRetention  = 400 * 24 * time.Hour
)

// Limits of a query's top lists.
const (
	DefaultTop = 10
	MaxTop     = 100
	// DefaultRange is a query's range when from is not given.
	DefaultRange = 30 * 24 * time.Hour
)

// StatsQuery asks for the visits of one link (ID) or of all links
// (ID == "", optionally only Domain's or those tagged Tag) between From
// (inclusive) and To (exclusive).
type StatsQuery struct {
	Domain      string // the link's domain; for all links, a filter ("": any, unless DomainSet)
	DomainSet   bool   // all links: Domain filters even when "" (the default domain)
	ID          string // "": all links
	Tag         string // all links: only those with this tag
	From, To    time.Time
	Granularity Granularity
	Bots        BotFilter
	Top         int // entries of each top list, 1–MaxTop
	// Dims selects the top lists (nil: all).
	Dims []Dimension
}

// Resolve returns q with its defaults filled in and its range aligned to
// whole buckets (From down, To up), checked against the retention at now:
// a note when the granularity was coarsened (hourly counts asked for
// beyond HourRetention), an InvalidParameter error for a range that is
// empty, reversed or reaches back beyond DayRetention.
func (q StatsQuery) Resolve(now time.Time) (StatsQuery, string, error) {
	now = now.UTC()
	if q.To.IsZero() {
		q.To = now
	}
	if q.From.IsZero() {
		q.From = q.To.Add(-DefaultRange)
	}
	q.From, q.To = q.From.UTC(), q.To.UTC()
	if !q.From.Before(q.To) {
		return q, "", Errorf(InvalidParameter, "from (%s) must be before to (%s)", q.From.Format(time.RFC3339), q.To.Format(time.RFC3339))
	}
	if q.From.After(now) {
		return q, "", Errorf(InvalidParameter, "from (%s) is in the future", q.From.Format(time.RFC3339))
	}
	if q.Top == 0 {
		q.Top = DefaultTop
	}
	if q.Top < 1 || q.Top > MaxTop {
		return q, "", Errorf(InvalidParameter, "top must be between 1 and %d", MaxTop)
	}
	if q.Granularity == GranularityAuto {
		q.Granularity = GranularityDay
		if q.To.Sub(q.From) <= 48*time.Hour {
			q.Granularity = GranularityHour
		}
	}
	var note string
	if q.Granularity == GranularityHour && q.From.Before(HourStart(now).Add(-HourRetention)) {
		q.Granularity = GranularityDay
		note = "hourly data is kept for 7 days; answered by day"
	}
	step := q.Granularity.Step()
	q.From = q.From.Truncate(step)
	if t := q.To.Truncate(step); !t.Equal(q.To) {
		q.To = t.Add(step)
	}
	oldest := DayStart(now).Add(-DayRetention)
	if q.From.Before(oldest) {
		return q, "", Errorf(InvalidParameter, "daily data is kept for 400 days: from must be on or after %s", oldest.Format(DayFormat))
	}
	if n := q.Buckets(); n > int(DayRetention/(24*time.Hour))+2 {
		return q, "", Errorf(InvalidParameter, "the range has %d %ss, more than a query may ask for (%d)", n, q.Granularity, int(DayRetention/(24*time.Hour))+2)
	}
	return q, note, nil
}

// Buckets is how many buckets a resolved query's range has.
func (q *StatsQuery) Buckets() int { return int(q.To.Sub(q.From) / q.Granularity.Step()) }

// HourStart and DayStart truncate t (UTC) to its hour and its day.
func HourStart(t time.Time) time.Time { return t.UTC().Truncate(time.Hour) }

// DayStart truncates t to its day (UTC).
func DayStart(t time.Time) time.Time { return t.UTC().Truncate(24 * time.Hour) }

// PeopleBots counts visits of people and of bots apart.
type PeopleBots struct{ People, Bots int64 }

// Add adds o to c.
func (c *PeopleBots) Add(o PeopleBots) { c.People += o.People; c.Bots += o.Bots }

// Of returns the count f keeps.
func (c PeopleBots) Of(f BotFilter) int64 {
	switch f {
	case BotsExclude:
		return c.People
	case BotsOnly:
		return c.Bots
	}
	return c.People + c.Bots
}

// VisitCounts is what a store counted over a resolved query's range: one
// point per bucket, every dimension's values, and for all-links queries
// the links' visits (keyed by store key, LinkKey): every link's, or when
// q.Top > 0 at least the q.Top busiest after q.Bots (ties by key), which
// are all a report names (the pebble store keeps no more of a million).
type VisitCounts struct {
	Series []PeopleBots // one per bucket of the range, oldest first
	Dims   [NumDimensions]map[string]PeopleBots
	Links  map[string]PeopleBots
}

// NewVisitCounts returns empty counts for q's range.
func NewVisitCounts(q *StatsQuery) VisitCounts {
	c := VisitCounts{Series: make([]PeopleBots, q.Buckets())}
	for d := range c.Dims {
		c.Dims[d] = map[string]PeopleBots{}
	}
	if q.ID == "" {
		c.Links = map[string]PeopleBots{}
	}
	return c
}

// Add adds o (counted over the same range) to c.
func (c *VisitCounts) Add(o *VisitCounts) {
	for i := range min(len(c.Series), len(o.Series)) {
		c.Series[i].Add(o.Series[i])
	}
	for d := range c.Dims {
		for k, n := range o.Dims[d] {
			v := c.Dims[d][k]
			v.Add(n)
			c.Dims[d][k] = v
		}
	}
	if c.Links != nil {
		for k, n := range o.Links {
			v := c.Links[k]
			v.Add(n)
			c.Links[k] = v
		}
	}
}

// AddKey adds n visits counted under k, a key of the hourly form
// (VisitKey.Hour set), to c when its hour is in q's range: to the series
// (KindHour) or to a dimension. It returns what it added to the series.
func (c *VisitCounts) AddKey(q *StatsQuery, k VisitKey, n int64) PeopleBots {
	t := time.Unix(int64(k.Hour)*3600, 0)
	if t.Before(q.From) || !t.Before(q.To) {
		return PeopleBots{}
	}
	pb := PeopleBots{People: n}
	if k.Bot {
		pb = PeopleBots{Bots: n}
	}
	if k.Kind == KindHour {
		c.Series[int(t.Sub(q.From)/q.Granularity.Step())].Add(pb)
		return pb
	}
	if d, ok := KindDimension(k.Kind); ok {
		v := c.Dims[d][k.Name]
		v.Add(pb)
		c.Dims[d][k.Name] = v
	}
	return PeopleBots{}
}

// ErrNoRanges is what VisitCounts returns when the store underneath keeps
// no statistics by range (a decorator over DynamoDB).
var ErrNoRanges = errors.New("this store keeps no statistics by range")

// VisitRangeStore is the VisitStore extension that answers statistics
// over ranges: the pebble store.
type VisitRangeStore interface {
	// VisitCounts counts the stored visits over a resolved query's range
	// (q.ID a store key, LinkKey; for all links, the Domain and Tag
	// filters applied).
	VisitCounts(ctx context.Context, q StatsQuery) (VisitCounts, error)
}

// VisitRangeCounter is the in-memory aggregator's view for range
// queries: the stored counts plus the visits not yet flushed.
type VisitRangeCounter interface {
	VisitCounts(ctx context.Context, q StatsQuery) (VisitCounts, error)
}

// StatsReport answers a StatsQuery.
type StatsReport struct {
	Query  StatsQuery // resolved
	Note   string     // why the answer differs from what was asked
	Total  int64      // after the bot filter
	People int64
	Bots   int64
	Series []SeriesPoint
	Top    [NumDimensions][]Count // busiest first, then OtherKey for the rest (when any)
	Links  []LinkCount            // all links: busiest first
	// Dims are every dimension's counts after the bot filter, for the
	// per-link answer's older fields (referrers, browsers…).
	Dims [NumDimensions]Breakdown
}

// SeriesPoint is one bucket of a report's series.
type SeriesPoint struct {
	T                   time.Time
	Total, People, Bots int64
}

// LinkCount is one of a report's top links.
type LinkCount struct {
	Link  Link
	Count int64
}

// VisitReport answers q at the Service's now: for one link (q.ID on
// q.Domain), which must exist, or for all links.
func (s *Service) VisitReport(ctx context.Context, q StatsQuery) (StatsReport, error) {
	if q.ID != "" {
		key, ok := checkedKey(q.Domain, q.ID)
		if !ok {
			return StatsReport{}, ErrNotFound
		}
		if _, err := s.store.Get(ctx, key); err != nil {
			return StatsReport{}, storeError("visit stats", err)
		}
		q.ID = key
	}
	q, note, err := q.Resolve(s.now())
	if err != nil {
		return StatsReport{}, err
	}
	var c VisitCounts
	var lifetime *PeopleBots // a store without ranges: its lifetime totals
	vc, live := s.visits.(VisitRangeCounter)
	rs, stored := s.store.(VisitRangeStore)
	switch {
	case live:
		c, err = vc.VisitCounts(ctx, q)
	case stored:
		c, err = rs.VisitCounts(ctx, q)
	default:
		err = ErrNoRanges
	}
	switch {
	case errors.Is(err, ErrNoRanges) && q.ID == "":
		return StatsReport{}, Errorf(Unavailable, "this store keeps no statistics across links")
	case errors.Is(err, ErrNoRanges):
		var st VisitStats
		if st, err = s.Stats(ctx, q.Domain, trimDomain(q.ID)); err != nil {
			return StatsReport{}, err
		}
		var n string
		c, q, n = countsFromStats(&st, q)
		note = joinNotes(note, n)
		lifetime = &PeopleBots{People: st.Total - st.Bots, Bots: st.Bots}
	case err != nil:
		return StatsReport{}, storeError("visit stats", err)
	}
	r := Report(q, &c)
	r.Note = note
	if lifetime != nil {
		r.People, r.Bots, r.Total = lifetime.People, lifetime.Bots, lifetime.Of(q.Bots)
	}
	if q.ID != "" {
		_, r.Query.ID = SplitKey(q.ID)
	}
	for i := range r.Links {
		l, err := s.store.Get(ctx, r.Links[i].Link.ID)
		switch {
		case err == nil:
			r.Links[i].Link = fromStore(l)
		case errors.Is(err, ErrNotFound):
			r.Links[i].Link = fromStore(Link{ID: r.Links[i].Link.ID}) // deleted since
		default:
			return StatsReport{}, storeError("visit stats", err)
		}
	}
	return r, nil
}

func trimDomain(key string) string { _, id := SplitKey(key); return id }

func joinNotes(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}

// Report builds the answer to a resolved query from what was counted.
func Report(q StatsQuery, c *VisitCounts) StatsReport {
	r := StatsReport{Query: q, Series: make([]SeriesPoint, len(c.Series))}
	step := q.Granularity.Step()
	for i, p := range c.Series {
		r.Series[i] = SeriesPoint{T: q.From.Add(time.Duration(i) * step), Total: p.Of(q.Bots), People: p.People, Bots: p.Bots}
		r.People += p.People
		r.Bots += p.Bots
	}
	r.Total = PeopleBots{r.People, r.Bots}.Of(q.Bots)
	want := func(d Dimension) bool { return q.Dims == nil || slices.Contains(q.Dims, d) }
	for d := range NumDimensions {
		b := Breakdown{}
		for k, n := range c.Dims[d] {
			if v := n.Of(q.Bots); v != 0 {
				b[k] = v
			}
		}
		if d == DimUTMSource || d == DimUTMMedium || d == DimUTMCampaign {
			// Visits without the parameter: the rest of the total.
			var with int64
			for _, n := range b {
				with += n
			}
			if none := r.Total - with; none > 0 {
				b[NoneKey] += none
			}
		}
		r.Dims[d] = b
		if want(d) {
			r.Top[d] = TopOf(b, q.Top)
		}
	}
	if c.Links != nil {
		for _, lc := range busiestLinks(c.Links, q.Bots, q.Top) {
			r.Links = append(r.Links, LinkCount{Link: Link{ID: lc.Key}, Count: lc.N})
		}
	}
	return r
}

// busiestLinks returns the n busiest of links after the filter f, busiest
// first, then by key: one pass keeping the n best in order, rather than a
// sort of every link (a million for all links).
func busiestLinks(links map[string]PeopleBots, f BotFilter, n int) []Count {
	top := make([]Count, 0, n+1)
	for k, pb := range links {
		c := Count{k, pb.Of(f)}
		if c.N == 0 || len(top) == n && countCmp(c, top[n-1]) >= 0 {
			continue
		}
		i, _ := slices.BinarySearchFunc(top, c, countCmp)
		top = slices.Insert(top, i, c)
		if len(top) > n {
			top = top[:n]
		}
	}
	return top
}

// countCmp orders counts busiest first, then by key.
func countCmp(a, b Count) int {
	if x := cmp.Compare(b.N, a.N); x != 0 {
		return x
	}
	return cmp.Compare(a.Key, b.Key)
}

// TopOf returns the n busiest entries of b, then OtherKey with the
// exact sum of the rest (when there is a rest).
func TopOf(b Breakdown, n int) []Count {
	all := b.Sorted()
	if len(all) <= n {
		return all
	}
	var rest int64
	for _, c := range all[n:] {
		rest += c.N
	}
	return append(all[:n:n], Count{OtherKey, rest})
}

// countsFromStats answers a per-link query from statistics kept as
// VisitStats (a store without VisitRangeStore): the series by day from
// the daily totals, the rest over the link's whole life, said in the
// note.
func countsFromStats(st *VisitStats, q StatsQuery) (VisitCounts, StatsQuery, string) {
	var note string
	if q.Granularity == GranularityHour {
		q.Granularity = GranularityDay
		q.From = DayStart(q.From)
		if t := DayStart(q.To); !t.Equal(q.To) {
			q.To = t.Add(24 * time.Hour)
		}
		note = "this store keeps daily counts only; answered by day"
	}
	note = joinNotes(note, "this store keeps lifetime statistics and daily totals only: total, people, bots and the top lists cover the link's whole life, and the series counts a day's visits as people's")
	c := NewVisitCounts(&q)
	for day, n := range st.Days {
		t, err := time.Parse(DayFormat, day)
		if err != nil || t.Before(q.From) || !t.Before(q.To) {
			continue
		}
		c.Series[int(t.Sub(q.From)/(24*time.Hour))].People += n
	}
	add := func(d Dimension, b Breakdown, bot bool) {
		for k, n := range b {
			v := c.Dims[d][k]
			if bot {
				v.Bots += n
			} else {
				v.People += n
			}
			c.Dims[d][k] = v
		}
	}
	add(DimReferrer, st.Referrers, false)
	add(DimBrowser, st.Browsers, false)
	add(DimBot, st.BotAgents, true)
	add(DimCountry, st.Countries, false)
	return c, q, note
}

// String describes a query for logs.
func (q StatsQuery) String() string {
	return fmt.Sprintf("stats %q %s–%s by %s", q.ID, q.From.Format(time.RFC3339), q.To.Format(time.RFC3339), q.Granularity)
}
