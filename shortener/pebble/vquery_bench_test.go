package pebble

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/linkgate/linkgate/shortener"
)

// The statistics queries of issue 27 §4, timed as the server answers them
// (Service.VisitReport over the store, no aggregator in front):
//
//   - one link's last 90 days by day (target p99 ≤ 10 ms);
//   - all links' last 30 days by day with the top links, over 1,000,000
//     links and 100,000,000 visits (target ≤ 1 s).
//
// 100M visits through the visit aggregator would take hours here, so the
// store is given the records those visits leave directly (writeDayRecords):
// per link and day one day record, per link and span of days one span
// record, and per day the all-links record, in
// the record format AddVisits writes (appendBrec), each a Set where a live
// store holds a Merge of the flushes' records (a compacted store holds the
// same single value). Hour records are left out: no query here reads them.
// The links' visits follow a Zipf law (link r gets 1/(r+1) of the visits,
// normalised; the least visited link still gets 6) spread evenly over the
// days they fall on ("zipf", 17.3M link-day records), or are even ("uniform":
// 100 visits per link over all 30 days, 30M records, the worst case for
// the scan). Each record names a referrer, a browser, an OS, a device and
// a country. Only the links that can be top links exist as links (the rest
// are not read by the query).
//
//	go test -run '^$' -bench BenchmarkStatsQuery -benchtime 20x ./shortener/pebble/

