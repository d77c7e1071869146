package visits_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/dynamodb"
	"github.com/linkgate/linkgate/shortener/dynamodb/dynamodbtest"
	"github.com/linkgate/linkgate/shortener/pebble"
	"github.com/linkgate/linkgate/shortener/useragent"
	"github.com/linkgate/linkgate/shortener/visits"
)

// modelVisit is a visit as the model keeps it: everything.
type modelVisit struct {
	t    time.Time
	key  string
	bot  bool
	dims map[shortener.Dimension]string
}

// TestStatsAgainstModel records random visits over a year and more of a
// test clock, through the aggregator into a pebble store, flushing at
// random, and checks every answer of random statistics queries (one link
// or all, by domain or tag, by hour or day, bots in or out, any range
// the retention allows) against a model that counts every visit: the
// bounds (hourly for 7 days, daily for 400) hold over any range, nothing
// is lost or counted twice, and nothing is cut per batch.
func TestStatsAgainstModel(t *testing.T) {
	testStatsAgainstModel(t, func(t *testing.T, clock func() time.Time) modelStore {
		st, err := pebble.Open(filepath.Join(t.TempDir(), "links"), pebble.Options{VisitClock: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return modelStore{Store: st, allLinks: true}
	})
}

// modelStore is a store the model test runs against.
type modelStore struct {
	shortener.Store
	allLinks bool // it answers statistics across links
	// flushed, when set, is called after the aggregator's flushes, with
	// a random number: a store with work of its own does it (DynamoDB:
	// writes its visit log, folds it).
	flushed func(t *testing.T, r int)
}

// TestStatsAgainstModelDynamoDB runs the model test against the DynamoDB
// store over DynamoDB Local (LINKGATE_TEST_DYNAMODB_ENDPOINT), its visit
// log written and folded at random.
func TestStatsAgainstModelDynamoDB(t *testing.T) {
	testStatsAgainstModel(t, func(t *testing.T, clock func() time.Time) modelStore {
		st := dynamodbtest.Open(t, dynamodb.Options{Clock: clock, ManualVisits: true})
		return modelStore{Store: st, allLinks: true, flushed: func(t *testing.T, r int) {
			if r%2 == 0 {
				return // left in the store's buffer: read from there
			}
			if err := st.FlushVisits(context.Background()); err != nil {
				t.Fatal(err)
			}
			if r%3 == 0 {
				if _, err := st.FoldVisits(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		}}
	})
}

func testStatsAgainstModel(t *testing.T, open func(t *testing.T, clock func() time.Time) modelStore) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 27))
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.IntN(86400)) * time.Second)
	clock := func() time.Time { return now }
	created := now.Truncate(time.Second)

	ms := open(t, clock)
	st := ms.Store
	type link struct {
		key  string
		tags []string
	}
	links := []link{{"model00001", []string{"a"}}, {"model00002", []string{"a", "b"}}, {"model00003", nil},
		{"go.example/model00001", []string{"b"}}, {"go.example/model00004", nil}}
	for _, l := range links {
		if err := st.Create(context.Background(), shortener.Link{ID: l.key, URL: "https://t.example/", CreatedAt: created, Tags: l.tags}); err != nil {
			t.Fatal(err)
		}
	}
	tagsOf := map[string][]string{}
	for _, l := range links {
		tagsOf[l.key] = l.tags
	}
	ua := useragent.New()
	agg, err := visits.New(visits.Config{Store: st, Logger: slog.New(slog.DiscardHandler), Classifier: ua, FlushInterval: time.Hour, FlushLinks: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agg.Close(context.Background()) })
	flush := func() {
		t.Helper()
		if err := agg.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if ms.flushed != nil {
			ms.flushed(t, rng.IntN(6))
		}
	}
	svc := shortener.NewService(st, shortener.Options{Now: clock, Visits: agg})

	agents := []string{firefoxUA, "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1",
		"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36",
		"Mozilla/5.0 (iPad; CPU OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1",
		"Twitterbot/1.0", "Slackbot-LinkExpanding 1.0", "facebookexternalhit/1.1", "Discordbot/2.0", "TelegramBot", "WhatsApp/2", "curl/8.4.0", ""}
	referrers := []string{"", "https://news.example.com/a", "https://t.co/x", "not a url", "https://mail.example/", "https://r%d.example/"}
	queries := []string{"", "utm_source=news", "utm_source=a%20b&utm_medium=email", "utm_campaign=%ZZ", "utm_source=&utm_medium=x", "x=1&utm_campaign=c%d"}

	var model []modelVisit
	record := func() {
		l := links[rng.IntN(len(links))]
		agent := agents[rng.IntN(len(agents))]
		ref := referrers[rng.IntN(len(referrers))]
		if ref == "https://r%d.example/" {
			ref = fmt.Sprintf(ref, rng.IntN(40)) // many referrers: none may be cut
		}
		q := queries[rng.IntN(len(queries))]
		if q == "x=1&utm_campaign=c%d" {
			q = fmt.Sprintf(q, rng.IntN(30))
		}
		agg.Record([]byte(l.key), []byte(ref), []byte(agent), []byte(q), netip.Addr{}, "", now, shortener.Link{CreatedAt: created})

		a := ua.Classify([]byte(agent))
		v := modelVisit{t: now, key: l.key, bot: a.Bot, dims: map[shortener.Dimension]string{}}
		var hb [visits.MaxHostLength]byte
		switch h := visits.ReferrerHost([]byte(ref), hb[:]); {
		case h == nil:
			v.dims[shortener.DimReferrer] = visits.InvalidReferrer
		case len(h) == 0:
			v.dims[shortener.DimReferrer] = shortener.DirectReferrer
		default:
			v.dims[shortener.DimReferrer] = string(h)
		}
		if a.Bot {
			v.dims[shortener.DimBot] = a.Name
		} else {
			v.dims[shortener.DimBrowser] = a.Name
		}
		v.dims[shortener.DimOS] = a.OS
		v.dims[shortener.DimDevice] = a.Device
		var ub [3][visits.MaxUTMLength]byte
		for i, u := range visits.UTMValues([]byte(q), &ub) {
			switch {
			case u == nil:
			case len(u) == 0:
				v.dims[shortener.DimUTMSource+shortener.Dimension(i)] = visits.InvalidUTM
			default:
				v.dims[shortener.DimUTMSource+shortener.Dimension(i)] = string(u)
			}
		}
		model = append(model, v)
	}

	check := func(allLinks bool) {
		t.Helper()
		q := shortener.StatsQuery{Top: 1 + rng.IntN(5), Bots: shortener.BotFilter(rng.IntN(3))}
		switch back := rng.IntN(10); {
		case back < 4: // the last week, often by hour
			q.From = now.Add(-time.Duration(rng.Int64N(int64(8 * 24 * time.Hour))))
		default:
			q.From = now.Add(-time.Duration(rng.Int64N(int64(410 * 24 * time.Hour))))
		}
		q.To = q.From.Add(time.Duration(rng.Int64N(int64(now.Sub(q.From)+2*time.Hour))) + time.Second)
		q.Granularity = shortener.Granularity(rng.IntN(3))
		if !allLinks {
			l := links[rng.IntN(len(links))]
			q.Domain, q.ID = shortener.SplitKey(l.key)
		} else {
			switch rng.IntN(4) {
			case 0:
				q.Tag = []string{"a", "b"}[rng.IntN(2)]
			case 1:
				q.Domain, q.DomainSet = []string{"", "go.example"}[rng.IntN(2)], true
			}
		}
		got, err := svc.VisitReport(context.Background(), q)
		rq, _, rerr := q.Resolve(now)
		if rerr != nil {
			if err == nil {
				t.Fatalf("%v: answered, but Resolve says %v", q, rerr)
			}
			return
		}
		if err != nil {
			t.Fatalf("%v: %v", q, err)
		}
		if rq.ID != "" {
			rq.ID = shortener.LinkKey(q.Domain, q.ID)
		}
		want := shortener.Report(rq, modelCounts(model, &rq, tagsOf))
		compareReports(t, rq, got, want)
	}

	for step := range 120 {
		if rng.IntN(10) < 3 {
			now = now.Add(time.Duration(1+rng.IntN(25*24)) * time.Hour) // days
		} else {
			now = now.Add(time.Duration(1+rng.IntN(150)) * time.Minute)
		}
		for range rng.IntN(40) {
			record()
			if rng.IntN(50) == 0 {
				now = now.Add(time.Duration(rng.IntN(60)) * time.Second)
			}
		}
		if rng.IntN(3) == 0 {
			flush()
		}
		check(false) // one link: stored plus pending
		if step%4 == 0 {
			flush()
			if ms.allLinks {
				check(true)
			}
		}
	}
	flush()
	for range 150 {
		check(ms.allLinks && rng.IntN(2) == 0)
	}
	t.Logf("%d visits over %s", len(model), now.Sub(model[0].t).Round(time.Hour))
}

