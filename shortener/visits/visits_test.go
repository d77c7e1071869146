package visits_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/pebble"
	"github.com/linkgate/linkgate/shortener/useragent"
	"github.com/linkgate/linkgate/shortener/visits"
)

// day is noon of a day 30 days ago: within the statistics' retention,
// which the store applies by the real clock.
var day = time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -30).Add(12 * time.Hour)

// dayName is the name of day plus n days.
func dayName(n int) string { return day.AddDate(0, 0, n).Format(shortener.DayFormat) }

// store is a real pebble store whose AddVisits can be made to fail or block.
type store struct {
	*pebble.Store
	fail  atomic.Int32  // fail this many AddVisits calls
	gate  chan struct{} // if set, AddVisits waits for it
	calls atomic.Int32
	// badBatch describes a malformed batch AddVisits was given.
	badBatch atomic.Value
	// createdAt is, per link, the CreatedAt of its last batch.
	createdAt sync.Map
}

func (s *store) AddVisits(ctx context.Context, batch *shortener.VisitBatch) error {
	s.calls.Add(1)
	// The batch contract every store relies on: links sorted by id, each
	// once, key numbers in range.
	for i := range batch.Links {
		l := &batch.Links[i]
		s.createdAt.Store(l.ID, l.CreatedAt)
		if i > 0 && batch.Links[i-1].ID >= l.ID {
			s.badBatch.Store(fmt.Sprintf("links %q, %q out of order", batch.Links[i-1].ID, l.ID))
		}
		seen := map[uint32]bool{}
		for _, c := range l.Counts {
			if int(c.Key) >= len(batch.Keys) {
				s.badBatch.Store(fmt.Sprintf("link %q counts key %d of %d", l.ID, c.Key, len(batch.Keys)))
			}
			if seen[c.Key] {
				s.badBatch.Store(fmt.Sprintf("link %q counts key %d twice", l.ID, c.Key))
			}
			seen[c.Key] = true
		}
	}
	if s.gate != nil {
		<-s.gate
	}
	if s.fail.Add(-1) >= 0 {
		return errors.New("injected store failure")
	}
	return s.Store.AddVisits(ctx, batch)
}

func newStore(t testing.TB, ids ...string) *store {
	t.Helper()
	b, err := pebble.Open(filepath.Join(t.TempDir(), "links"), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	for _, id := range ids {
		if err := b.Create(context.Background(), shortener.Link{ID: id, URL: "https://" + id + ".example/"}); err != nil {
			t.Fatal(err)
		}
	}
	s := &store{Store: b}
	t.Cleanup(func() {
		if msg := s.badBatch.Load(); msg != nil {
			t.Errorf("malformed batch: %s", msg)
		}
	})
	return s
}

// classifier: "bot…" user agents are bots, others browsers named as sent.
type classifier struct{}

func (classifier) Classify(ua []byte) visits.Agent {
	if len(ua) >= 3 && string(ua[:3]) == "bot" {
		return visits.Agent{Name: string(ua), Bot: true}
	}
	return visits.Agent{Name: string(ua)}
}

func newAggregator(t *testing.T, s shortener.VisitStore, cfg visits.Config) *visits.Aggregator {
	t.Helper()
	cfg.Store = s
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if cfg.Classifier == nil {
		cfg.Classifier = classifier{}
	}
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = time.Hour // tests flush explicitly
	}
	a, err := visits.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	return a
}

func record(a *visits.Aggregator, id, ref, ua string, n int) {
	for range n {
		a.Record([]byte(id), []byte(ref), []byte(ua), nil, netip.Addr{}, "", day, shortener.Link{})
	}
}

// limitedLink is a link with a visit limit as a redirect resolves it.
var limitedLink = shortener.Link{MaxVisits: 1000, CreatedAt: time.Unix(1_700_000_000, 0)}

// recordLimited records visits of a link with a visit limit, as the
// redirect handler does.
func recordLimited(a *visits.Aggregator, id, ref, ua string, n int) {
	for range n {
		a.Record([]byte(id), []byte(ref), []byte(ua), nil, netip.Addr{}, "", day, limitedLink)
	}
}

