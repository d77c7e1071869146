package storetest

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

// Visit statistics are part of the Store contract: every store keeps them
// (shortener.VisitStore), and decorators pass them through.
var visitTests = []optionalTest[shortener.VisitStore]{
	{"VisitsAddAndRead", testVisitsAddAndRead},
	{"VisitsOfMissingLink", testVisitsMissing},
	{"VisitsGoWithTheLink", testVisitsDeleted},
	{"VisitsBounded", testVisitsBounded},
	{"VisitsConcurrentBatches", testVisitsConcurrent},
}

func runVisits(t *testing.T, newStore func(t *testing.T) shortener.Store) {
	runOptional(t, newStore, visitTests)
}

func stats(total, bots int64, day, ref, browser string) shortener.VisitStats {
	st := shortener.VisitStats{Total: total, Bots: bots,
		Days:      shortener.Breakdown{day: total},
		Referrers: shortener.Breakdown{ref: total},
	}
	if total > bots {
		st.Browsers = shortener.Breakdown{browser: total - bots}
	}
	if bots > 0 {
		st.BotAgents = shortener.Breakdown{"Slackbot": bots}
	}
	return st
}

func wantStats(t *testing.T, got, want shortener.VisitStats) {
	t.Helper()
	if !EqualStats(got, want) {
		t.Errorf("stats\ngot  %+v\nwant %+v", got, want)
	}
}

// EqualStats reports whether two statistics are the same, an empty and a
// missing breakdown alike. Adapter tests may use it too.
func EqualStats(a, b shortener.VisitStats) bool {
	eq := func(x, y shortener.Breakdown) bool { return len(x) == len(y) && maps.Equal(x, y) }
	return a.Total == b.Total && a.Bots == b.Bots && eq(a.Days, b.Days) && eq(a.Referrers, b.Referrers) &&
		eq(a.Browsers, b.Browsers) && eq(a.BotAgents, b.BotAgents) && eq(a.Countries, b.Countries)
}

func addVisits(t *testing.T, vs shortener.VisitStore, deltas ...shortener.VisitDelta) {
	t.Helper()
	batch := shortener.NewVisitBatch(deltas...)
	if err := vs.AddVisits(ctx(t), batch); err != nil {
		t.Fatalf("AddVisits: %v", err)
	}
	for _, d := range batch.Links {
		if !d.Applied {
			t.Errorf("AddVisits returned nil but left %q not Applied", d.ID)
		}
	}
}

func mustStats(t *testing.T, vs shortener.VisitStore, id string) shortener.VisitStats {
	t.Helper()
	st, err := vs.VisitStats(ctx(t), id)
	if err != nil {
		t.Fatalf("VisitStats(%q): %v", id, err)
	}
	return st
}

func testVisitsAddAndRead(t *testing.T, s shortener.Store, vs shortener.VisitStore) {
	limited := shortener.Link{ID: "limited001", URL: "https://l.example/", CreatedAt: base, MaxVisits: 100, Visits: 2}
	mustCreate(t, s, limited)
	mustCreate(t, s, link("visited001", "https://v.example/"))
	mustCreate(t, s, link("novisits01", "https://n.example/"))

	wantStats(t, mustStats(t, vs, "novisits01"), shortener.VisitStats{})

	// Visits of a link with a visit limit are marked Limited by the
	// aggregator: the store makes them part of Get's count at once.
	addVisits(t, vs,
		shortener.VisitDelta{ID: "limited001", Stats: stats(3, 1, "2026-03-14", "news.example", "Firefox"), Limited: true},
		shortener.VisitDelta{ID: "visited001", Stats: stats(5, 0, "2026-03-14", shortener.DirectReferrer, "Chrome")},
		shortener.VisitDelta{ID: "missing001", Stats: stats(7, 0, "2026-03-14", "x.example", "Chrome")},
	)
	addVisits(t, vs,
		shortener.VisitDelta{ID: "limited001", Stats: stats(4, 0, "2026-03-15", "news.example", "Firefox"), Limited: true},
	)
	// The total includes the Visits the link was created with (visits
	// counted before statistics were kept, as an import brings them).
	want := stats(7, 1, "2026-03-14", "news.example", "Firefox")
	want.Total = 2 + 7
	want.Days = shortener.Breakdown{"2026-03-14": 3, "2026-03-15": 4}
	want.Browsers = shortener.Breakdown{"Firefox": 6}
	wantStats(t, mustStats(t, vs, "limited001"), want)
	wantStats(t, mustStats(t, vs, "visited001"), stats(5, 0, "2026-03-14", shortener.DirectReferrer, "Chrome"))

	// Get reports the stored count in Visits (on top of the Visits the link
	// was created with), so the Service enforces visit limits on it. (A
	// read cache may report the count of a link without a limit late.)
	if got := mustGet(t, s, "limited001").Visits; got != 2+7 {
		t.Errorf("Get(limited001).Visits = %d, want 9", got)
	}
	if _, l, err := s.AppendURL(ctx(t), nil, []byte("limited001")); err != nil || l.Visits != 9 {
		t.Errorf("AppendURL(limited001) Visits = %d, %v; want 9", l.Visits, err)
	}
	// A delta for a link that does not exist creates nothing.
	if _, err := s.Get(ctx(t), "missing001"); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("Get(missing001) after AddVisits: %v, want ErrNotFound", err)
	}
}

