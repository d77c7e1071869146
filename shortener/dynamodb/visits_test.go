package dynamodb_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/dynamodb"
)

// clock is a settable clock for the visit log.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

// newClock starts at the real time: DynamoDB Local deletes items whose
// TTL attribute is past (the records', set from this clock).
func newClock() *clock { return &clock{t: time.Now().UTC().Truncate(time.Second)} }

// today is the clock's day, as visits name it.
func (c *clock) today() string { return c.Now().Format(shortener.DayFormat) }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// instances returns n stores over one fresh table of DynamoDB Local, as n
// linkgate processes would open it, their visit logs driven by c (no
// background work).
func instances(t *testing.T, c *clock, n int) []*dynamodb.Store {
	t.Helper()
	client := localClient(t)
	table := newTable(t, client)
	var out []*dynamodb.Store
	for range n {
		s := dynamodb.New(client, dynamodb.Options{Table: table, Timeout: 10 * time.Second, ManualVisits: true, Clock: c.Now})
		t.Cleanup(func() { s.Close() })
		out = append(out, s)
	}
	return out
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func add(t *testing.T, s *dynamodb.Store, deltas ...shortener.VisitDelta) {
	t.Helper()
	b := shortener.NewVisitBatch(deltas...)
	if err := s.AddVisits(ctxT(t), b); err != nil {
		t.Fatalf("AddVisits: %v", err)
	}
	for _, l := range b.Links {
		if !l.Applied {
			t.Fatalf("AddVisits left %q not applied", l.ID)
		}
	}
}

func statsOf(t *testing.T, s *dynamodb.Store, id string) shortener.VisitStats {
	t.Helper()
	st, err := s.VisitStats(ctxT(t), id)
	if err != nil {
		t.Fatalf("VisitStats(%q): %v", id, err)
	}
	return st
}

// visitsOn returns day's visits of a link from a referrer host and a
// browser.
func visitsOn(id string, created time.Time, n int64, day, ref, browser string) shortener.VisitDelta {
	return shortener.VisitDelta{ID: id, CreatedAt: created.Unix(), Stats: shortener.VisitStats{Total: n,
		Days: shortener.Breakdown{day: n}, Referrers: shortener.Breakdown{ref: n}, Browsers: shortener.Breakdown{browser: n}}}
}

func rawItem(t *testing.T, s *dynamodb.Store, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := s.Client().GetItem(ctxT(t), &ddb.GetItemInput{TableName: aws.String(s.Table()),
		Key: map[string]types.AttributeValue{"shortURL": &types.AttributeValueMemberS{Value: key}}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// itemSize is an item's size by DynamoDB's rules: names plus values,
// numbers at their longest.
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			n += len(v.Value)
		case *types.AttributeValueMemberB:
			n += len(v.Value)
		default:
			n += 21
		}
	}
	return n
}

// reservedKeys counts the items under the reserved prefix whose key
// starts with prefix.
func reservedKeys(t *testing.T, s *dynamodb.Store, prefix string) int {
	t.Helper()
	n := 0
	pages := ddb.NewScanPaginator(s.Client(), &ddb.ScanInput{TableName: aws.String(s.Table()), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("shortURL")})
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range out.Items {
			if k := item["shortURL"].(*types.AttributeValueMemberS).Value; strings.HasPrefix(k, dynamodb.ReservedPrefix+prefix) {
				n++
			}
		}
	}
	return n
}

