package pebble_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/pebble"
)

// fixtureDay is when testdata/format1-446e5de was written: `linkgate serve
// --store pebble:DIR` built at 446e5de (store format 1), three links
// created through the API (fixture-one tagged "campaign", fixture-two with
// a visit limit of 100, fixture-three), then followed: fixture-one three
// times by Firefox from news.example.com and once by Twitterbot,
// fixture-two twice by Firefox and once by Slackbot from slack.com; the
// server stopped with SIGTERM (visits flushed). What that build answered:
//
//	fixture-one: total 4, bots 1, by_day 2026-12-07: 4, referrers
//	news.example.com 3, (direct) 1, browsers Firefox 3, bots Twitter 1
//	fixture-two: total 3, bots 1, by_day 2026-12-07: 3, referrers
//	(direct) 2, slack.com 1, browsers Firefox 2, bots Slack 1
var fixtureDay = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

// openFixture copies the format-1 store into a temporary directory and
// opens it there, with the statistics' clock at the fixture's day.
func openFixture(t *testing.T) *pebble.Store {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "links")
	if err := os.CopyFS(dir, os.DirFS("testdata/format1-446e5de")); err != nil {
		t.Fatal(err)
	}
	s, err := pebble.Open(dir, pebble.Options{VisitClock: func() time.Time { return fixtureDay }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A store written by 446e5de (format 1, lifetime statistics records) is
// migrated when it opens: every link's totals, days and breakdowns are as
// that build answered them, the range queries answer them (per link and
// across links, by domain and tag), the visit limit still counts them,
// and new visits add to them.
func TestMigrateFormat1(t *testing.T) {
	ctx := context.Background()
	s := openFixture(t)
	want := map[string]shortener.VisitStats{
		"fixture-one": {Total: 4, Bots: 1, Days: shortener.Breakdown{"2026-12-07": 4},
			Referrers: shortener.Breakdown{"news.example.com": 3, shortener.DirectReferrer: 1},
			Browsers:  shortener.Breakdown{"Firefox": 3}, BotAgents: shortener.Breakdown{"Twitter": 1}},
		"fixture-two": {Total: 3, Bots: 1, Days: shortener.Breakdown{"2026-12-07": 3},
			Referrers: shortener.Breakdown{shortener.DirectReferrer: 2, "slack.com": 1},
			Browsers:  shortener.Breakdown{"Firefox": 2}, BotAgents: shortener.Breakdown{"Slack": 1}},
		"fixture-three": {},
	}
	for id, w := range want {
		got, err := s.VisitStats(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !sameStats(got, w) {
			t.Errorf("%s: %+v, want %+v", id, got, w)
		}
	}
	if l, err := s.Get(ctx, "fixture-two"); err != nil || l.Visits != 3 {
		t.Errorf("the limited link's visits: %d (%v), want 3", l.Visits, err)
	}

	// The range queries: the fixture's day, by day.
	q := shortener.StatsQuery{From: fixtureDay.Add(-12 * time.Hour), To: fixtureDay.Add(12 * time.Hour), Granularity: shortener.GranularityDay}
	counts := func(q shortener.StatsQuery) shortener.VisitCounts {
		t.Helper()
		c, err := s.VisitCounts(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	one := q
	one.ID = "fixture-one"
	c := counts(one)
	if len(c.Series) != 1 || c.Series[0].People+c.Series[0].Bots != 4 || c.Dims[shortener.DimReferrer]["news.example.com"].People != 3 ||
		c.Dims[shortener.DimBot]["Twitter"].Bots != 1 || c.Dims[shortener.DimBrowser]["Firefox"].People != 3 {
		t.Errorf("fixture-one by range: %+v", c)
	}
	all := counts(q)
	if all.Series[0].People+all.Series[0].Bots != 7 || all.Links["fixture-one"].People+all.Links["fixture-one"].Bots != 4 ||
		all.Links["fixture-two"].People+all.Links["fixture-two"].Bots != 3 || len(all.Links) != 2 ||
		all.Dims[shortener.DimReferrer][shortener.DirectReferrer].People != 3 {
		t.Errorf("all links by range: %+v", all)
	}
	tagged := q
	tagged.Tag = "campaign"
	if c := counts(tagged); c.Series[0].People+c.Series[0].Bots != 4 || len(c.Links) != 1 {
		t.Errorf("tag campaign: %+v", c)
	}
	dom := q
	dom.DomainSet = true
	if c := counts(dom); c.Series[0].People+c.Series[0].Bots != 7 || len(c.Links) != 2 {
		t.Errorf("the default domain: %+v", c)
	}

	// New visits add to the migrated ones; the store reopens as format 2.
	b := shortener.NewVisitBatch(shortener.VisitDelta{ID: "fixture-two", Limited: true, Stats: shortener.VisitStats{Total: 2,
		Days: shortener.Breakdown{"2026-12-07": 2}, Referrers: shortener.Breakdown{"slack.com": 2}, Browsers: shortener.Breakdown{"Firefox": 2}}})
	if err := s.AddVisits(ctx, b); err != nil {
		t.Fatal(err)
	}
	if l, err := s.Get(ctx, "fixture-two"); err != nil || l.Visits != 5 {
		t.Errorf("the limited link's visits after 2 more: %d (%v), want 5", l.Visits, err)
	}
	if got, _ := s.VisitStats(ctx, "fixture-two"); got.Total != 5 || got.Referrers["slack.com"] != 3 || got.Days["2026-12-07"] != 5 {
		t.Errorf("fixture-two after 2 more visits: %+v", got)
	}
}

// A migration is resumed, not repeated: opening the migrated store again
// counts nothing twice.
func TestMigrateFormat1Once(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "links")
	if err := os.CopyFS(dir, os.DirFS("testdata/format1-446e5de")); err != nil {
		t.Fatal(err)
	}
	opts := pebble.Options{VisitClock: func() time.Time { return fixtureDay }}
	for range 2 {
		s, err := pebble.Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.VisitCounts(context.Background(), shortener.StatsQuery{From: fixtureDay.Add(-12 * time.Hour), To: fixtureDay.Add(12 * time.Hour), Granularity: shortener.GranularityDay})
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		if n := c.Series[0].People + c.Series[0].Bots; n != 7 {
			t.Errorf("all links' visits %d, want 7", n)
		}
	}
}

func sameStats(a, b shortener.VisitStats) bool {
	eq := func(x, y shortener.Breakdown) bool {
		if len(x) != len(y) {
			return false
		}
		for k, n := range x {
			if y[k] != n {
				return false
			}
		}
		return true
	}
	return a.Total == b.Total && a.Bots == b.Bots && eq(a.Days, b.Days) && eq(a.Referrers, b.Referrers) &&
		eq(a.Browsers, b.Browsers) && eq(a.BotAgents, b.BotAgents) && eq(a.Countries, b.Countries)
}

// format2Now is when testdata/format2-5a7c83a is read. It was written by
// the store at 5a7c83a (format 2: day records, no span records) through
// its API: pebble.Open with a VisitClock, the links f2-one (tag
// "campaign"), f2-two (visit limit 100), go.example.org/f2-three and
// f2-four created, then one AddVisits per visit row below in the hourly
// form (people as Firefox from news.example.com in DE, bots as Slack),
// the clock at each row's hour; 2026-11-11 starts a span of days
// (20768 = 649 × 32), so ranges cross one. The answers below are what
// that build gave at format2Now.
//
//	f2-one 2026-11-09T09 3+1 bot, 11-10T23 5, 11-11T00 7+2, 12-07T08 2
//	f2-two 2026-11-09T10 2, 11-11T05 1, 12-07T09 6+1, 12-07T11 1
//	go.example.org/f2-three 2026-11-10T23 1+1, 12-01T12 4
var format2Now = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

// A store written by 5a7c83a (format 2) gets its span records when it
// opens: the all-links queries, which read them for the top links, answer
// what that build answered over ranges within and across spans, by
// domain and tag; each link's own answers are unchanged; opening it again
// counts nothing twice, and new visits add to the migrated ones. A
// migration cut short (a span record written, the format still 2) is
// done again without counting that record twice.
func TestMigrateFormat2(t *testing.T) {
	for _, cut := range []bool{false, true} {
		t.Run(fmt.Sprintf("cut short %v", cut), func(t *testing.T) { testMigrateFormat2(t, cut) })
	}
}

func testMigrateFormat2(t *testing.T, cut bool) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "links")
	if err := os.CopyFS(dir, os.DirFS("testdata/format2-5a7c83a")); err != nil {
		t.Fatal(err)
	}
	if cut { // f2-one's record of the span before 2026-11-11: 11-09 and 11-10
		err := pebble.WriteSpanRecord(dir, "f2-one", map[uint32]shortener.PeopleBots{20766: {People: 3, Bots: 1}, 20767: {People: 5}})
		if err != nil {
			t.Fatal(err)
		}
	}
	day := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	type pb = shortener.PeopleBots
	p := func(people, bots int64) pb { return pb{People: people, Bots: bots} }
	cases := []struct {
		name   string
		q      shortener.StatsQuery
		series pb
		links  map[string]pb
	}{
		{"30 days", shortener.StatsQuery{From: day.AddDate(0, 0, -30), To: day.AddDate(0, 0, 1)}, p(32, 5),
			map[string]pb{"f2-one": p(17, 3), "f2-two": p(10, 1), "go.example.org/f2-three": p(5, 1)}},
		{"the last span", shortener.StatsQuery{From: day.AddDate(0, 0, -26), To: day.AddDate(0, 0, 1)}, p(21, 3),
			map[string]pb{"f2-one": p(9, 2), "f2-two": p(8, 1), "go.example.org/f2-three": p(4, 0)}},
		{"the end of the span before", shortener.StatsQuery{From: day.AddDate(0, 0, -28), To: day.AddDate(0, 0, -26)}, p(11, 2),
			map[string]pb{"f2-one": p(8, 1), "f2-two": p(2, 0), "go.example.org/f2-three": p(1, 1)}},
		{"across the spans' edge", shortener.StatsQuery{From: day.AddDate(0, 0, -27), To: day.AddDate(0, 0, -25)}, p(14, 3),
			map[string]pb{"f2-one": p(12, 2), "f2-two": p(1, 0), "go.example.org/f2-three": p(1, 1)}},
		{"a domain", shortener.StatsQuery{From: day.AddDate(0, 0, -30), To: day.AddDate(0, 0, 1), DomainSet: true, Domain: "go.example.org"}, p(5, 1),
			map[string]pb{"go.example.org/f2-three": p(5, 1)}},
		{"a tag", shortener.StatsQuery{From: day.AddDate(0, 0, -30), To: day.AddDate(0, 0, 1), Tag: "campaign"}, p(17, 3),
			map[string]pb{"f2-one": p(17, 3)}},
	}
	check := func(s *pebble.Store, more pb) {
		t.Helper()
		for _, c := range cases {
			c.q.Granularity = shortener.GranularityDay
			got, err := s.VisitCounts(ctx, c.q)
			if err != nil {
				t.Fatal(err)
			}
			var series pb
			for _, p := range got.Series {
				series.Add(p)
			}
			want := maps.Clone(c.links)
			if _, ok := want["f2-two"]; ok && c.q.To.After(format2Now) {
				w := want["f2-two"]
				w.Add(more)
				want["f2-two"] = w
				series.People -= more.People
			}
			if series != c.series || !maps.Equal(got.Links, want) {
				t.Errorf("%s: series %+v, links %+v; want %+v, %+v", c.name, series, got.Links, c.series, want)
			}
		}
	}
	opts := pebble.Options{VisitClock: func() time.Time { return format2Now }}
	for i := range 2 {
		s, err := pebble.Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		check(s, pb{})
		if st, err := s.VisitStats(ctx, "f2-one"); err != nil || st.Total != 20 || st.Bots != 3 || !maps.Equal(st.Days,
			shortener.Breakdown{"2026-11-09": 4, "2026-11-10": 5, "2026-11-11": 9, "2026-12-07": 2}) || st.Referrers["news.example.com"] != 17 {
			t.Errorf("f2-one (open %d): %+v, %v", i+1, st, err)
		}
		if l, err := s.Get(ctx, "f2-two"); err != nil || l.Visits != 11 {
			t.Errorf("the limited link's visits (open %d): %d (%v), want 11", i+1, l.Visits, err)
		}
		s.Close()
	}
	s, err := pebble.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := shortener.NewVisitBatch(shortener.VisitDelta{ID: "f2-two", Limited: true, Stats: shortener.VisitStats{Total: 2,
		Days: shortener.Breakdown{"2026-12-07": 2}, Browsers: shortener.Breakdown{"Firefox": 2}}})
	if err := s.AddVisits(ctx, b); err != nil {
		t.Fatal(err)
	}
	check(s, pb{People: 2})
}