func testVisitsMissing(t *testing.T, s shortener.Store, vs shortener.VisitStore) {
	if _, err := vs.VisitStats(ctx(t), "absent0001"); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("VisitStats(absent) = %v, want ErrNotFound", err)
	}
}

func testVisitsDeleted(t *testing.T, s shortener.Store, vs shortener.VisitStore) {
	first := link("reused0001", "https://a.example/")
	mustCreate(t, s, first)
	// Visits say which link they were of (the aggregator takes CreatedAt
	// from the redirect): the second batch is of the first link, counted
	// before its delete and written after it, before the id is taken
	// again.
	old := shortener.VisitDelta{ID: "reused0001", Stats: stats(3, 0, "2026-03-14", "r.example", "Safari"), CreatedAt: first.CreatedAt.Unix()}
	addVisits(t, vs, old)
	if err := s.Delete(ctx(t), "reused0001"); err != nil {
		t.Fatal(err)
	}
	if _, err := vs.VisitStats(ctx(t), "reused0001"); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("VisitStats after Delete = %v, want ErrNotFound", err)
	}
	addVisits(t, vs, old)
	// A new link under the same id starts from zero.
	second := link("reused0001", "https://b.example/")
	second.CreatedAt = first.CreatedAt.Add(time.Minute)
	mustCreate(t, s, second)
	wantStats(t, mustStats(t, vs, "reused0001"), shortener.VisitStats{})
	if got := mustGet(t, s, "reused0001").Visits; got != 0 {
		t.Errorf("Visits of the new link = %d, want 0", got)
	}
}

func testVisitsBounded(t *testing.T, s shortener.Store, vs shortener.VisitStore) {
	mustCreate(t, s, link("popular001", "https://p.example/"))
	const n = shortener.MaxStatReferrers + 30
	for i := range 3 {
		st := shortener.VisitStats{Total: n, Referrers: shortener.Breakdown{}, Browsers: shortener.Breakdown{"Chrome": n}}
		for j := range n {
			st.Referrers[fmt.Sprintf("r%d-%d.example", i, j)] = 1
		}
		addVisits(t, vs, shortener.VisitDelta{ID: "popular001", Stats: st})
	}
	got := mustStats(t, vs, "popular001")
	if len(got.Referrers) > shortener.MaxStatReferrers {
		t.Errorf("%d referrers stored, bound %d", len(got.Referrers), shortener.MaxStatReferrers)
	}
	var sum int64
	for _, c := range got.Referrers {
		sum += c
	}
	if sum != 3*n || got.Total != 3*n {
		t.Errorf("referrer counts sum to %d, total %d; want %d (bounding must fold, not lose)", sum, got.Total, 3*n)
	}
}

func testVisitsConcurrent(t *testing.T, s shortener.Store, vs shortener.VisitStore) {
	mustCreate(t, s, link("busy000001", "https://b.example/"))
	const writers, each = 8, 5
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				batch := shortener.NewVisitBatch(shortener.VisitDelta{ID: "busy000001", Stats: stats(2, 1, "2026-03-14", "x.example", "Edge")})
				if err := vs.AddVisits(ctx(t), batch); err != nil {
					t.Errorf("AddVisits: %v", err)
				}
			}
		})
	}
	wg.Wait()
	want := stats(2*writers*each, writers*each, "2026-03-14", "x.example", "Edge")
	wantStats(t, mustStats(t, vs, "busy000001"), want)
}