func stored(t *testing.T, s shortener.VisitStore, id string) shortener.VisitStats {
	t.Helper()
	st, err := s.VisitStats(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestBatching(t *testing.T) {
	s := newStore(t, "aaa", "bbb")
	a := newAggregator(t, s, visits.Config{})
	record(a, "aaa", "https://News.Example:443/x?y", "Firefox", 3)
	record(a, "aaa", "", "botSlack", 2)
	record(a, "bbb", "not a url", "Chrome", 1)
	if got := s.calls.Load(); got != 0 {
		t.Fatalf("store written %d times before any flush", got)
	}
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := s.calls.Load(); got != 1 {
		t.Errorf("one flush of two links made %d store writes, want 1", got)
	}
	got := stored(t, s, "aaa")
	if got.Total != 5 || got.Bots != 2 || got.Days[dayName(0)] != 5 ||
		got.Referrers["news.example"] != 3 || got.Referrers[shortener.DirectReferrer] != 2 ||
		got.Browsers["Firefox"] != 3 || got.BotAgents["botSlack"] != 2 {
		t.Errorf("aaa: %+v", got)
	}
	if got := stored(t, s, "bbb"); got.Total != 1 || got.Referrers[visits.InvalidReferrer] != 1 {
		t.Errorf("bbb: %+v", got)
	}
	// A second batch adds to the first.
	record(a, "aaa", "", "Firefox", 1)
	a.Flush(context.Background())
	if got := stored(t, s, "aaa"); got.Total != 6 || got.Browsers["Firefox"] != 4 {
		t.Errorf("aaa after a second batch: %+v", got)
	}
	m := a.Metrics()
	if m.Recorded != 7 || m.FlushedVisits != 7 || m.Flushes != 2 || m.Dropped != 0 || m.PendingLinks != 0 {
		t.Errorf("metrics %+v", m)
	}
}

func TestFlushOnInterval(t *testing.T) {
	s := newStore(t, "tick")
	a := newAggregator(t, s, visits.Config{FlushInterval: 20 * time.Millisecond})
	record(a, "tick", "", "Chrome", 4)
	eventually.True(t, 10*time.Second, "the 4 visits stored", func() bool { return stored(t, s, "tick").Total == 4 })
}

func TestFlushBySize(t *testing.T) {
	ids := make([]string, 10)
	for i := range ids {
		ids[i] = fmt.Sprintf("link%02d", i)
	}
	s := newStore(t, ids...)
	a := newAggregator(t, s, visits.Config{FlushLinks: len(ids)})
	for _, id := range ids {
		record(a, id, "", "Chrome", 1)
	}
	// The interval is an hour: only the size can have triggered it.
	eventually.True(t, 10*time.Second, "one flush", func() bool { return a.Metrics().Flushes == 1 })
	for _, id := range ids {
		if got := stored(t, s, id).Total; got != 1 {
			t.Errorf("%s: %d visits stored", id, got)
		}
	}
}

func TestCloseFlushesEverything(t *testing.T) {
	s := newStore(t, "last")
	a := newAggregator(t, s, visits.Config{})
	record(a, "last", "", "Chrome", 9)
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, s, "last").Total; got != 9 {
		t.Errorf("after Close %d visits stored, want 9", got)
	}
}

func TestCloseRetriesFailedBatch(t *testing.T) {
	s := newStore(t, "retry")
	s.fail.Store(2)
	a := newAggregator(t, s, visits.Config{})
	record(a, "retry", "", "Chrome", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, s, "retry").Total; got != 3 {
		t.Errorf("%d visits stored, want 3", got)
	}
}

func TestDropsWhenFull(t *testing.T) {
	s := newStore(t, "l0", "l1", "l2", "l3", "l4", "l5", "l6")
	s.gate = make(chan struct{})
	a := newAggregator(t, s, visits.Config{FlushLinks: 3, MaxLinks: 3})
	record(a, "l0", "", "Chrome", 1)
	record(a, "l1", "", "Chrome", 1)
	record(a, "l2", "", "Chrome", 1) // kicks a flush, which blocks in the store
	eventually.True(t, 10*time.Second, "the pending links flushed in one call", func() bool { return a.Metrics().PendingLinks == 0 && s.calls.Load() == 1 })
	record(a, "l3", "", "Chrome", 1)
	record(a, "l4", "", "Chrome", 1)
	record(a, "l5", "", "Chrome", 2)
	done := make(chan struct{})
	go func() { record(a, "l6", "", "Chrome", 5); close(done) }()
	select {
	case <-done: // recording never blocks, even with the store stuck
	case <-time.After(10 * time.Second):
		t.Fatal("Record blocked while the store was stuck")
	}
	record(a, "l3", "", "Chrome", 1) // a pending link still counts
	close(s.gate)
	if m := a.Metrics(); m.Dropped != 5 || m.Recorded != 3+1+1+2+1 {
		t.Errorf("metrics %+v, want 5 dropped, 8 recorded", m)
	}
	a.Close(context.Background())
	if got := stored(t, s, "l6").Total; got != 0 {
		t.Errorf("dropped link has %d stored visits", got)
	}
	if got := stored(t, s, "l3").Total; got != 2 {
		t.Errorf("l3 has %d stored visits, want 2", got)
	}
}

func TestPendingAndStatsCountEachVisitOnce(t *testing.T) {
	s := newStore(t, "live")
	s.fail.Store(1)
	a := newAggregator(t, s, visits.Config{})
	id := []byte("live")
	recordLimited(a, "live", "https://a.example/", "Chrome", 3)
	if got := a.Pending(id); got != 3 {
		t.Errorf("Pending before flush = %d, want 3", got)
	}
	// A failed flush keeps the visits pending.
	if err := a.Flush(context.Background()); err == nil {
		t.Fatal("flush did not fail")
	}
	recordLimited(a, "live", "", "botX", 1)
	if got := a.Pending(id); got != 4 {
		t.Errorf("Pending after a failed flush = %d, want 4", got)
	}
	st, err := a.Stats(context.Background(), "live")
	if err != nil || st.Total != 4 || st.Bots != 1 || st.Referrers["a.example"] != 3 {
		t.Errorf("Stats = %+v, %v", st, err)
	}
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := a.Pending(id); got != 0 {
		t.Errorf("Pending after flush = %d, want 0", got)
	}
	if got := stored(t, s, "live").Total; got != 4 {
		t.Errorf("stored %d, want 4", got)
	}
	st, _ = a.Stats(context.Background(), "live")
	if st.Total != 4 {
		t.Errorf("Stats after flush total %d, want 4", st.Total)
	}
	// A flush between the store read and Pending leaves the batch out
	// rather than count it twice.
	recordLimited(a, "live", "", "Chrome", 1)
	a.Flush(context.Background())
	if got := a.Pending(id); got != 0 {
		t.Errorf("Pending after a flush = %d, want 0", got)
	}
	if _, err := a.Stats(context.Background(), "nope"); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("Stats(missing) = %v", err)
	}
}

