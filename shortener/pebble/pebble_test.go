package pebble_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/pebble"
	"github.com/linkgate/linkgate/shortener/pebble/pebbletest"
	"github.com/linkgate/linkgate/shortener/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) shortener.Store {
		s, _ := pebbletest.Open(t)
		return s
	})
}

func TestRecordsConformance(t *testing.T) {
	storetest.RunRecords(t, func(t *testing.T) shortener.Store {
		s, _ := pebbletest.Open(t)
		return s
	})
}

// powerLoss is the storetest harness on pebble's crash-testing file
// system: Cut keeps only what was synced (CrashClone with no unsynced
// data), and Open opens the store on that.
func powerLoss(opts pebble.Options) func() storetest.PowerLoss {
	return func() storetest.PowerLoss {
		fs := vfs.NewCrashableMem()
		var mu sync.Mutex
		return storetest.PowerLoss{
			Open: func() (shortener.Store, error) {
				mu.Lock()
				o := opts
				o.FS = fs
				mu.Unlock()
				return pebble.Open("links", o)
			},
			Cut: func() {
				mu.Lock()
				fs = fs.CrashClone(vfs.CrashCloneCfg{})
				mu.Unlock()
			},
		}
	}
}

// powerLossRounds is how many rounds TestPowerLoss runs.
const powerLossRounds = 5

func TestPowerLoss(t *testing.T) {
	storetest.RunPowerLoss(t, powerLoss(pebble.Options{}), powerLossRounds)
}

// The power-loss test has teeth: with creates committed without a sync,
// the same rounds fail (acknowledged creates are lost). A round can pass
// by chance, when the create the power is cut after happened to be
// synced by another operation's sync; all of them never do.
func TestPowerLossFailsWithoutSync(t *testing.T) {
	p := powerLoss(pebble.WithCreatesNotSynced(pebble.Options{}))
	failed := 0
	for range powerLossRounds {
		seed := rand.Uint64()
		err := storetest.CheckPowerLoss(p(), seed)
		switch {
		case err == nil:
			t.Logf("seed %d: passed (the last creates were synced by another operation)", seed)
		case !strings.Contains(err.Error(), "acknowledged creates lost"):
			t.Fatalf("seed %d: failed for another reason than lost creates: %v", seed, err)
		default:
			failed++
			t.Logf("seed %d: fails as it must: %v", seed, err)
		}
	}
	if failed == 0 {
		t.Fatalf("the power-loss case passed all %d rounds with unsynced creates", powerLossRounds)
	}
}

// Links of other domains are kept as the package comment's layout says
// ('l' domain 0x00 id), and a reopened store (whose read index is built
// from those keys) answers each under its link key, with AppendURL too.
func TestReopenKeepsDomainLinks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "links")
	s, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keys := []string{"same", shortener.LinkKey("go.example.com", "same"), shortener.LinkKey("a.example:8080", "same")}
	for _, k := range keys {
		if err := s.Create(ctx, shortener.Link{ID: k, URL: "https://t.example/" + k}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, k := range keys {
		dst, _, err := s.AppendURL(ctx, nil, []byte(k))
		if l, gerr := s.Get(ctx, k); err != nil || gerr != nil || string(dst) != "https://t.example/"+k || l.ID != k {
			t.Errorf("key %q after reopen: AppendURL %q %v, Get %+v %v", k, dst, err, l, gerr)
		}
	}
	p, err := s.List(ctx, "", 10)
	if err != nil || len(p.Links) != 3 || p.Links[0].ID != "same" || p.Links[1].ID != keys[2] || p.Links[2].ID != keys[1] {
		t.Errorf("List after reopen: %+v %v", p, err)
	}
}

func TestReopenKeepsLinksAndVisits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "links")
	s, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := shortener.Link{ID: "reopen0001", URL: "https://r.example/", CreatedAt: time.Unix(1700000000, 0).UTC(),
		ExpiresAt: time.Unix(1900000000, 0).UTC(), MaxVisits: 7, Visits: 2}
	if err := s.Create(ctx, want); err != nil {
		t.Fatal(err)
	}
	if err := s.AddVisits(ctx, shortener.NewVisitBatch(shortener.VisitDelta{ID: want.ID, Limited: true,
		Stats: shortener.VisitStats{Total: 3, Browsers: shortener.Breakdown{"Chrome": 3}}})); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Get(ctx, want.ID)
	want.Visits = 5
	if err != nil || !storetest.Equal(got, want) {
		t.Fatalf("after reopen: %+v, %v; want %+v", got, err, want)
	}
}