// BenchmarkStatsQueryLink90Days: one busy link (every day of 90 with ~150
// values over its dimensions), its last 90 days by day.
func BenchmarkStatsQueryLink90Days(b *testing.B) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	s, svc := benchStatsStore(b, now)
	const id = "busy000001"
	if err := s.Create(context.Background(), shortener.Link{ID: id, URL: "https://example.com/", CreatedAt: now.AddDate(0, -6, 0)}); err != nil {
		b.Fatal(err)
	}
	today := uint32(now.Unix() / 86400)
	rng := rand.New(rand.NewPCG(1, 2))
	batch := s.db.NewBatch()
	var key, val []byte
	for d := today - 99; d <= today; d++ {
		var es []ventry
		add := func(kind shortener.VisitKind, prefix string, n, each int) {
			for i := range n {
				es = append(es, ventry{kind: kind, bot: kind == shortener.KindBot, name: []byte(prefix + strconv.Itoa(i)), n: int64(1 + rng.IntN(each))})
			}
		}
		add(shortener.KindReferrer, "r", 50, 100)
		add(shortener.KindBrowser, "b", 8, 500)
		add(shortener.KindOS, "o", 6, 500)
		add(shortener.KindDevice, "d", 3, 1000)
		add(shortener.KindCountry, "c", 40, 100)
		add(shortener.KindBot, "bot", 10, 20)
		add(shortener.KindUTMSource, "s", 10, 100)
		add(shortener.KindUTMMedium, "m", 5, 100)
		add(shortener.KindUTMCampaign, "k", 10, 100)
		es = sortEntries(es)
		key = linkBucketKey(key[:0], resDay, d, id)
		val = appendBrec(val[:0], 3000, 100, es)
		if err := batch.Set(key, val, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := batch.Commit(pebbledb.Sync); err != nil {
		b.Fatal(err)
	}
	q := shortener.StatsQuery{ID: id, From: now.AddDate(0, 0, -90), To: now, Granularity: shortener.GranularityDay}
	benchReport(b, svc, q, func(r *shortener.StatsReport) error {
		if len(r.Series) != 91 || r.Total != 91*3100 || len(r.Top[shortener.DimReferrer]) != shortener.DefaultTop+1 {
			return fmt.Errorf("series %d, total %d, referrers %d", len(r.Series), r.Total, len(r.Top[shortener.DimReferrer]))
		}
		return nil
	})
}

// BenchmarkStatsQueryAllLinks30Days: all links' last 30 days by day, with
// the top links, over 1M links and 100M visits, read from the links' span
// records (records=span) and, as format 2 read them, from their day
// records (records=day: the anchor), which must give the same top links (N and VISITS in the
// environment make it smaller: LINKGATE_BENCH_LINKS, LINKGATE_BENCH_VISITS;
// LINKGATE_BENCH_STATS_DIR keeps the generated stores there for the next
// run). LINKGATE_BENCH_SHAPES picks the shapes (default "zipf uniform").
func BenchmarkStatsQueryAllLinks30Days(b *testing.B) {
	links := envInt(b, "LINKGATE_BENCH_LINKS", 1_000_000)
	visits := envInt(b, "LINKGATE_BENCH_VISITS", 100_000_000)
	shapes := strings.Fields(os.Getenv("LINKGATE_BENCH_SHAPES"))
	if len(shapes) == 0 {
		shapes = []string{"zipf", "uniform"}
	}
	for _, shape := range shapes {
		b.Run(shape, func(b *testing.B) {
			now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
			dir := ""
			if keep := os.Getenv("LINKGATE_BENCH_STATS_DIR"); keep != "" {
				dir = filepath.Join(keep, fmt.Sprintf("%s-%d-%d", shape, links, visits))
			}
			s, svc, fresh := benchStatsStoreIn(b, dir, now)
			var total int64
			if fresh {
				start := time.Now()
				var records int
				records, total = writeDayRecords(b, s, now, shape, links, visits)
				b.Logf("%s: %d links, %d visits, %d link-day records written in %s", shape, links, total, records, time.Since(start).Round(time.Second))
				if dir != "" {
					if err := os.WriteFile(filepath.Join(dir, "total"), []byte(strconv.FormatInt(total, 10)), 0o644); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				data, err := os.ReadFile(filepath.Join(dir, "total"))
				if err != nil {
					b.Fatal(err)
				}
				total, _ = strconv.ParseInt(string(data), 10, 64)
			}
			q := shortener.StatsQuery{From: now.AddDate(0, 0, -30), To: now, Granularity: shortener.GranularityDay}
			var top []shortener.LinkCount // the day records' answer, which the span records' must equal
			for _, records := range []string{"day", "span"} {
				b.Run("records="+records, func(b *testing.B) {
					s.scanDayRecords = records == "day"
					benchReport(b, svc, q, func(r *shortener.StatsReport) error {
						if r.Total != total || len(r.Links) != shortener.DefaultTop {
							return fmt.Errorf("total %d (want %d), top links %d", r.Total, total, len(r.Links))
						}
						if top != nil && !slices.EqualFunc(top, r.Links, func(a, b shortener.LinkCount) bool {
							return a.Link.ID == b.Link.ID && a.Count == b.Count
						}) {
							return fmt.Errorf("top links %+v, the day records' %+v", r.Links, top)
						}
						top = r.Links
						return nil
					})
					debug.FreeOSMemory() // the generator's counts are garbage now
					b.ReportMetric(rssAnonMiB(b), "RssAnon-MiB")
				})
			}
		})
	}
}

func benchStatsStore(b *testing.B, now time.Time) (*Store, *shortener.Service) {
	s, svc, _ := benchStatsStoreIn(b, "", now)
	return s, svc
}

// benchStatsStoreIn opens the store in dir (a temporary one when ""),
// fresh when dir holds no complete store (its "total" file).
func benchStatsStoreIn(b *testing.B, dir string, now time.Time) (*Store, *shortener.Service, bool) {
	b.Helper()
	fresh := true
	if dir == "" {
		dir = b.TempDir()
	} else if _, err := os.Stat(filepath.Join(dir, "total")); err == nil {
		fresh = false
	} else if err := os.RemoveAll(dir); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	s, err := Open(filepath.Join(dir, "links"), Options{VisitClock: func() time.Time { return now }, NoIndex: true})
	if err != nil {
		b.Fatal(err)
	}
	if !fresh {
		b.Logf("opened %s in %s (a store of an earlier format is migrated)", dir, time.Since(start).Round(time.Millisecond))
	}
	b.Cleanup(func() { s.Close() })
	return s, shortener.NewService(s, shortener.Options{Now: func() time.Time { return now }}), fresh
}

// benchReport times VisitReport(q) b.N times, reporting the median and
// the p99 besides the mean; check checks an answer.
func benchReport(b *testing.B, svc *shortener.Service, q shortener.StatsQuery, check func(*shortener.StatsReport) error) {
	b.Helper()
	ctx := context.Background()
	r, err := svc.VisitReport(ctx, q) // warm the cache once, and check
	if err != nil {
		b.Fatal(err)
	}
	if err := check(&r); err != nil {
		b.Fatal(err)
	}
	var took []time.Duration
	cpu0 := cpuTime(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t := time.Now()
		if _, err := svc.VisitReport(ctx, q); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t))
	}
	b.StopTimer()
	// The process's CPU time per query: what the answer costs, which a
	// loaded machine's waits do not inflate (pebble's background work
	// included, none expected while only reading).
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(len(took))/1e6, "cpu-ms/op")
	slices.Sort(took)
	at := func(p float64) float64 {
		return float64(took[min(len(took)-1, int(math.Ceil(p*float64(len(took))))-1)]) / 1e6
	}
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// writeDayRecords writes the day records of visits visits to links links
// over the 30 days before now's (see the top of the file) and creates the
// links that may be top links; it returns the link-day records written
// and the visits they hold.
func writeDayRecords(b *testing.B, s *Store, now time.Time, shape string, links, visits int) (records int, total int64) {
	b.Helper()
	const days = 30
	today := uint32(now.Unix() / 86400)
	first := today - days // the query's range: 30 days back from now, today's bucket included
	var h float64
	for r := range links {
		h += 1 / float64(r+1)
	}
	share := func(r int) int64 {
		if shape == "uniform" {
			return int64(visits / links)
		}
		return int64(math.Round(float64(visits) / h / float64(r+1)))
	}
	// Per day: link → visits that day, written in key order so the
	// batches append; links are named by rank.
	idOf := func(r int) string { return fmt.Sprintf("z%09d", r) }
	rng := rand.New(rand.NewPCG(27, 4))
	perDay := make([][]int32, days+1) // visits of each link on each day (int32: ≤ 100M/H)
	for d := range perDay {
		perDay[d] = make([]int32, links)
	}
	for r := range links {
		v := share(r)
		if v >= days+1 {
			for d := range perDay {
				perDay[d][r] = int32(v / (days + 1))
			}
			perDay[rng.IntN(days+1)][r] += int32(v % (days + 1))
			continue
		}
		for _, d := range rng.Perm(days + 1)[:v] {
			perDay[d][r] = 1
		}
	}
	referrers := []string{"(direct)", "news.example.com", "t.co", "www.google.com", "l.facebook.com", "mail.example"}
	browsers := []string{"Chrome", "Firefox", "Safari", "Edge"}
	oss := []string{"Windows", "Android", "iOS", "macOS", "Linux"}
	devices := []string{"desktop", "mobile", "tablet"}
	countries := []string{"US", "DE", "FR", "GB", "IN", "BR", "JP", "NL"}
	var key, val []byte
	es := make([]ventry, 5)
	for d := range perDay {
		bucket := first + uint32(d)
		batch := s.db.NewBatch()
		var dayPeople int64
		dims := map[dimKey]int64{}
		for r, n := range perDay[d] {
			if n == 0 {
				continue
			}
			es = append(es[:0],
				ventry{kind: shortener.KindReferrer, name: []byte(referrers[r%len(referrers)]), n: int64(n)},
				ventry{kind: shortener.KindBrowser, name: []byte(browsers[r%len(browsers)]), n: int64(n)},
				ventry{kind: shortener.KindOS, name: []byte(oss[r%len(oss)]), n: int64(n)},
				ventry{kind: shortener.KindDevice, name: []byte(devices[r%len(devices)]), n: int64(n)},
				ventry{kind: shortener.KindCountry, name: []byte(countries[r%len(countries)]), n: int64(n)})
			for _, e := range es {
				dims[dimKey{e.kind, string(e.name)}] += e.n
			}
			es = sortEntries(es)
			key = linkBucketKey(key[:0], resDay, bucket, idOf(r))
			val = appendBrec(val[:0], int64(n), 0, es)
			if err := batch.Set(key, val, nil); err != nil {
				b.Fatal(err)
			}
			records++
			dayPeople += int64(n)
			if batch.Len() > 16<<20 {
				if err := batch.Commit(pebbledb.NoSync); err != nil {
					b.Fatal(err)
				}
				batch = s.db.NewBatch()
			}
		}
		es = es[:0]
		for k, n := range dims {
			es = append(es, ventry{kind: k.kind, name: []byte(k.name), n: n})
		}
		es = sortEntries(es)
		key = bucketKey(key[:0], resDay, bucket, subjectAll, "")
		val = appendBrec(val[:0], dayPeople, 0, es)
		if err := batch.Set(key, val, nil); err != nil {
			b.Fatal(err)
		}
		if err := batch.Commit(pebbledb.NoSync); err != nil {
			b.Fatal(err)
		}
		total += dayPeople
	}
	// The links' span records, span by span, links in key order.
	for span := first / spanDays; span <= today/spanDays; span++ {
		batch := s.db.NewBatch()
		for r := range links {
			val = append(val[:0], spanVersion)
			for d := range perDay {
				if day := first + uint32(d); day/spanDays == span && perDay[d][r] > 0 {
					val = appendSpanDay(val, byte(day%spanDays), int64(perDay[d][r]), 0)
				}
			}
			if len(val) == 1 {
				continue
			}
			key = linkBucketKey(key[:0], resSpan, span, idOf(r))
			if err := batch.Set(key, val, nil); err != nil {
				b.Fatal(err)
			}
			if batch.Len() > 16<<20 {
				if err := batch.Commit(pebbledb.NoSync); err != nil {
					b.Fatal(err)
				}
				batch = s.db.NewBatch()
			}
		}
		if err := batch.Commit(pebbledb.NoSync); err != nil {
			b.Fatal(err)
		}
	}
	created := now.AddDate(0, -2, 0)
	for r := range min(links, 100) {
		if err := s.Create(context.Background(), shortener.Link{ID: idOf(r), URL: "https://example.com/" + strings.Repeat("x", r%7), CreatedAt: created}); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.db.Flush(); err != nil {
		b.Fatal(err)
	}
	return records, total
}

type dimKey struct {
	kind shortener.VisitKind
	name string
}

// cpuTime is the CPU time this process used so far (user and system).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// rssAnonMiB is this process's anonymous resident memory.
func rssAnonMiB(b *testing.B) float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "RssAnon:" {
			kb, _ := strconv.Atoi(f[1])
			return float64(kb) / 1024
		}
	}
	return 0
}