// A batch says, per link, the CreatedAt of the link its visits were of
// (the latest, if the id was a new link part-way), also when a failed
// batch is retried with the next one.
func TestBatchCarriesCreatedAt(t *testing.T) {
	s := newStore(t, "again")
	s.fail.Store(1)
	a := newAggregator(t, s, visits.Config{})
	old := shortener.Link{CreatedAt: time.Unix(1_700_000_000, 0)}
	renewed := shortener.Link{CreatedAt: time.Unix(1_700_000_500, 0)}
	a.Record([]byte("again"), nil, []byte("Chrome"), nil, netip.Addr{}, "", day, old)
	if err := a.Flush(context.Background()); err == nil {
		t.Fatal("flush did not fail")
	}
	if got, _ := s.createdAt.Load("again"); got != int64(1_700_000_000) {
		t.Errorf("CreatedAt of the first batch = %v, want 1700000000", got)
	}
	a.Record([]byte("again"), nil, []byte("Chrome"), nil, netip.Addr{}, "", day, renewed)
	a.Record([]byte("again"), nil, []byte("Chrome"), nil, netip.Addr{}, "", day, old)
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.createdAt.Load("again"); got != int64(1_700_000_500) {
		t.Errorf("CreatedAt of the retried batch = %v, want 1700000500", got)
	}
	if st := stored(t, s, "again"); st.Total != 3 {
		t.Errorf("stored %d visits, want 3", st.Total)
	}
}

