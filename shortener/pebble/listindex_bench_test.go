package pebble_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/pebble"
)

// benchLinks is the store of BenchmarkListPage: 1M links
// (LINKGATE_BENCH_LINKS changes the count), created over a year, 5%
// tagged with one of 20 tags, in three domains, a tenth expiring, and
// 1,000 more whose URLs are not ASCII (addFoldedLinks). It is built once,
// in $TMPDIR/linkgate-bench-list-N (about a minute), and kept there for
// the next run: the index's pages and the scan's take different
// -benchtime.
var benchLinks struct {
	once  sync.Once
	store *pebble.Store
	err   error
}

func listStore(b *testing.B) *pebble.Store {
	benchLinks.once.Do(func() {
		n := 1_000_000
		if v := os.Getenv("LINKGATE_BENCH_LINKS"); v != "" {
			fmt.Sscan(v, &n)
		}
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("linkgate-bench-list-%d", n))
		s, err := pebble.Open(dir, pebble.Options{})
		if err != nil {
			benchLinks.err = err
			return
		}
		benchLinks.store = s
		defer func() {
			if benchLinks.err == nil {
				benchLinks.err = addFoldedLinks(s)
			}
		}()
		if _, err := s.Get(context.Background(), fmt.Sprintf("b%07d", n-1)); err == nil {
			return // built by an earlier run
		}
		// The last link's domain is drawn like the others': look for it
		// in each.
		for _, d := range []string{"go.example", "sho.example"} {
			if _, err := s.Get(context.Background(), d+"/"+fmt.Sprintf("b%07d", n-1)); err == nil {
				return
			}
		}
		rng := rand.New(rand.NewPCG(7, 7))
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		domains := []string{"", "go.example", "sho.example"}
		recs := make([]shortener.LinkRecord, 0, 10_000)
		for i := range n {
			l := shortener.Link{ID: fmt.Sprintf("b%07d", i), URL: fmt.Sprintf("https://site%d.example/path/%d?utm=x", rng.IntN(1000), i),
				CreatedAt: start.Add(time.Duration(rng.Int64N(int64(365 * 24 * time.Hour)))).Truncate(time.Second)}
			if rng.IntN(20) == 0 {
				l.Tags = []string{fmt.Sprintf("tag%02d", rng.IntN(20))}
			}
			if rng.IntN(10) == 0 {
				l.ExpiresAt = l.CreatedAt.Add(30 * 24 * time.Hour)
			}
			if d := domains[rng.IntN(3)]; d != "" {
				l.ID = d + "/" + l.ID
			}
			recs = append(recs, shortener.LinkRecord{Link: l})
			if len(recs) == cap(recs) || i == n-1 {
				if _, err := s.ImportRecords(context.Background(), recs); err != nil {
					benchLinks.err = err
					return
				}
				recs = recs[:0]
			}
		}
		if err := s.Compact(); err != nil {
			benchLinks.err = err
		}
	})
	if benchLinks.err != nil {
		b.Fatal(benchLinks.err)
	}
	return benchLinks.store
}

// addFoldedLinks adds to the store, unless an earlier run did, 1,000
// links created over the same year whose URLs hold letters that are not
// ASCII: https://café%d.example/ÉTÉ/%d.
func addFoldedLinks(s *pebble.Store) error {
	if _, err := s.Get(context.Background(), "u0000999"); err == nil {
		return nil
	}
	rng := rand.New(rand.NewPCG(8, 8))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := make([]shortener.LinkRecord, 1000)
	for i := range recs {
		recs[i].Link = shortener.Link{ID: fmt.Sprintf("u%07d", i), URL: fmt.Sprintf("https://café%d.example/ÉTÉ/%d", rng.IntN(100), i),
			CreatedAt: start.Add(time.Duration(rng.Int64N(int64(365 * 24 * time.Hour)))).Truncate(time.Second)}
	}
	_, err := s.ImportRecords(context.Background(), recs)
	return err
}

// BenchmarkListPage times one page (50 links) of the dashboard's list at
// 1M links: from the index (Store.Find through the Service), and, as the
// anchor, the scan of every link that Service.Find does without one. It
// reports the p50 and p99 of the pages' times (ms) besides the mean.
func BenchmarkListPage(b *testing.B) {
	s := listStore(b)
	indexed := shortener.NewService(s, shortener.Options{})
	scanned := shortener.NewService(scanOnly{s}, shortener.Options{})
	str := func(s string) *string { return &s }
	ctx := context.Background()
	// A cursor deep in the order: the 20,000th newest link.
	deep := ""
	for range 20 {
		p, err := indexed.Find(ctx, deep, 1000, shortener.ListFilter{})
		if err != nil {
			b.Fatal(err)
		}
		deep = p.Next
	}
	for _, c := range []struct {
		name   string
		f      shortener.ListFilter
		cursor string
		none   bool // the page is empty: no link passes
	}{
		{"newest", shortener.ListFilter{}, "", false},
		{"newest-page-400", shortener.ListFilter{}, deep, false},
		{"oldest", shortener.ListFilter{Oldest: true}, "", false},
		{"tag", shortener.ListFilter{Tag: "tag07"}, "", false},
		{"domain", shortener.ListFilter{Domain: str("go.example")}, "", false},
		{"created-in-march", shortener.ListFilter{CreatedAfter: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), CreatedBefore: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)}, "", false},
		{"search-common", shortener.ListFilter{Query: "site1"}, "", false},
		// 11 links: path/12345 and path/123450 to path/123459.
		{"search-rare", shortener.ListFilter{Query: "PATH/12345"}, "", false},
		{"search-none", shortener.ListFilter{Query: "github.com"}, "", true},
		// Sites go to site999: each trigram of it is common, the whole in no URL.
		{"search-none-common-trigrams", shortener.ListFilter{Query: "site1000"}, "", true},
		// 1–2 bytes: no trigram; none of the URLs holds a z.
		{"search-short-none", shortener.ListFilter{Query: "zq"}, "", true},
		// Not ASCII: é is É, and only the 1,000 links of addFoldedLinks have it.
		{"search-folded", shortener.ListFilter{Query: "été/"}, "", false},
		{"search-folded-none", shortener.ListFilter{Query: "naïve"}, "", true},
		{"state-expired", shortener.ListFilter{State: shortener.StateExpired, Now: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}, "", false},
	} {
		for _, svc := range []struct {
			name string
			s    *shortener.Service
		}{{"index", indexed}, {"scan", scanned}} {
			b.Run(c.name+"/"+svc.name, func(b *testing.B) {
				times := make([]time.Duration, 0, b.N)
				b.ReportAllocs()
				for b.Loop() {
					t0 := time.Now()
					p, err := svc.s.Find(ctx, c.cursor, 50, c.f)
					times = append(times, time.Since(t0))
					if err != nil || (len(p.Links) == 0) != c.none {
						b.Fatalf("%d links, %v", len(p.Links), err)
					}
				}
				slices.Sort(times)
				ms := func(q float64) float64 { return float64(times[int(q*float64(len(times)-1))]) / 1e6 }
				b.ReportMetric(ms(0.5), "p50-ms")
				b.ReportMetric(ms(0.99), "p99-ms")
			})
		}
	}
}
