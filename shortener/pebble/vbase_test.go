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

// visitAt adds people and bots visits of link id at hour at, in the hourly
// form a flush adds (people by Firefox, bots by Slack).
func visitAt(t *testing.T, s *pebble.Store, id string, at time.Time, people, bots int64) {
	t.Helper()
	h := int32(at.Unix() / 3600)
	b := &shortener.VisitBatch{Keys: []shortener.VisitKey{{Kind: shortener.KindHour, Hour: h},
		{Kind: shortener.KindHour, Hour: h, Bot: true},
		{Kind: shortener.KindBrowser, Name: "Firefox", Hour: h},
		{Kind: shortener.KindBot, Name: "Slack", Hour: h, Bot: true}}}
	lv := shortener.LinkVisits{ID: id, Total: people + bots, Bots: bots}
	if people > 0 {
		lv.Counts = append(lv.Counts, shortener.KeyCount{Key: 0, N: people}, shortener.KeyCount{Key: 2, N: people})
	}
	if bots > 0 {
		lv.Counts = append(lv.Counts, shortener.KeyCount{Key: 1, N: bots}, shortener.KeyCount{Key: 3, N: bots})
	}
	b.Links = []shortener.LinkVisits{lv}
	if err := s.AddVisits(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

// format3Now is when testdata/format3-eb42b6a is read. It was written by
// the store at eb42b6a (format 3: every link's totals merged by every
// flush) through its API, with a VisitClock at each step's time: links
// f3-one (tag "campaign"), f3-two (visit limit 100), f3-three, f3-four,
// f3-five and f3-six created 2026-11-09, then one AddVisits per row
// (people by Firefox, bots by Slack, hourly form):
//
//	f3-one   11-09T09 3+1 bot, 11-10T23 5, 11-11T00 7+2, 12-07T08 2
//	f3-two   11-09T10 2, 11-11T05 1, 12-07T09 6+1, 12-07T11 1
//	f3-three 11-09T11 4+1, 11-11T06 1; deleted, created again 11-20, 11-20T08 2+1
//	f3-four  11-09T12 5; deleted, created again 11-20 with a limit of 50, 11-20T09 3
//	f3-five  11-09T13 6+2; deleted
//
// (2026-11-11 starts a span.) The answers below are what that build gave
// at format3Now (its generator: .cache/gen3/main.go in the analytics
// worktree, run at eb42b6a).
var format3Now = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

// A store written by eb42b6a (format 3) gets base records when it opens:
// every link's lifetime statistics and a limited link's visits are what
// that build answered, also for links deleted and created again, opening
// it again changes nothing, a deleted id's next link starts from 0, and
// new visits add to them.
func TestMigrateFormat3(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "links")
	if err := os.CopyFS(dir, os.DirFS("testdata/format3-eb42b6a")); err != nil {
		t.Fatal(err)
	}
	bd := func(kv ...any) shortener.Breakdown {
		b := shortener.Breakdown{}
		for i := 0; i < len(kv); i += 2 {
			b[kv[i].(string)] = int64(kv[i+1].(int))
		}
		return b
	}
	want := map[string]struct {
		st     shortener.VisitStats
		visits int64 // Get's
	}{
		"f3-one": {shortener.VisitStats{Total: 20, Bots: 3, Days: bd("2026-11-09", 4, "2026-11-10", 5, "2026-11-11", 9, "2026-12-07", 2),
			Browsers: bd("Firefox", 17), BotAgents: bd("Slack", 3)}, 0},
		"f3-two": {shortener.VisitStats{Total: 11, Bots: 1, Days: bd("2026-11-09", 2, "2026-11-11", 1, "2026-12-07", 8),
			Browsers: bd("Firefox", 10), BotAgents: bd("Slack", 1)}, 11},
		"f3-three": {shortener.VisitStats{Total: 3, Bots: 1, Days: bd("2026-11-20", 3), Browsers: bd("Firefox", 2), BotAgents: bd("Slack", 1)}, 0},
		"f3-four":  {shortener.VisitStats{Total: 3, Days: bd("2026-11-20", 3), Browsers: bd("Firefox", 3)}, 3},
		"f3-six":   {},
	}
	opts := pebble.Options{VisitClock: func() time.Time { return format3Now }}
	for i := range 2 {
		s, err := pebble.Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		for id, w := range want {
			st, err := s.VisitStats(ctx, id)
			if err != nil || !sameStats(st, w.st) {
				t.Errorf("open %d, %s: %+v (%v), want %+v", i+1, id, st, err, w.st)
			}
			if l, err := s.Get(ctx, id); err != nil || l.Visits != w.visits {
				t.Errorf("open %d, %s: Get's visits %d (%v), want %d", i+1, id, l.Visits, err, w.visits)
			}
		}
		s.Close()
	}
	s, err := pebble.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, l := range []shortener.Link{{ID: "f3-five", URL: "https://example.com/5"}, {ID: "f3-seven", URL: "https://example.com/7"}} {
		if err := s.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
		if st, err := s.VisitStats(ctx, l.ID); err != nil || st.Total != 0 || st.Bots != 0 || len(st.Days) != 0 {
			t.Errorf("%s created after the migration: %+v (%v), want none", l.ID, st, err)
		}
	}
	visitAt(t, s, "f3-one", format3Now, 1, 1)
	visitAt(t, s, "f3-two", format3Now, 2, 0)
	visitAt(t, s, "f3-five", format3Now, 4, 0)
	for id, n := range map[string]int64{"f3-one": 22, "f3-two": 13, "f3-five": 4} {
		if st, err := s.VisitStats(ctx, id); err != nil || st.Total != n {
			t.Errorf("%s after new visits: %d (%v), want %d", id, st.Total, err, n)
		}
	}
	if l, err := s.Get(ctx, "f3-two"); err != nil || l.Visits != 13 {
		t.Errorf("f3-two's visits after new ones: %d (%v), want 13", l.Visits, err)
	}
}

// Lifetime totals stay exact in format 4 whatever changes the kind of a
// link's record: a visit limit set (its totals then counted on every
// flush, for every redirect) or removed, a link deleted and another
// created under its id, the span records of its days folded into its base
// record when they leave the retention, visits of days before the folded
// spans arriving late.
func TestLifetimeTotalsFormat4(t *testing.T) {
	ctx := context.Background()
	day0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	limit := func(n int64) shortener.LinkUpdate { return shortener.LinkUpdate{MaxVisits: &n} }
	type step struct {
		update   *shortener.LinkUpdate // else visits at, or with del a delete and create
		at       time.Time
		p, b     int64
		recreate *shortener.Link
		total    int64 // VisitStats' total after the step
		visits   int64 // Get's visits after the step
	}
	far := day0.AddDate(0, 0, 480) // the first spans folded
	later := far.AddDate(0, 0, 100)
	upd := func(u shortener.LinkUpdate) *shortener.LinkUpdate { return &u }
	cases := []struct {
		name  string
		max   int64
		steps []step
	}{
		{"limit set later", 0, []step{
			{at: day0, p: 3, b: 1, total: 4},
			{update: upd(limit(10)), total: 4, visits: 4},
			{at: day0.Add(time.Hour), p: 2, total: 6, visits: 6},
		}},
		{"limit removed", 5, []step{
			{at: day0, p: 4, total: 4, visits: 4},
			{update: upd(limit(0)), total: 4},
			{at: day0.AddDate(0, 0, 40), p: 1, total: 5},
			{update: upd(limit(7)), total: 5, visits: 5},
			{at: day0.AddDate(0, 0, 41), p: 1, total: 6, visits: 6},
		}},
		{"deleted and created again", 0, []step{
			{at: day0, p: 3, total: 3},
			{recreate: &shortener.Link{URL: "https://example.com/again"}, total: 0},
			{at: day0.Add(time.Hour), p: 2, total: 2},
			{recreate: &shortener.Link{URL: "https://example.com/limited", MaxVisits: 9}, total: 0},
			{at: day0.Add(2 * time.Hour), p: 1, total: 1, visits: 1},
		}},
		{"spans folded", 0, []step{
			{at: day0, p: 3, b: 2, total: 5},
			{at: day0.AddDate(0, 0, 40), p: 1, total: 6},
			{at: far, p: 1, total: 7},
			{at: later, p: 1, total: 8},
		}},
		{"spans folded, limited", 20, []step{
			{at: day0, p: 3, b: 2, total: 5, visits: 5},
			{at: far, p: 1, total: 6, visits: 6},
			{update: upd(limit(0)), total: 6},
			{at: later, p: 1, total: 7},
		}},
		{"late visits before the folded spans", 0, []step{
			{at: day0, p: 3, total: 3},
			{at: far, p: 1, total: 4},
			{at: day0.AddDate(0, 0, 1), p: 2, total: 6}, // a batch retried late
			{at: later, p: 1, total: 7},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			now := day0
			s, err := pebble.Open(filepath.Join(t.TempDir(), "links"), pebble.Options{VisitClock: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			const id = "life"
			if err := s.Create(ctx, shortener.Link{ID: id, URL: "https://example.com/", MaxVisits: c.max, CreatedAt: day0}); err != nil {
				t.Fatal(err)
			}
			for i, st := range c.steps {
				switch {
				case st.update != nil:
					if _, err := s.Update(ctx, id, *st.update); err != nil {
						t.Fatal(err)
					}
				case st.recreate != nil:
					if err := s.Delete(ctx, id); err != nil {
						t.Fatal(err)
					}
					l := *st.recreate
					l.ID, l.CreatedAt = id, now.Add(time.Minute)
					if err := s.Create(ctx, l); err != nil {
						t.Fatal(err)
					}
				default:
					if st.at.After(now) {
						now = st.at
					}
					visitAt(t, s, id, st.at, st.p, st.b)
				}
				got, err := s.VisitStats(ctx, id)
				if err != nil || got.Total != st.total {
					t.Errorf("step %d: total %d (%v), want %d", i+1, got.Total, err, st.total)
				}
				if l, err := s.Get(ctx, id); err != nil || l.Visits != st.visits {
					t.Errorf("step %d: Get's visits %d (%v), want %d", i+1, l.Visits, err, st.visits)
				}
			}
		})
	}
}
