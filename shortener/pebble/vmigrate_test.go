package pebble_test

import (
	"context"
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
