package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

// RunRecords runs the conformance suite of shortener.RecordStore (exports
// and imports of whole links with their statistics) against stores made
// by newStore, which must implement it.
func RunRecords(t *testing.T, newStore func(t *testing.T) shortener.Store) {
	runOptional(t, newStore, []optionalTest[shortener.RecordStore]{
		{"RecordsRoundTrip", testRecordsRoundTrip},
		{"RecordsImportAgainChangesNothing", testRecordsAgain},
		{"RecordsConflictsPerRecord", testRecordsConflicts},
		{"RecordsDuplicatesInOneCall", testRecordsDuplicates},
		{"RecordsManyAtOnce", testRecordsMany},
	})
}

// sampleRecords are links of every shape with statistics of every kind:
// none, visits they were created with, every breakdown, a visit limit
// with visits counted and created with, an expiry.
func sampleRecords() []shortener.LinkRecord {
	full := shortener.VisitStats{Total: 12, Bots: 3,
		Days:      shortener.Breakdown{"2026-02-27": 2, "2026-03-14": 10},
		Referrers: shortener.Breakdown{shortener.DirectReferrer: 7, "news.example.com": 5},
		Browsers:  shortener.Breakdown{"Firefox": 6, "Chrome": 3},
		BotAgents: shortener.Breakdown{"Slackbot": 3},
		Countries: shortener.Breakdown{"DE": 4, "FR": 8},
	}
	return []shortener.LinkRecord{
		{Link: link("recplain01", "https://plain.example/")},
		{Link: shortener.Link{ID: "reccreated", URL: "https://created.example/", CreatedAt: base, Visits: 40}},
		{Link: link("recstats01", "https://stats.example/a?b=c"), Stats: full},
		{Link: shortener.Link{ID: "recstats02", URL: "https://both.example/", CreatedAt: base, Visits: 5}, Stats: stats(4, 1, "2026-03-15", "t.co", "Safari")},
		{Link: shortener.Link{ID: "reclimited", URL: "https://limited.example/", CreatedAt: base, MaxVisits: 100, Visits: 7}, Stats: stats(9, 0, "2026-03-16", "x.example", "Edge")},
		{Link: shortener.Link{ID: "reclimtot", URL: "https://limtot.example/", CreatedAt: base, MaxVisits: 10}, Stats: shortener.VisitStats{Total: 4}},
		{Link: shortener.Link{ID: "recexpires", URL: "https://expires.example/", CreatedAt: base, ExpiresAt: later}, Stats: shortener.VisitStats{Bots: 2, BotAgents: shortener.Breakdown{"Googlebot": 2}, Total: 2}},
	}
}

// later is an expiry in the future (DynamoDB's TTL deletes expired items,
// DynamoDB Local too).
var later = time.Date(2036, 3, 14, 15, 9, 26, 0, time.UTC)

func mustImport(t *testing.T, rs shortener.RecordStore, recs []shortener.LinkRecord, want ...shortener.ImportResult) {
	t.Helper()
	res, err := rs.ImportRecords(ctx(t), recs)
	if err != nil {
		t.Fatalf("ImportRecords: %v", err)
	}
	if len(res) != len(recs) {
		t.Fatalf("ImportRecords: %d results for %d records", len(res), len(recs))
	}
	for i := range recs {
		w := want[min(i, len(want)-1)]
		if res[i] != w {
			t.Errorf("record %d (%s): result %d, want %d", i, recs[i].Link.ID, res[i], w)
		}
	}
}

func exportMap(t *testing.T, rs shortener.RecordStore) map[string]shortener.LinkRecord {
	t.Helper()
	out := map[string]shortener.LinkRecord{}
	err := rs.ExportRecords(ctx(t), func(r shortener.LinkRecord) error {
		if _, dup := out[r.Link.ID]; dup {
			return fmt.Errorf("%s exported twice", r.Link.ID)
		}
		out[r.Link.ID] = r
		return nil
	})
	if err != nil {
		t.Fatalf("ExportRecords: %v", err)
	}
	return out
}

// wantExport checks that the store exports exactly want, record for record.
func wantExport(t *testing.T, rs shortener.RecordStore, want []shortener.LinkRecord) {
	t.Helper()
	got := exportMap(t, rs)
	if len(got) != len(want) {
		t.Errorf("exported %d links, want %d", len(got), len(want))
	}
	for _, w := range want {
		g, ok := got[w.Link.ID]
		if !ok {
			t.Errorf("%s not exported", w.Link.ID)
			continue
		}
		if !Equal(g.Link, w.Link) || !EqualStats(g.Stats, w.Stats) {
			t.Errorf("%s exported as\n%s %+v, want\n%s %+v", w.Link.ID, fmtLink(g.Link), g.Stats, fmtLink(w.Link), w.Stats)
		}
	}
}