// A second Open of a held store fails at once and says who holds it.
func TestOpenLockedFails(t *testing.T) {
	_, dir := pebbletest.Open(t)
	_, err := pebble.Open(dir, pebble.Options{})
	if err == nil {
		t.Fatal("second Open of a held store succeeded")
	}
	if !strings.Contains(err.Error(), "locked") {
		t.Errorf("error does not say the store is locked: %v", err)
	}
}

func TestClosedStoreFailsCleanly(t *testing.T) {
	s, err := pebble.Open(filepath.Join(t.TempDir(), "links"), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	ctx := context.Background()
	if err := s.Ping(ctx); !errors.Is(err, shortener.ErrUnavailable) {
		t.Errorf("Ping after Close = %v, want ErrUnavailable", err)
	}
	if _, err := s.Get(ctx, "x"); !errors.Is(err, shortener.ErrUnavailable) {
		t.Errorf("Get after Close = %v, want ErrUnavailable", err)
	}
}

// Compactions add up the merge operands of a link's statistics exactly,
// and a delete removes them: a link created again under the id starts at
// zero, even after the operands went through compactions.
func TestVisitsThroughCompactions(t *testing.T) {
	s, _ := pebbletest.Open(t)
	ctx := context.Background()
	for i := range 50 {
		if err := s.Create(ctx, shortener.Link{ID: fmt.Sprintf("cmp%04d", i), URL: "https://c.example/"}); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 20 {
		var deltas []shortener.VisitDelta
		for i := range 50 {
			deltas = append(deltas, shortener.VisitDelta{ID: fmt.Sprintf("cmp%04d", i), Stats: shortener.VisitStats{Total: 2,
				Days: shortener.Breakdown{fmt.Sprintf("2026-03-%02d", 1+round%28): 2}, Referrers: shortener.Breakdown{"r.example": 2}}})
		}
		if err := s.AddVisits(ctx, shortener.NewVisitBatch(deltas...)); err != nil {
			t.Fatal(err)
		}
		if round%5 == 4 {
			if err := s.Compact(); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, err := s.VisitStats(ctx, "cmp0007")
	if err != nil || st.Total != 40 || st.Referrers["r.example"] != 40 || len(st.Days) != 20 {
		t.Fatalf("stats after compactions: %+v, %v", st, err)
	}
	if err := s.Delete(ctx, "cmp0007"); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, shortener.Link{ID: "cmp0007", URL: "https://again.example/"}); err != nil {
		t.Fatal(err)
	}
	if st, err := s.VisitStats(ctx, "cmp0007"); err != nil || st.Total != 0 {
		t.Fatalf("stats of the id created again: %+v, %v", st, err)
	}
}

// BenchmarkAppendURL measures the store half of the redirect path.
func BenchmarkAppendURL(b *testing.B) {
	s, _ := pebbletest.Open(b)
	ctx := context.Background()
	ids := make([][]byte, 10000)
	recs := make([]shortener.LinkRecord, len(ids))
	for i := range ids {
		ids[i] = fmt.Appendf(nil, "bench%05d", i)
		recs[i].Link = shortener.Link{ID: string(ids[i]), URL: "https://bench.example/some/path?q=" + string(ids[i])}
	}
	if _, err := s.ImportRecords(ctx, recs); err != nil {
		b.Fatal(err)
	}
	if err := s.Compact(); err != nil { // in tables, as in a long-running store
		b.Fatal(err)
	}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		var err error
		if buf, _, err = s.AppendURL(ctx, buf[:0], ids[i%len(ids)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateParallel measures durable creates with concurrent
// writers sharing pebble's group commits (each op is one synced create),
// and reports how many creates each write-ahead log sync carried. With
// -cpu 1, "pebble-default" is the store without the wait after each sync
// that a single P needs (syncGather in pebble.go): the anchor of
// "store" in the same run.
func BenchmarkCreateParallel(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts pebble.Options
	}{
		{"store", pebble.Options{}},
		{"pebble-default", pebble.WithoutSyncGathering(pebble.Options{})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := pebble.Open(filepath.Join(b.TempDir(), "links"), bc.opts)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			var n atomic.Int64
			syncs := pebble.WALSyncs(s)
			b.ReportAllocs()
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := fmt.Sprintf("c%09d", n.Add(1))
					if err := s.Create(ctx, shortener.Link{ID: id, URL: "https://create.example/" + id}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/float64(max(pebble.WALSyncs(s)-syncs, 1)), "creates/sync")
		})
	}
}

// Visits flushed after their link was deleted and another created under
// the id (the aggregator had them pending) do not count for the new link.
func TestVisitsOfAnEarlierLinkDropped(t *testing.T) {
	s, _ := pebbletest.Open(t)
	ctx := context.Background()
	old := shortener.Link{ID: "reborn0001", URL: "https://old.example/", CreatedAt: time.Unix(1700000000, 0).UTC()}
	if err := s.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, old.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, shortener.Link{ID: old.ID, URL: "https://new.example/", CreatedAt: time.Unix(1700000100, 0).UTC()}); err != nil {
		t.Fatal(err)
	}
	batch := shortener.NewVisitBatch(shortener.VisitDelta{ID: old.ID, CreatedAt: old.CreatedAt.Unix(), Stats: shortener.VisitStats{Total: 4}})
	if err := s.AddVisits(ctx, batch); err != nil || !batch.Links[0].Applied {
		t.Fatalf("AddVisits: %v (applied %v)", err, batch.Links[0].Applied)
	}
	if st, err := s.VisitStats(ctx, old.ID); err != nil || st.Total != 0 {
		t.Fatalf("the new link has %+v (%v); want no visits", st, err)
	}
}

// BenchmarkFind is one page of a filtered listing (Service.Find, answered
// by the list's index, listindex.go) in a store of 100,000 links: what a
// page of GET /api/v1/links?tag= costs. BenchmarkListPage compares the
// index with the scan of every link at 1M links (docs/serve.md, "Editing
// and listing links").
func BenchmarkFind(b *testing.B) {
	s, _ := pebbletest.Open(b)
	ctx := context.Background()
	recs := make([]shortener.LinkRecord, 100000)
	base := time.Unix(1.8e9, 0).UTC()
	for i := range recs {
		l := shortener.Link{ID: fmt.Sprintf("find%06d", i), URL: fmt.Sprintf("https://find.example/path/%d?q=x", i), CreatedAt: base.Add(time.Duration(i) * time.Second)}
		if i%100 == 0 {
			l.Tags = []string{"rare"}
		}
		recs[i].Link = l
	}
	for i := 0; i < len(recs); i += 10000 {
		if _, err := s.ImportRecords(ctx, recs[i:i+10000]); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Compact(); err != nil {
		b.Fatal(err)
	}
	svc := shortener.NewService(s, shortener.Options{})
	for _, f := range []struct {
		name   string
		filter shortener.ListFilter
	}{{"tag", shortener.ListFilter{Tag: "rare"}}, {"q", shortener.ListFilter{Query: "path/4242"}}, {"newest", shortener.ListFilter{}}} {
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := svc.Find(ctx, "", 100, f.filter)
				if err != nil || len(p.Links) == 0 {
					b.Fatal(len(p.Links), err)
				}
			}
		})
	}
}

// BenchmarkVisitsSpread measures the store's cost per visit when visits
// are spread over many links (make bench-serve's random ids): each op is
// one visit batch of 2,000 links, each visited once, into a store of
// 200,000 links, with the flushes and compactions it causes counted in
// the time (run it with -cpu 1, as the server runs: pebble's background
// work then shares the one core), and a final compaction of everything.
func BenchmarkVisitsSpread(b *testing.B) {
	s, _ := pebbletest.Open(b)
	ctx := context.Background()
	const links, perBatch = 200_000, 2000
	recs := make([]shortener.LinkRecord, links)
	for i := range recs {
		recs[i].Link = shortener.Link{ID: fmt.Sprintf("spread%06d", i), URL: "https://spread.example/"}
	}
	if _, err := s.ImportRecords(ctx, recs); err != nil {
		b.Fatal(err)
	}
	if err := s.Compact(); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	deltas := make([]shortener.VisitDelta, perBatch)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for i := range deltas {
			deltas[i] = shortener.VisitDelta{ID: recs[rng.IntN(links)].Link.ID, Stats: shortener.VisitStats{Total: 1,
				Days: shortener.Breakdown{"2026-12-01": 1}, Referrers: shortener.Breakdown{shortener.DirectReferrer: 1},
				Browsers: shortener.Breakdown{"Chrome": 1}}}
		}
		batch := shortener.NewVisitBatch(deltas...)
		b.StartTimer()
		if err := s.AddVisits(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Compact(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perBatch), "ns/visit")
}

// Every link's statistics come out exact whether its key has one merge
// operand (passed through) or several (added), read from the memtable or
// after flushes and compactions, with the mergers reused between keys.
func TestVisitsOneOrManyOperands(t *testing.T) {
	s, _ := pebbletest.Open(t)
	ctx := context.Background()
	const links = 300
	recs := make([]shortener.LinkRecord, links)
	for i := range recs {
		recs[i].Link = shortener.Link{ID: fmt.Sprintf("ops%04d", i), URL: "https://ops.example/"}
	}
	if _, err := s.ImportRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	want := make([]int64, links)
	check := func(when string) {
		t.Helper()
		for i, n := range want {
			st, err := s.VisitStats(ctx, recs[i].Link.ID)
			if err != nil || st.Total != n || st.Referrers["r.example"] != n || (n > 0 && st.Days["2026-12-01"] != n) {
				t.Fatalf("%s: link %d: %+v, %v; want total %d", when, i, st, err, n)
			}
		}
	}
	for round := range 8 {
		var deltas []shortener.VisitDelta
		for i := range links {
			if i%8 > round { // link i gets 8-i%8 operands: 1 to 8
				continue
			}
			deltas = append(deltas, shortener.VisitDelta{ID: recs[i].Link.ID, Stats: shortener.VisitStats{Total: int64(round + 1),
				Days: shortener.Breakdown{"2026-12-01": int64(round + 1)}, Referrers: shortener.Breakdown{"r.example": int64(round + 1)}}})
			want[i] += int64(round + 1)
		}
		if err := s.AddVisits(ctx, shortener.NewVisitBatch(deltas...)); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("round %d", round))
		if round%3 == 1 {
			if err := s.Compact(); err != nil {
				t.Fatal(err)
			}
			check(fmt.Sprintf("round %d, compacted", round))
		}
	}
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	check("compacted")
}