// The layout: visits stay off the link's item, reach the table as one
// record per interval (what other instances see), and are folded into
// state items; every reader counts each visit once, whatever the stage.
func TestVisitsLayout(t *testing.T) {
	c := newClock()
	in := instances(t, c, 2)
	a, b := in[0], in[1]
	created := c.Now().Add(-time.Hour).Truncate(time.Second)
	for _, id := range []string{"layout0001", "layout0002"} {
		if err := a.Create(ctxT(t), shortener.Link{ID: id, URL: "https://" + id + ".example/", CreatedAt: created}); err != nil {
			t.Fatal(err)
		}
	}
	// Many referrers: more than a link's statistics keep.
	var want shortener.VisitStats
	for i := range shortener.MaxStatReferrers + 20 {
		d := visitsOn("layout0001", created, 2, c.today(), fmt.Sprintf("r%03d.example", i), "Firefox")
		want.Add(d.Stats)
		add(t, a, d, visitsOn("layout0002", created, 1, c.today(), "(direct)", "Chrome"))
	}
	want.Bound()
	equal(t, "instance a before writing", statsOf(t, a, "layout0001"), want)
	equal(t, "instance b before writing", statsOf(t, b, "layout0001"), shortener.VisitStats{})
	if n := reservedKeys(t, a, "v:r:"); n != 0 {
		t.Errorf("%d record items before the interval, want 0", n)
	}

	if err := a.FlushVisits(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	equal(t, "instance b after the record", statsOf(t, b, "layout0001"), want)
	equal(t, "instance a after the record", statsOf(t, a, "layout0001"), want)
	if n := reservedKeys(t, a, "v:r:"); n != 1 {
		t.Errorf("%d record items for %d links, want 1 (the data in the header)", n, 2)
	}
	// The link's item is as created: the seed's attributes and createdAt.
	item := rawItem(t, a, "layout0001")
	var seed seedItem
	if err := attributevalue.UnmarshalMap(item, &seed); err != nil || seed.OriginalURL != "https://layout0001.example/" {
		t.Errorf("seed's view of the item: %+v, %v", seed, err)
	}
	if len(item) != 3 || itemSize(item) > 1024 {
		t.Errorf("link item grew with its statistics: %d attributes, %d bytes: %v", len(item), itemSize(item), item)
	}

	res, err := b.FoldVisits(ctxT(t))
	if err != nil || res.Records != 1 || res.Items == 0 {
		t.Fatalf("fold: %+v, %v", res, err)
	}
	equal(t, "after the fold", statsOf(t, a, "layout0001"), want)
	// More visits: folded state plus a record plus the buffer.
	more := visitsOn("layout0001", created, 5, c.today(), "news.example", "Safari")
	add(t, b, more)
	if err := b.FlushVisits(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	add(t, b, more)
	want.Add(more.Stats)
	want.Add(more.Stats)
	want.Bound()
	equal(t, "state, record and buffer", statsOf(t, b, "layout0001"), want)
	if got := statsOf(t, a, "layout0002").Total; got != shortener.MaxStatReferrers+20 {
		t.Errorf("layout0002 total %d, want %d", got, shortener.MaxStatReferrers+20)
	}
	// List shows links only, never the statistics items.
	p, err := a.List(ctxT(t), "", 100)
	if err != nil || len(p.Links) != 2 {
		t.Errorf("List: %d links, %v; want the 2 links", len(p.Links), err)
	}
}

func equal(t *testing.T, what string, got, want shortener.VisitStats) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s:\ngot  %v\nwant %v", what, got, want)
	}
}

// Visits are written once the interval has passed since the first one
// buffered, by the clock the store was given: no sleeping in tests.
func TestVisitsWrittenEachInterval(t *testing.T) {
	c := newClock()
	in := instances(t, c, 2)
	a, b := in[0], in[1]
	created := c.Now().Truncate(time.Second)
	if err := a.Create(ctxT(t), shortener.Link{ID: "interval01", URL: "https://i.example/", CreatedAt: created}); err != nil {
		t.Fatal(err)
	}
	add(t, a, visitsOn("interval01", created, 3, c.today(), "(direct)", "Chrome"))
	for _, step := range []time.Duration{0, 29 * time.Second} {
		c.Advance(step)
		a.Tick(ctxT(t))
		if got := statsOf(t, b, "interval01").Total; got != 0 {
			t.Fatalf("%v after the first visit, another instance sees %d visits, want 0 (interval %v)", c.Now().Sub(created), got, dynamodb.DefaultVisitInterval)
		}
	}
	c.Advance(time.Second)
	a.Tick(ctxT(t))
	if got := statsOf(t, b, "interval01").Total; got != 3 {
		t.Errorf("after the interval, another instance sees %d visits, want 3", got)
	}
	if s := a.VisitLogStats(); s.Records != 1 || s.BufferedLinks != 0 {
		t.Errorf("visit log stats %+v, want 1 record, nothing buffered", s)
	}
}