// An import is exported as it was given, and served: Get counts a
// limited link's visits (created with and counted) toward its limit, and
// VisitStats has every visit.
func testRecordsRoundTrip(t *testing.T, s shortener.Store, rs shortener.RecordStore) {
	recs := sampleRecords()
	mustImport(t, rs, recs, shortener.Imported)
	wantExport(t, rs, recs)
	vs := s
	for _, r := range recs {
		want := r.Link
		if want.MaxVisits > 0 {
			want.Visits += r.Stats.Total
		}
		wantLink(t, mustGet(t, s, r.Link.ID), want)
		st := r.Stats
		st.Total += r.Link.Visits
		wantStats(t, mustStats(t, vs, r.Link.ID), st)
	}
	// Visits counted after the import add to the exported statistics
	// (stores that buffer visits export those they hold, as VisitStats
	// reads them).
	addVisits(t, vs, shortener.VisitDelta{ID: "recstats01", CreatedAt: base.Unix(), Stats: stats(2, 0, "2026-03-14", "t.co", "Firefox")})
	got := exportMap(t, rs)["recstats01"].Stats
	want := recs[2].Stats
	want.Add(stats(2, 0, "2026-03-14", "t.co", "Firefox"))
	wantStats(t, got, want)
}

// A second import of the same records stores nothing more: every record
// is Unchanged and the statistics are not counted twice.
func testRecordsAgain(t *testing.T, s shortener.Store, rs shortener.RecordStore) {
	recs := sampleRecords()
	mustImport(t, rs, recs, shortener.Imported)
	mustImport(t, rs, sampleRecords(), shortener.Unchanged)
	wantExport(t, rs, recs)
}

// A record whose id holds another link is Conflicting and changes
// nothing, while the records beside it in the same call are stored.
func testRecordsConflicts(t *testing.T, s shortener.Store, rs shortener.RecordStore) {
	recs := sampleRecords()
	mustImport(t, rs, recs, shortener.Imported)
	mustCreate(t, s, link("recexists1", "https://exists.example/"))
	other := func(r shortener.LinkRecord) shortener.LinkRecord {
		r.Link.URL += "other"
		return r
	}
	fresh := []shortener.LinkRecord{
		{Link: link("recnew0001", "https://new.example/1"), Stats: stats(3, 0, "2026-03-20", "a.example", "Firefox")},
		{Link: link("recnew0002", "https://new.example/2")},
	}
	batch := []shortener.LinkRecord{
		other(recs[2]), fresh[0], other(recs[0]), // conflicts with and without statistics
		{Link: link("recexists1", "https://exists.example/"), Stats: stats(1, 0, "2026-03-21", "b.example", "Chrome")},
		fresh[1], other(recs[4]),
	}
	res, err := rs.ImportRecords(ctx(t), batch)
	if err != nil {
		t.Fatalf("ImportRecords: %v", err)
	}
	want := []shortener.ImportResult{shortener.Conflicting, shortener.Imported, shortener.Conflicting,
		shortener.Unchanged, shortener.Imported, shortener.Conflicting}
	for i := range want {
		if res[i] != want[i] {
			t.Errorf("record %d (%s): result %d, want %d", i, batch[i].Link.ID, res[i], want[i])
		}
	}
	all := append(append(recs, fresh...), shortener.LinkRecord{Link: link("recexists1", "https://exists.example/")})
	wantExport(t, rs, all)
}

// The same id twice in one call: the first is stored, the second is
// Unchanged if the same and Conflicting if not.
func testRecordsDuplicates(t *testing.T, s shortener.Store, rs shortener.RecordStore) {
	a := shortener.LinkRecord{Link: link("recdup0001", "https://dup.example/a"), Stats: stats(2, 0, "2026-03-14", "a.example", "Firefox")}
	b := shortener.LinkRecord{Link: link("recdup0002", "https://dup.example/b")}
	changed := a
	changed.Link.URL = "https://dup.example/changed"
	mustImport(t, rs, []shortener.LinkRecord{a, b, a, changed, b}, shortener.Imported, shortener.Imported,
		shortener.Unchanged, shortener.Conflicting, shortener.Unchanged)
	wantExport(t, rs, []shortener.LinkRecord{a, b})
}

// More records than one write of any store takes at once (DynamoDB: 100
// items a transaction), with and without statistics, imported twice.
func testRecordsMany(t *testing.T, s shortener.Store, rs shortener.RecordStore) {
	var recs []shortener.LinkRecord
	for i := range 230 {
		r := shortener.LinkRecord{Link: link(fmt.Sprintf("recmany%03d", i), fmt.Sprintf("https://many.example/%d", i))}
		if i%3 != 0 {
			r.Stats = stats(int64(i%7+1), int64(i%2), fmt.Sprintf("2026-03-%02d", i%28+1), "r.example", "Firefox")
		}
		recs = append(recs, r)
	}
	mustImport(t, rs, recs, shortener.Imported)
	mustImport(t, rs, recs, shortener.Unchanged)
	wantExport(t, rs, recs)
}