// The all-links, domain and tag records of a chunk count every name its
// links brought: a few merged link by link, more appended and sorted once.
func TestScopeRecordsOfManyNames(t *testing.T) {
	s, _ := pebbletest.Open(t)
	ctx := context.Background()
	today := shortener.DayStart(time.Now())
	const links = 150
	recs := make([]shortener.LinkRecord, links)
	deltas := make([]shortener.VisitDelta, links)
	for i := range recs {
		recs[i].Link = shortener.Link{ID: fmt.Sprintf("names%03d", i), URL: "https://names.example/", Tags: []string{"many"}}
		deltas[i] = shortener.VisitDelta{ID: recs[i].Link.ID, Stats: shortener.VisitStats{Total: 2,
			Days:      shortener.Breakdown{today.Format(shortener.DayFormat): 2},
			Referrers: shortener.Breakdown{fmt.Sprintf("r%03d.example", i%100): 2}, Browsers: shortener.Breakdown{"Chrome": 2}}}
	}
	if _, err := s.ImportRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if err := s.AddVisits(ctx, shortener.NewVisitBatch(deltas...)); err != nil {
		t.Fatal(err)
	}
	for _, q := range []shortener.StatsQuery{{}, {Tag: "many"}, {DomainSet: true}} {
		for _, g := range []shortener.Granularity{shortener.GranularityDay, shortener.GranularityHour} {
			q.From, q.To, q.Granularity = today, today.Add(24*time.Hour), g
			c, err := s.VisitCounts(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			var people int64
			for _, pb := range c.Series {
				people += pb.People
			}
			refs := c.Dims[shortener.DimReferrer]
			if people != 2*links || len(refs) != 100 || c.Dims[shortener.DimBrowser]["Chrome"].People != 2*links {
				t.Errorf("%+v by %v: %d people, %d referrers, browsers %v", q, g, people, len(refs), c.Dims[shortener.DimBrowser])
			}
			for i := range 100 {
				if want := int64(2 + 2*min(1, (links-1-i)/100)); refs[fmt.Sprintf("r%03d.example", i)].People != want {
					t.Errorf("%+v by %v: referrer %d counted %d, want %d", q, g, i, refs[fmt.Sprintf("r%03d.example", i)].People, want)
				}
			}
		}
	}
}

// AddVisits commits a batch VisitChunk links at a time: a reader between
// two commits sees the visits of the chunks before and not the next one's,
// only the last commit syncs (the power-loss test checks that it makes the
// batch durable), and after a failed commit exactly the links of the
// chunks before it are Applied.
func TestVisitsCommittedInChunks(t *testing.T) {
	ctx := context.Background()
	n := 2*pebble.VisitChunk + 10
	recs := make([]shortener.LinkRecord, n)
	for i := range recs {
		recs[i].Link = shortener.Link{ID: fmt.Sprintf("chunk%05d", i), URL: "https://chunk.example/"}
	}
	var s *pebble.Store
	var chunks []string // per commit, its links and s for synced
	var seen []int64    // link 0's total, read before each commit
	fail := 0           // the commit to fail, from 1; 0: none
	hook := func(links int, sync bool) error {
		chunks = append(chunks, fmt.Sprint(links, map[bool]string{true: "s"}[sync]))
		st, err := s.VisitStats(ctx, recs[0].Link.ID)
		if err != nil {
			t.Error(err)
		}
		seen = append(seen, st.Total)
		if len(chunks) == fail {
			return errors.New("injected commit failure")
		}
		return nil
	}
	s, err := pebble.Open(filepath.Join(t.TempDir(), "links"), pebble.WithoutSyncGathering(pebble.WithVisitChunkHook(pebble.Options{}, hook)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.ImportRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	visitAll := func() *shortener.VisitBatch {
		deltas := make([]shortener.VisitDelta, n)
		for i := range deltas {
			deltas[i] = shortener.VisitDelta{ID: recs[i].Link.ID, Stats: shortener.VisitStats{Total: 1, Days: shortener.Breakdown{"2026-12-02": 1}}}
		}
		return shortener.NewVisitBatch(deltas...)
	}
	totals := func() []int64 {
		out := make([]int64, n)
		for i := range recs {
			st, err := s.VisitStats(ctx, recs[i].Link.ID)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = st.Total
		}
		return out
	}

	if err := s.AddVisits(ctx, visitAll()); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("[%d %d 10s]", pebble.VisitChunk, pebble.VisitChunk)
	if fmt.Sprint(chunks) != want {
		t.Fatalf("commits of %v links (s: synced), want %v", chunks, want)
	}
	if fmt.Sprint(seen) != "[0 1 1]" {
		t.Errorf("link 0's total before each commit %v, want [0 1 1]", seen)
	}
	for i, got := range totals() {
		if got != 1 {
			t.Fatalf("link %d: total %d after one visit", i, got)
		}
	}

	chunks, seen, fail = nil, nil, 2
	batch := visitAll()
	if err := s.AddVisits(ctx, batch); err == nil {
		t.Fatal("AddVisits with its second commit failing returned nil")
	}
	got := totals()
	for i := range batch.Links {
		applied := i < pebble.VisitChunk
		if batch.Links[i].Applied != applied || got[i] != map[bool]int64{true: 2, false: 1}[applied] {
			t.Fatalf("link %d after the second commit failed: Applied %v, total %d; want Applied %v", i, batch.Links[i].Applied, got[i], applied)
		}
	}

	// With the last chunk's links deleted, nothing is left to merge
	// there, and the last commit still syncs the chunks before it.
	for _, r := range recs[2*pebble.VisitChunk:] {
		if err := s.Delete(ctx, r.Link.ID); err != nil {
			t.Fatal(err)
		}
	}
	chunks, seen, fail = nil, nil, 0
	if err := s.AddVisits(ctx, visitAll()); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(chunks) != want {
		t.Errorf("a batch whose last chunk merges nothing: commits of %v links (s: synced), want %v", chunks, want)
	}
	if st, err := s.VisitStats(ctx, recs[2*pebble.VisitChunk-1].Link.ID); err != nil || st.Total != 2 {
		t.Errorf("the last visited link: %+v, %v; want total 2", st, err)
	}
}

// BenchmarkVisitsFlushStall measures how late a flush of 20,000 links
// (each visited once, into a store of them) makes another goroutine run
// on one P: a goroutine sleeping 100 µs at a time, as a redirect arriving,
// records how late it wakes while AddVisits runs. Run it with -cpu 1.
func BenchmarkVisitsFlushStall(b *testing.B) {
	s, _ := pebbletest.Open(b)
	ctx := context.Background()
	const links = 20_000
	recs := make([]shortener.LinkRecord, links)
	deltas := make([]shortener.VisitDelta, links)
	for i := range recs {
		recs[i].Link = shortener.Link{ID: fmt.Sprintf("stall%06d", i), URL: "https://stall.example/"}
		deltas[i] = shortener.VisitDelta{ID: recs[i].Link.ID, Stats: shortener.VisitStats{Total: 1,
			Days: shortener.Breakdown{"2026-12-02": 1}, Referrers: shortener.Breakdown{"news.example.com": 1},
			Browsers: shortener.Breakdown{"Chrome": 1}}}
	}
	if _, err := s.ImportRecords(ctx, recs); err != nil {
		b.Fatal(err)
	}
	var lates []time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		batch := shortener.NewVisitBatch(deltas...)
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				t := time.Now()
				time.Sleep(100 * time.Microsecond) // the probe: how late a short sleep wakes is what this benchmark reports
				lates = append(lates, time.Since(t)-100*time.Microsecond)
			}
		}()
		b.StartTimer()
		if err := s.AddVisits(ctx, batch); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		close(stop)
		<-done
		b.StartTimer()
	}
	slices.Sort(lates)
	if len(lates) > 0 {
		b.ReportMetric(float64(lates[len(lates)*99/100].Microseconds()), "p99-late-µs")
		b.ReportMetric(float64(lates[len(lates)-1].Microseconds()), "max-late-µs")
	}
}