// The Service enforces visit limits on the live count: a link with
// max_visits 3 closes after the third visit, before any flush.
func TestServiceLimitUsesLiveCount(t *testing.T) {
	s := newStore(t)
	a := newAggregator(t, s, visits.Config{})
	svc := shortener.NewService(s.Store, shortener.Options{Visits: a})
	ctx := context.Background()
	l, err := svc.Create(ctx, shortener.CreateRequest{URL: "https://x.example/", MaxVisits: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		_, rl, err := svc.AppendResolve(ctx, nil, []byte(l.ID))
		if err != nil {
			t.Fatalf("visit %d: %v", i+1, err)
		}
		a.Record([]byte(l.ID), nil, []byte("Chrome"), nil, netip.Addr{}, "", day, rl)
		if i == 1 {
			a.Flush(ctx) // part stored, part pending
		}
	}
	if _, _, err := svc.AppendResolve(ctx, nil, []byte(l.ID)); !errors.Is(err, shortener.ErrExpired) {
		t.Errorf("fourth visit: %v, want ErrExpired", err)
	}
	if _, err := svc.Resolve(ctx, "", l.ID); !errors.Is(err, shortener.ErrExpired) {
		t.Errorf("Resolve after the limit: %v, want ErrExpired", err)
	}
	st, err := svc.Stats(ctx, "", l.ID)
	if err != nil || st.Total != 3 {
		t.Errorf("Stats = %+v, %v", st, err)
	}
}

func TestConcurrentRecordAndFlush(t *testing.T) {
	// Many links, so that shards fill up (and empty) while flushes run.
	ids := make([]string, 256)
	for i := range ids {
		ids[i] = fmt.Sprintf("c%03d", i)
	}
	s := newStore(t, ids...)
	a := newAggregator(t, s, visits.Config{FlushInterval: time.Millisecond, FlushLinks: 4})
	const per = 500
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range per {
				a.Record([]byte(ids[(g+i)%len(ids)]), []byte("https://r.example/"), []byte("Chrome"), nil, netip.MustParseAddr("127.0.0.1"), "", day, shortener.Link{})
			}
		})
	}
	wg.Wait()
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, id := range ids {
		total += stored(t, s, id).Total
	}
	// Only 4×FlushLinks links may be pending at once: the rest is dropped,
	// and counted. Nothing is lost without being counted.
	if m := a.Metrics(); total+int64(m.Dropped) != 8*per || total != int64(m.FlushedVisits) {
		t.Errorf("stored %d visits, dropped %d, want %d in all (%+v)", total, m.Dropped, 8*per, m)
	}
}

type geo map[string]string

func (g geo) Country(ip net.IP) string { return g[ip.String()] }

func TestCountries(t *testing.T) {
	s := newStore(t, "geo")
	a := newAggregator(t, s, visits.Config{Geo: geo{"192.0.2.1": "DE"}})
	if !a.UsesAddr() || newAggregator(t, s, visits.Config{}).UsesAddr() {
		t.Error("UsesAddr: want true with a GeoIP database only (the redirect skips finding the address otherwise)")
	}
	a.Record([]byte("geo"), nil, []byte("Chrome"), nil, netip.MustParseAddr("192.0.2.1"), "", day, shortener.Link{})
	a.Record([]byte("geo"), nil, []byte("Chrome"), nil, netip.MustParseAddr("192.0.2.9"), "", day, shortener.Link{})
	// A country a trusted front end gave wins over the database, with or
	// without one; anything but two capital letters is ignored.
	a.Record([]byte("geo"), nil, []byte("Chrome"), nil, netip.MustParseAddr("192.0.2.1"), "FR", day, shortener.Link{})
	a.Record([]byte("geo"), nil, []byte("Chrome"), nil, netip.MustParseAddr("::ffff:192.0.2.1"), "fr", day, shortener.Link{})
	a.Flush(context.Background())
	if got := stored(t, s, "geo"); got.Countries["DE"] != 2 || got.Countries["FR"] != 1 || len(got.Countries) != 2 {
		t.Errorf("countries %v", got.Countries)
	}
	s2 := newStore(t, "nogeo")
	b := newAggregator(t, s2, visits.Config{})
	b.Record([]byte("nogeo"), nil, []byte("Chrome"), nil, netip.Addr{}, "JP", day, shortener.Link{})
	b.Flush(context.Background())
	if got := stored(t, s2, "nogeo"); got.Countries["JP"] != 1 || len(got.Countries) != 1 {
		t.Errorf("countries without a database %v", got.Countries)
	}
}

func BenchmarkRecord(b *testing.B) {
	s := &store{}
	a, _ := visits.New(visits.Config{Store: s, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), FlushInterval: time.Hour})
	id, ref, ua := []byte("abcDEF0123"), []byte("https://news.example.com/item?id=1"), []byte("Chrome")
	a.Record(id, ref, ua, nil, netip.Addr{}, "", day, shortener.Link{})
	b.ReportAllocs()
	for b.Loop() {
		a.Record(id, ref, ua, nil, netip.Addr{}, "", day, shortener.Link{})
	}
}