// Visits of a link with a visit limit are on its item at once (the limit
// is enforced on them), and counted once in its statistics.
func TestVisitsOfLimitedLinks(t *testing.T) {
	c := newClock()
	in := instances(t, c, 2)
	a, b := in[0], in[1]
	created := c.Now().Truncate(time.Second)
	if err := a.Create(ctxT(t), shortener.Link{ID: "limited002", URL: "https://l.example/", CreatedAt: created, MaxVisits: 10, Visits: 1}); err != nil {
		t.Fatal(err)
	}
	d := visitsOn("limited002", created, 4, c.today(), "(direct)", "Chrome")
	d.Limited = true
	add(t, a, d)
	if l, err := b.Get(ctxT(t), "limited002"); err != nil || l.Visits != 5 {
		t.Fatalf("another instance's Get: %+v, %v; want Visits 5 at once", l, err)
	}
	for _, stage := range []string{"buffered", "written", "folded"} {
		switch stage {
		case "written":
			if err := a.FlushVisits(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		case "folded":
			if _, err := a.FoldVisits(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}
		st := statsOf(t, a, "limited002")
		if st.Total != 5 || st.Browsers["Chrome"] != 4 {
			t.Errorf("%s: stats %+v, want total 5 (1 at creation + 4), Chrome 4", stage, st)
		}
	}
}

// Visits of a deleted link never count for a new link under its id: the
// visits say which link they were of (its CreatedAt), in the buffer, in
// records and once folded, and for limited links on the item.
func TestVisitsOfAnEarlierLink(t *testing.T) {
	c := newClock()
	a := instances(t, c, 1)[0]
	first := c.Now().Add(-time.Hour).Truncate(time.Second)
	second := first.Add(30 * time.Minute)
	mk := func(created time.Time, max int64) {
		t.Helper()
		for _, id := range []string{"again00001", "againlim01"} {
			l := shortener.Link{ID: id, URL: "https://again.example/", CreatedAt: created}
			if id == "againlim01" {
				l.MaxVisits = max
			}
			if err := a.Create(ctxT(t), l); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk(first, 100)
	old := visitsOn("again00001", first, 7, c.today(), "old.example", "Chrome")
	add(t, a, old)
	if err := a.FlushVisits(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	add(t, a, old) // buffered
	for _, id := range []string{"again00001", "againlim01"} {
		if err := a.Delete(ctxT(t), id); err != nil {
			t.Fatal(err)
		}
	}
	mk(second, 100)
	oldLimited := visitsOn("againlim01", first, 2, c.today(), "old.example", "Chrome")
	oldLimited.Limited = true
	add(t, a, old, oldLimited) // counted before the delete, written after the new link exists
	fresh := visitsOn("again00001", second, 1, c.today(), "new.example", "Firefox")
	add(t, a, fresh)
	check := func(stage string) {
		t.Helper()
		equal(t, stage, statsOf(t, a, "again00001"), fresh.Stats)
		if st := statsOf(t, a, "againlim01"); st.Total != 0 {
			t.Errorf("%s: the new limited link has %d visits, want 0", stage, st.Total)
		}
	}
	check("buffered")
	if err := a.FlushVisits(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	check("written")
	if _, err := a.FoldVisits(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	check("folded")
}

// hook is an HTTP transport that runs before(target) ahead of each request
// to DynamoDB (target: the operation, as X-Amz-Target names it).
type hook struct {
	next   http.RoundTripper
	before func(op string)
}

func (h hook) RoundTrip(r *http.Request) (*http.Response, error) {
	h.before(strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810."))
	return h.next.RoundTrip(r)
}

// Items of the old layout (counters as attributes of the link's item) are
// read as they are and moved off the item the first time they are read:
// the item keeps its visits total, loses the rest, and the statistics do
// not change. A build of the old layout adding to the counters meanwhile
// makes the move wait for the next read; nothing is lost.
func TestVisitsMigrationOfOldItems(t *testing.T) {
	c := newClock()
	a := instances(t, c, 1)[0]
	ctx := ctxT(t)
	created := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	item := map[string]types.AttributeValue{
		"shortURL":    &types.AttributeValueMemberS{Value: "oldlayout1"},
		"originalURL": &types.AttributeValueMemberS{Value: "https://old.example/"},
		"createdAt":   &types.AttributeValueMemberN{Value: fmt.Sprint(created.Unix())},
		"visits":      &types.AttributeValueMemberN{Value: "0"},
		"bots":        &types.AttributeValueMemberN{Value: "40"},
		"vx:Slackbot": &types.AttributeValueMemberN{Value: "40"},
	}
	var total int64
	// 300 days across eleven months, and 120 referrers: the old layout's
	// item at its bounds is several KB, and takes several transactions.
	for i := range 300 {
		day := created.AddDate(0, 0, i).Format(shortener.DayFormat)
		item["vd:"+day] = &types.AttributeValueMemberN{Value: "3"}
		total += 3
	}
	for i := range 120 {
		item[fmt.Sprintf("vr:r%03d.example", i)] = &types.AttributeValueMemberN{Value: "2"}
	}
	item["vr:(other)"] = &types.AttributeValueMemberN{Value: fmt.Sprint(total - 240)}
	item["vb:Firefox"] = &types.AttributeValueMemberN{Value: fmt.Sprint(total - 40)}
	item["visits"] = &types.AttributeValueMemberN{Value: fmt.Sprint(total)}
	if _, err := a.Client().PutItem(ctx, &ddb.PutItemInput{TableName: aws.String(a.Table()), Item: item}); err != nil {
		t.Fatal(err)
	}
	before := statsOf(t, a, "oldlayout1") // reads the old attributes, queues the move
	if before.Total != total || before.Bots != 40 || len(before.Days) != 300 || before.Browsers["Firefox"] != total-40 {
		t.Fatalf("stats of the old item: total %d bots %d, %d days, Firefox %d", before.Total, before.Bots, len(before.Days), before.Browsers["Firefox"])
	}

	// A build of the old layout counts one more visit just before the
	// move commits: the move must not remove it.
	raced := false
	a2 := dynamodb.New(dynamodb.NewClient(awsConfig(), func(o *ddb.Options) {
		o.BaseEndpoint = localClient(t).Options().BaseEndpoint
		o.HTTPClient = &http.Client{Transport: hook{next: http.DefaultTransport, before: func(op string) {
			if op == "TransactWriteItems" && !raced {
				raced = true
				_, err := a.Client().UpdateItem(ctx, &ddb.UpdateItemInput{TableName: aws.String(a.Table()),
					Key:              map[string]types.AttributeValue{"shortURL": &types.AttributeValueMemberS{Value: "oldlayout1"}},
					UpdateExpression: aws.String("ADD visits :one, #d :one"), ExpressionAttributeNames: map[string]string{"#d": "vd:2025-01-02"},
					ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}}})
				if err != nil {
					t.Error(err)
				}
			}
		}}}
	}), dynamodb.Options{Table: a.Table(), Timeout: 10 * time.Second, ManualVisits: true, Clock: c.Now})
	defer a2.Close()
	statsOf(t, a2, "oldlayout1")
	a2.Tick(ctx) // the move fails its condition
	if !raced {
		t.Fatal("the migration made no transaction")
	}
	total++
	before.Total++
	before.Days["2025-01-02"]++
	equal(t, "after a move that lost the race", statsOf(t, a2, "oldlayout1"), before)
	for range 3 { // queued again by the read above; the rest in the next ticks
		a2.Tick(ctx)
	}
	after := rawItem(t, a, "oldlayout1")
	if len(after) != 4 || after["visits"].(*types.AttributeValueMemberN).Value != fmt.Sprint(total) {
		t.Errorf("item after the move: %d attributes (%d bytes), want shortURL, originalURL, createdAt and visits %d", len(after), itemSize(after), total)
	}
	equal(t, "after the move", statsOf(t, a, "oldlayout1"), before)
	if _, err := a.FoldVisits(ctx); err != nil {
		t.Fatal(err)
	}
	equal(t, "after the move and a fold", statsOf(t, a, "oldlayout1"), before)

	// A redirect's read of an old item queues it too.
	item["shortURL"] = &types.AttributeValueMemberS{Value: "oldlayout2"}
	if _, err := a.Client().PutItem(ctx, &ddb.PutItemInput{TableName: aws.String(a.Table()), Item: item}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Get(ctx, "oldlayout2"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		a.Tick(ctx)
	}
	if got := rawItem(t, a, "oldlayout2"); len(got) != 4 {
		t.Errorf("an old item read by a redirect kept %d attributes, want 4", len(got))
	}

	// So does a read by a new instance before it has counted any visit:
	// its first reads are not left for their next cache miss.
	item["shortURL"] = &types.AttributeValueMemberS{Value: "oldlayout3"}
	if _, err := a.Client().PutItem(ctx, &ddb.PutItemInput{TableName: aws.String(a.Table()), Item: item}); err != nil {
		t.Fatal(err)
	}
	fresh := dynamodb.New(a.Client(), dynamodb.Options{Table: a.Table(), Timeout: 10 * time.Second, ManualVisits: true, Clock: c.Now})
	defer fresh.Close()
	if _, err := fresh.Get(ctx, "oldlayout3"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		fresh.Tick(ctx)
	}
	if got := rawItem(t, a, "oldlayout3"); len(got) != 4 {
		t.Errorf("an old item read by a new instance's first redirect kept %d attributes, want 4", len(got))
	}
}

// A number taken by a writer that never commits (it died) is voided by the
// fold after a grace period, so later records are folded; a writer that
// comes back after that writes its record again under a new number.
func TestFoldVoidsAbandonedNumbers(t *testing.T) {
	c := newClock()
	in := instances(t, c, 2)
	a, b := in[0], in[1]
	created := c.Now().Truncate(time.Second)
	if err := a.Create(ctxT(t), shortener.Link{ID: "abandoned1", URL: "https://a.example/", CreatedAt: created}); err != nil {
		t.Fatal(err)
	}
	write := func(s *dynamodb.Store, n int64) {
		t.Helper()
		add(t, s, visitsOn("abandoned1", created, n, c.today(), "(direct)", "Chrome"))
		if err := s.FlushVisits(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	write(a, 1)
	// A writer takes number 2 and dies.
	if _, err := a.Client().UpdateItem(ctxT(t), &ddb.UpdateItemInput{TableName: aws.String(a.Table()),
		Key:              map[string]types.AttributeValue{"shortURL": &types.AttributeValueMemberS{Value: dynamodb.KeySeq}},
		UpdateExpression: aws.String("ADD #n :one"), ExpressionAttributeNames: map[string]string{"#n": dynamodb.AttrN},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}}}); err != nil {
		t.Fatal(err)
	}
	write(b, 2)
	if res, err := a.FoldVisits(ctxT(t)); err != nil || res.Through != 1 {
		t.Fatalf("first fold: %+v, %v; want it to stop before the uncommitted number 2", res, err)
	}
	if got := statsOf(t, b, "abandoned1").Total; got != 3 {
		t.Errorf("total %d after a partial fold, want 3", got)
	}
	c.Advance(3 * time.Minute)
	if res, err := a.FoldVisits(ctxT(t)); err != nil || res.Through != 3 {
		t.Fatalf("fold after the grace period: %+v, %v; want through 3", res, err)
	}
	if got := statsOf(t, b, "abandoned1").Total; got != 3 {
		t.Errorf("total %d after voiding, want 3", got)
	}
}

// A fold that stops half-way (the process died) is finished by the next
// one, which takes the lease once it has run out: every state item holds
// each visit once.
func TestFoldResumes(t *testing.T) {
	c := newClock()
	in := instances(t, c, 2)
	a, b := in[0], in[1]
	ids, deltas := visitedLinks(t, a, c, "resume", 7)
	add(t, a, deltas...)
	if err := a.FlushVisits(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	died := errors.New("the process died")
	a.StopFoldAfter(5, died)
	if _, err := a.FoldVisits(ctxT(t)); !errors.Is(err, died) {
		t.Fatalf("fold: %v, want it to stop after range 5", err)
	}
	if res, err := b.FoldVisits(ctxT(t)); err != nil || !res.Unavailable {
		t.Fatalf("fold while the lease runs: %+v, %v; want it refused", res, err)
	}
	all := linksOf(t, b, c.Now())
	for i, id := range ids {
		if got := statsOf(t, b, id).Total; got != int64(i%7+1) {
			t.Fatalf("%s: total %d half-way through a fold, want %d", id, got, i%7+1)
		}
		if got := all[id].People; got != int64(i%7+1) {
			t.Fatalf("%s: %d visits across links half-way through a fold, want %d", id, got, i%7+1)
		}
	}
	c.Advance(2 * time.Minute)
	if res, err := b.FoldVisits(ctxT(t)); err != nil || res.Through != 1 {
		t.Fatalf("resumed fold: %+v, %v", res, err)
	}
	add(t, b, deltas...)
	all = linksOf(t, b, c.Now())
	for i, id := range ids {
		if got := statsOf(t, b, id).Total; got != 2*int64(i%7+1) {
			t.Fatalf("%s: total %d after the resumed fold, want %d", id, got, 2*(i%7+1))
		}
		if got := all[id].People; got != 2*int64(i%7+1) {
			t.Fatalf("%s: %d visits across links after the resumed fold, want %d", id, got, 2*(i%7+1))
		}
	}
}

// The fold holds its lease through its ranges: a fold whose ranges take
// long renews it once half of it has passed, so another process never
// takes over (red without the renewal), and a quick fold writes it once,
// not before every range (red when it renews before every range: 15 more
// writes a fold).
func TestFoldLease(t *testing.T) {
	for _, c := range []struct {
		name     string
		perRange time.Duration // the clock moves this much during each range
		renewals int
	}{
		{"quick ranges", time.Second, 0},
		{"slow ranges", dynamodb.FoldLease * 2 / 5, 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := newClock()
			in := instances(t, clk, 2)
			a, b := in[0], in[1]
			ids, deltas := visitedLinks(t, a, clk, "lease", 3)
			add(t, a, deltas...)
			if err := a.FlushVisits(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			lease := func() string {
				v, _ := rawItem(t, a, dynamodb.KeyFold)[dynamodb.AttrLease].(*types.AttributeValueMemberN)
				if v == nil {
					return ""
				}
				return v.Value
			}
			var leases []string
			a.AfterFoldRange(func(r int) error {
				if l := lease(); len(leases) == 0 || leases[len(leases)-1] != l {
					leases = append(leases, l)
				}
				clk.Advance(c.perRange)
				if res, err := b.FoldVisits(ctxT(t)); err != nil || !res.Unavailable {
					t.Errorf("after range %d (%v later): another process folded: %+v, %v; want the lease held", r, time.Duration(r+1)*c.perRange, res, err)
				}
				return nil
			})
			if res, err := a.FoldVisits(ctxT(t)); err != nil || res.Through != 1 {
				t.Fatalf("fold: %+v, %v", res, err)
			}
			if got := len(leases) - 1; got != c.renewals {
				t.Errorf("the lease was renewed %d times (%v), want %d", got, leases, c.renewals)
			}
			for i, id := range ids {
				if got := statsOf(t, b, id).Total; got != int64(i%3+1) {
					t.Fatalf("%s: total %d after the fold, want %d", id, got, i%3+1)
				}
			}
		})
	}
}

// visitedLinks creates 200 links, prefix0000 to prefix0199, and returns
// them with visits of today: i%mod+1 for the i-th.
func visitedLinks(t *testing.T, s *dynamodb.Store, c *clock, prefix string, mod int) ([]string, []shortener.VisitDelta) {
	t.Helper()
	created := c.Now().Truncate(time.Second)
	var ids []string
	var deltas []shortener.VisitDelta
	for i := range 200 {
		id := fmt.Sprintf("%s%04d", prefix, i)
		ids = append(ids, id)
		if err := s.Create(ctxT(t), shortener.Link{ID: id, URL: "https://v.example/", CreatedAt: created}); err != nil {
			t.Fatal(err)
		}
		deltas = append(deltas, visitsOn(id, created, int64(i%mod+1), c.today(), "(direct)", "Chrome"))
	}
	return ids, deltas
}

// linksOf returns every link's visits of now's day, from a query across
// links.
func linksOf(t *testing.T, s *dynamodb.Store, now time.Time) map[string]shortener.PeopleBots {
	t.Helper()
	q := shortener.StatsQuery{From: shortener.DayStart(now), To: shortener.DayStart(now).Add(24 * time.Hour), Granularity: shortener.GranularityDay}
	c, err := s.VisitCounts(ctxT(t), q)
	if err != nil {
		t.Fatal(err)
	}
	return c.Links
}

// Concurrent instances writing records and folding lose no visit and count
// none twice.
func TestVisitsConcurrentInstances(t *testing.T) {
	c := newClock()
	in := instances(t, c, 3)
	created := c.Now().Truncate(time.Second)
	if err := in[0].Create(ctxT(t), shortener.Link{ID: "together01", URL: "https://t.example/", CreatedAt: created}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, s := range in {
		wg.Go(func() {
			for range 5 {
				b := shortener.NewVisitBatch(visitsOn("together01", created, 2, c.today(), "x.example", "Edge"))
				if err := s.AddVisits(ctxT(t), b); err != nil {
					t.Error(err)
				}
				if err := s.FlushVisits(ctxT(t)); err != nil {
					t.Error(err)
				}
				if _, err := s.FoldVisits(ctxT(t)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if got := statsOf(t, in[0], "together01").Total; got != 30 {
		t.Errorf("total %d, want 30", got)
	}
	for _, s := range in {
		if _, err := s.FoldVisits(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	if got := statsOf(t, in[1], "together01").Total; got != 30 {
		t.Errorf("total %d after every fold, want 30", got)
	}
}

// A month whose state outgrows its shards is spread over more by the next
// fold, in full, and its old items are deleted by the one after; no visit
// is lost or counted twice on the way.
func TestFoldSpreadsAGrowingMonth(t *testing.T) {
	dynamodb.SetStateItemBytes(t, 1024) // 16 items hold 16 KB
	c := newClock()
	a := instances(t, c, 1)[0]
	created := c.Now().Add(-time.Minute).Truncate(time.Second)
	id := func(i int) string { // ids as random as generated ones: they do not compress
		h := fnv.New64a()
		fmt.Fprint(h, i)
		return fmt.Sprintf("g%x", h.Sum64())
	}
	watched := map[int]int64{7: 4 * 25, 123: 2 * 25, 499: 2 * 25} // i → visits it gets below
	for i := range watched {
		if err := a.Create(ctxT(t), shortener.Link{ID: id(i), URL: "https://g.example/", CreatedAt: created}); err != nil {
			t.Fatal(err)
		}
	}
	round := func(n int) {
		t.Helper()
		var ds []shortener.VisitDelta
		for i := range n { // 25 referrers a link, at random: a larger state with fewer links
			d := visitsOn(id(i), created, 25, c.today(), "(direct)", "Chrome")
			d.Stats.Referrers = shortener.Breakdown{}
			for j := 0; len(d.Stats.Referrers) < 25; j++ {
				h := fnv.New32a()
				fmt.Fprint(h, i, j)
				d.Stats.Referrers[fmt.Sprintf("r%d.example", h.Sum32()%3000)] = 1
			}
			ds = append(ds, d)
		}
		add(t, a, ds...)
		if err := a.FlushVisits(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if _, err := a.FoldVisits(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	shards := func(k int) int {
		return reservedKeys(t, a, fmt.Sprintf("v:s:%s:%d:", c.Now().Format("2006-01"), k))
	}
	round(100) // a small month: 16 shards
	if n := shards(4); n != 16 {
		t.Fatalf("%d items of 16 shards after a small fold, want 16", n)
	}
	round(500) // more state than 16 items of 1 KB
	round(500) // spread over more shards
	spread := 0
	for k := 5; k <= 12; k++ {
		if n := shards(k); n > 0 {
			if spread != 0 || n < 1<<k*3/4 {
				t.Errorf("%d items of %d shards after the month grew (and %d of %d)", n, 1<<k, spread, 1<<k)
			}
			spread = n
		}
	}
	if spread == 0 {
		t.Error("the month was not spread over more shards")
	}
	round(10) // deletes the old items
	if n := shards(4); n != 0 {
		t.Errorf("%d items of 16 shards left, want them deleted", n)
	}
	for i, want := range watched {
		if got := statsOf(t, a, id(i)).Total; got != want {
			t.Errorf("%s: %d visits, want %d", id(i), got, want)
		}
	}
}

// Half-way through a fold into a month that has state, some state items
// hold the fold's records and others not yet: a query across links, and
// one of a link, count each visit once.
func TestCountsHalfWayThroughAFold(t *testing.T) {
	c := newClock()
	in := instances(t, c, 2)
	a, b := in[0], in[1]
	ids, deltas := visitedLinks(t, a, c, "halfway", 5)
	for round := range 2 {
		add(t, a, deltas...)
		if err := a.FlushVisits(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			if _, err := a.FoldVisits(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}
	}
	died := errors.New("the process died")
	a.StopFoldAfter(13, died) // these ids fall in ranges 13 and 14
	if _, err := a.FoldVisits(ctxT(t)); !errors.Is(err, died) {
		t.Fatalf("fold: %v, want it to stop after range 13", err)
	}
	all := linksOf(t, b, c.Now())
	q := shortener.StatsQuery{From: shortener.DayStart(c.Now()), To: shortener.DayStart(c.Now()).Add(24 * time.Hour), Granularity: shortener.GranularityDay}
	for i, id := range ids {
		want := 2 * int64(i%5+1)
		q.ID = id
		one, err := b.VisitCounts(ctxT(t), q)
		if err != nil {
			t.Fatal(err)
		}
		if all[id].People != want || one.Series[0].People != want {
			t.Fatalf("%s: %d visits across links, %d in its own query, want %d", id, all[id].People, one.Series[0].People, want)
		}
	}
}