const firefoxUA = "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0"

// modelCounts counts the model's visits over a resolved query's range.
func modelCounts(model []modelVisit, q *shortener.StatsQuery, tags map[string][]string) *shortener.VisitCounts {
	c := shortener.NewVisitCounts(q)
	step := q.Granularity.Step()
	for _, v := range model {
		if v.t.Before(q.From) || !v.t.Before(q.To) {
			continue
		}
		domain, _ := shortener.SplitKey(v.key)
		switch {
		case q.ID != "" && v.key != q.ID:
			continue
		case q.Tag != "" && !slices.Contains(tags[v.key], q.Tag):
			continue
		case q.DomainSet && domain != q.Domain:
			continue
		}
		n := shortener.PeopleBots{People: 1}
		if v.bot {
			n = shortener.PeopleBots{Bots: 1}
		}
		c.Series[int(v.t.Sub(q.From)/step)].Add(n)
		for d, name := range v.dims {
			x := c.Dims[d][name]
			x.Add(n)
			c.Dims[d][name] = x
		}
		if c.Links != nil {
			x := c.Links[v.key]
			x.Add(n)
			c.Links[v.key] = x
		}
	}
	return &c
}

func compareReports(t *testing.T, q shortener.StatsQuery, got, want shortener.StatsReport) {
	t.Helper()
	if got.Query.From != want.Query.From || got.Query.To != want.Query.To || got.Query.Granularity != want.Query.Granularity {
		t.Fatalf("%v: answered %v, want %v", q, got.Query, want.Query)
	}
	if got.Total != want.Total || got.People != want.People || got.Bots != want.Bots || !slices.Equal(got.Series, want.Series) {
		t.Fatalf("%v: totals %d/%d/%d, want %d/%d/%d; series equal %v", q, got.Total, got.People, got.Bots,
			want.Total, want.People, want.Bots, slices.Equal(got.Series, want.Series))
	}
	for d := range shortener.NumDimensions {
		if !slices.Equal(got.Top[d], want.Top[d]) {
			t.Fatalf("%v: top %s %v, want %v", q, d, got.Top[d], want.Top[d])
		}
	}
	if len(got.Links) != len(want.Links) {
		t.Fatalf("%v: links %v, want %v", q, got.Links, want.Links)
	}
	for i := range got.Links {
		if got.Links[i].Link.Key() != want.Links[i].Link.ID || got.Links[i].Count != want.Links[i].Count {
			t.Fatalf("%v: links %v, want %v", q, got.Links, want.Links)
		}
	}
}