// Nothing is cut per batch (issue 27): six different link-preview bots in
// one second are six named bots, no person; twenty referrers and six
// countries are all kept by name, over three days.
func TestNoPerBatchBounds(t *testing.T) {
	const firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0"
	s := newStore(t, "busy")
	g := geo{}
	for i := range 6 {
		g[fmt.Sprintf("192.0.2.%d", i)] = fmt.Sprintf("C%d", i)
	}
	a := newAggregator(t, s, visits.Config{Geo: g, Classifier: useragent.New()})
	previews := []string{"Slackbot-LinkExpanding 1.0", "Twitterbot/1.0", "facebookexternalhit/1.1", "Discordbot/2.0", "TelegramBot (like TwitterBot)", "WhatsApp/2.23.20.0"}
	for i, ua := range previews {
		a.Record([]byte("busy"), nil, []byte(ua), nil, netip.Addr{}, "", day.Add(time.Duration(i)*time.Millisecond), shortener.Link{})
	}
	// Each referrer twice, the second time after the others: the link
	// has more keys than the aggregate walks (its keys are then found
	// through a map), and each is counted once in the batch (the test
	// store checks).
	for i := range 40 {
		ip := netip.MustParseAddr(fmt.Sprintf("192.0.2.%d", i%6))
		when := day.Add(time.Duration(i%3) * 24 * time.Hour)
		a.Record([]byte("busy"), []byte(fmt.Sprintf("https://r%d.example/", i%20)), []byte(firefox), nil, ip, "", when, shortener.Link{})
	}
	a.Flush(context.Background())
	st := stored(t, s, "busy")
	if st.Total != 46 || st.Bots != 6 || len(st.Days) != 3 || st.Days[dayName(0)] != 20 || st.Days[dayName(2)] != 13 {
		t.Errorf("total %d, bots %d, days %v", st.Total, st.Bots, st.Days)
	}
	if len(st.BotAgents) != 6 || st.BotAgents[shortener.OtherKey] != 0 || len(st.Browsers) != 1 || st.Browsers["Firefox"] != 40 {
		t.Errorf("bots %v, browsers %v", st.BotAgents, st.Browsers)
	}
	if len(st.Referrers) != 21 || st.Referrers[shortener.DirectReferrer] != 6 || st.Referrers["r19.example"] != 2 {
		t.Errorf("referrers %v", st.Referrers)
	}
	if len(st.Countries) != 6 || st.Countries["C0"] != 7 {
		t.Errorf("countries %v", st.Countries)
	}
}

// BenchmarkRecordSpread records visits over 10,000 links, as a busy
// server does: the aggregate no longer fits the fastest caches.
func BenchmarkRecordSpread(b *testing.B) {
	a, _ := visits.New(visits.Config{Store: &store{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), FlushInterval: time.Hour, FlushLinks: 1 << 30})
	ids := make([][]byte, 10000)
	for i := range ids {
		ids[i] = []byte(fmt.Sprintf("id%08d", (i*7919)%10000))
	}
	ref, ua := []byte("https://news.example.com/x"), []byte("Chrome")
	for _, id := range ids {
		a.Record(id, ref, ua, nil, netip.Addr{}, "", day, shortener.Link{})
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		a.Record(ids[i%len(ids)], ref, ua, nil, netip.Addr{}, "", day, shortener.Link{})
		i++
	}
}

// BenchmarkFlush writes batches of 10,000 links (5 visits each) to a real
// bolt store: the flusher's share of a busy server's CPU.
func BenchmarkFlush(b *testing.B) {
	ids := make([]string, 10000)
	for i := range ids {
		ids[i] = fmt.Sprintf("id%08d", i)
	}
	s := newStore(b, ids...)
	a, _ := visits.New(visits.Config{Store: s, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), FlushInterval: time.Hour, FlushLinks: 1 << 30, Classifier: classifier{}})
	ref, ua := []byte("https://news.example.com/x"), []byte("Chrome")
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for j := range 5 * len(ids) {
			a.Record([]byte(ids[j%len(ids)]), ref, ua, nil, netip.Addr{}, "", day, shortener.Link{})
		}
		b.StartTimer()
		a.Flush(context.Background())
	}
}

// discard is a VisitStore that keeps nothing: the aggregator's own cost.
type discard struct{}

func (discard) AddVisits(_ context.Context, b *shortener.VisitBatch) error {
	for i := range b.Links {
		b.Links[i].Applied = true
	}
	return nil
}

func (discard) VisitStats(context.Context, string) (shortener.VisitStats, error) {
	return shortener.VisitStats{}, nil
}

// BenchmarkFlushSpread records 20,000 visits, each of a link not yet in
// the batch (make bench-visits over a million ids), and flushes them to a
// store that keeps nothing: recording, draining and building a batch, per
// visit. Run it with -cpu 1, as the server runs (the drainer's goroutine
// then shares the core).
func BenchmarkFlushSpread(b *testing.B) {
	ids := make([][]byte, 200_000)
	for i := range ids {
		ids[i] = []byte(fmt.Sprintf("sp%08d", (i*7919)%len(ids)))
	}
	a, _ := visits.New(visits.Config{Store: discard{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), FlushInterval: time.Hour, FlushLinks: 1 << 30, Classifier: classifier{}})
	ref, ua := []byte("https://news.example.com/x"), []byte("Chrome")
	const perFlush = 20_000
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		for range perFlush {
			a.Record(ids[n%len(ids)], ref, ua, nil, netip.Addr{}, "", day, shortener.Link{})
			n++
		}
		a.Flush(context.Background())
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/visit")
}

// Flushes running while visits open new entries in empty shards (the race
// detector checks that a flush never reads a batch it did not take).
func TestFlushWhileFirstVisits(t *testing.T) {
	s := newStore(t, "f0", "f1", "f2", "f3")
	a := newAggregator(t, s, visits.Config{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				a.Flush(context.Background())
			}
		}
	})
	for i := range 4000 {
		a.Record([]byte(fmt.Sprintf("f%d", i%4)), nil, []byte("Chrome"), nil, netip.Addr{}, "", day, shortener.Link{})
	}
	close(stop)
	wg.Wait()
	a.Flush(context.Background())
	var total int64
	for i := range 4 {
		total += stored(t, s, fmt.Sprintf("f%d", i)).Total
	}
	if total != 4000 {
		t.Errorf("stored %d visits, want 4000", total)
	}
}

// TestBatchOrder: a batch's links come sorted by id, ids that share their
// first 8 bytes (the aggregate's sort key) included, each once, whatever
// the order of the visits.
func TestBatchOrder(t *testing.T) {
	var ids []string
	for i := range 300 {
		ids = append(ids, fmt.Sprintf("%c%07d%d", 'a'+i%7, i%13, i))
	}
	s := newStore(t, ids...)
	a := newAggregator(t, s, visits.Config{})
	for i := range 3000 {
		record(a, ids[(i*7919)%len(ids)], "", "Chrome", 1)
	}
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if got := stored(t, s, id).Total; got != 10 {
			t.Errorf("%s: %d visits stored, want 10", id, got)
		}
	}
}

// TestDrainAndBuildPaced: with a single P, a drain of 1,000 records and
// the build of a 1,000-link batch each pause (twice as long as they
// worked) once a millisecond of work has passed; the clock is the test's
// and moves 2 ms at each look.
func TestDrainAndBuildPaced(t *testing.T) {
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("paced%05d", i)
	}
	s := newStore(t, ids...)
	var mu sync.Mutex
	var clock time.Duration
	paused := map[string]int{} // pauses per pacing function
	restore := visits.SetPacerClock(func(d time.Duration) {
		pc := make([]uintptr, 8)
		frames := runtime.CallersFrames(pc[:runtime.Callers(3, pc)])
		f, _ := frames.Next()
		mu.Lock()
		defer mu.Unlock()
		clock += d
		paused[f.Function[strings.LastIndex(f.Function, ".")+1:]]++
	}, func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock += 2 * time.Millisecond
		return time.Unix(0, 0).Add(clock)
	})
	defer restore()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a := newAggregator(t, s, visits.Config{})
	for _, id := range ids {
		record(a, id, "", "Chrome", 1)
	}
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if paused["drainLocked"] == 0 || paused["build"] == 0 {
		t.Fatalf("pauses per function %v: want the drain and the build to pause", paused)
	}
}
