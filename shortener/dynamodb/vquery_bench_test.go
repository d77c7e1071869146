package dynamodb_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/linkgate/linkgate/internal/testdep"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/dynamodb"
)

// meter sums the capacity units DynamoDB reports: it asks every call for
// them (ReturnConsumedCapacity TOTAL).
type meter struct {
	mu          sync.Mutex
	read, write float64
}

func (m *meter) add(cs ...types.ConsumedCapacity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range cs {
		m.read += aws.ToFloat64(c.ReadCapacityUnits)
		m.write += aws.ToFloat64(c.WriteCapacityUnits)
		if c.ReadCapacityUnits == nil && c.WriteCapacityUnits == nil {
			m.read += aws.ToFloat64(c.CapacityUnits) // reads report only the total
		}
	}
}

func (m *meter) reads() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.read
}

// option adds the meter to a client's calls of the kinds the store reads
// statistics with.
func (m *meter) option(o *ddb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("meter", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			total := types.ReturnConsumedCapacityTotal
			switch p := in.Parameters.(type) {
			case *ddb.BatchGetItemInput:
				p.ReturnConsumedCapacity = total
			case *ddb.GetItemInput:
				p.ReturnConsumedCapacity = total
			case *ddb.QueryInput:
				p.ReturnConsumedCapacity = total
			case *ddb.ScanInput:
				p.ReturnConsumedCapacity = total
			}
			out, md, err := next.HandleInitialize(ctx, in)
			switch r := out.Result.(type) {
			case *ddb.BatchGetItemOutput:
				m.add(r.ConsumedCapacity...)
			case *ddb.GetItemOutput:
				if r.ConsumedCapacity != nil {
					m.add(*r.ConsumedCapacity)
				}
			case *ddb.QueryOutput:
				if r.ConsumedCapacity != nil {
					m.add(*r.ConsumedCapacity)
				}
			case *ddb.ScanOutput:
				if r.ConsumedCapacity != nil {
					m.add(*r.ConsumedCapacity)
				}
			}
			return out, md, err
		}), middleware.After)
	})
}

// BenchmarkStatsQueryUnits measures the read units of the statistics
// queries on DynamoDB Local (ReturnConsumedCapacity): a link's 90 days by
// day, and all links' 30 days by day with the top links, over
// LINKGATE_BENCH_DDB_LINKS links (5,000) visited LINKGATE_BENCH_DDB_VISITS
// times a day (5,000, uniformly: about 3,900 links a day) for 90 days,
// each visit with a referrer among 20, a browser among 5, a country among
// 10, an OS and a device; a record a day, folded every 7 days and at the
// end. docs/dynamodb.md, "Statistics by range".
func BenchmarkStatsQueryUnits(b *testing.B) {
	endpoint := testdep.Env(b, testdep.DynamoDBEndpoint)
	links, perDay := envInt("LINKGATE_BENCH_DDB_LINKS", 5000), envInt("LINKGATE_BENCH_DDB_VISITS", 5000)
	m := &meter{}
	client := dynamodb.NewClient(awsConfig(), func(o *ddb.Options) { o.BaseEndpoint = aws.String(endpoint) }, m.option)
	table := newTable(b, client)
	c := newClock()
	start := c.Now()
	s := dynamodb.New(client, dynamodb.Options{Table: table, Timeout: time.Minute, ManualVisits: true, Clock: c.Now})
	b.Cleanup(func() { s.Close() })
	ctx := context.Background()
	created := start.Truncate(time.Second)
	// Random ids, as generated ones are: sequential ones share the top
	// bits of their hash, which place them in state shards.
	rng := rand.New(rand.NewPCG(27, 3))
	ids := make([]string, links)
	for i := range ids {
		ids[i] = fmt.Sprintf("q%013x", rng.Uint64()>>12)
	}
	if err := createAll(ctx, s, ids, created); err != nil {
		b.Fatal(err)
	}
	var logBytes int64
	for day := range 90 {
		batch := dayBatch(rng, ids, perDay, created, int32(c.Now().Unix()/3600))
		if err := s.AddVisits(ctx, batch); err != nil {
			b.Fatal(err)
		}
		if err := s.FlushVisits(ctx); err != nil {
			b.Fatal(err)
		}
		if day%7 == 6 {
			if _, err := s.FoldVisits(ctx); err != nil {
				b.Fatal(err)
			}
		}
		c.Advance(24 * time.Hour)
	}
	svc := shortener.NewService(s, shortener.Options{Now: c.Now})
	queries := []struct {
		name string
		q    shortener.StatsQuery
	}{
		{"link-90-days", shortener.StatsQuery{ID: ids[links/2], From: c.Now().Add(-90 * 24 * time.Hour), Granularity: shortener.GranularityDay}},
		{"all-links-30-days", shortener.StatsQuery{From: c.Now().Add(-30 * 24 * time.Hour), Granularity: shortener.GranularityDay}},
	}
	run := func(b *testing.B, q shortener.StatsQuery) {
		before := m.reads()
		n := 0
		for b.Loop() {
			r, err := svc.VisitReport(ctx, q)
			if err != nil {
				b.Fatal(err)
			}
			if r.Total == 0 {
				b.Fatal("no visits counted")
			}
			n++
		}
		b.ReportMetric((m.reads()-before)/float64(n), "RRU/op")
	}
	// The last 6 days' records are not folded yet: what a query reads
	// besides the state items.
	for _, qq := range queries {
		b.Run(qq.name+"-6-records-unfolded", func(b *testing.B) { run(b, qq.q) })
	}
	res, err := s.FoldVisits(ctx)
	if err != nil {
		b.Fatal(err)
	}
	logBytes = s.VisitLogStats().RecordBytes
	b.Logf("%d links, %d visits a day for 90 days: %d bytes of log; the last fold wrote %d state items, %d bytes", links, perDay, logBytes, res.Items, res.StateBytes)
	for _, qq := range queries {
		b.Run(qq.name, func(b *testing.B) { run(b, qq.q) })
	}
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// createAll creates the links, 32 at a time.
func createAll(ctx context.Context, s *dynamodb.Store, ids []string, created time.Time) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	sem := make(chan struct{}, 32)
	for _, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := s.Create(ctx, shortener.Link{ID: id, URL: "https://q.example/" + id, CreatedAt: created}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// dayBatch returns n visits of random links in the hours of the day that
// starts at hour h, in the hourly form the aggregator writes.
func dayBatch(rng *rand.Rand, ids []string, n int, created time.Time, h int32) *shortener.VisitBatch {
	counts := map[string]map[shortener.VisitKey]int64{}
	for range n {
		id := ids[rng.IntN(len(ids))]
		hour := h + int32(rng.IntN(24))
		bot := rng.IntN(5) == 0
		keys := []shortener.VisitKey{
			{Kind: shortener.KindHour, Hour: hour, Bot: bot},
			{Kind: shortener.KindReferrer, Name: fmt.Sprintf("r%d.example", rng.IntN(20)), Hour: hour, Bot: bot},
			{Kind: shortener.KindCountry, Name: fmt.Sprintf("C%d", rng.IntN(10)), Hour: hour, Bot: bot},
			{Kind: shortener.KindOS, Name: []string{"Linux", "Windows", "iOS"}[rng.IntN(3)], Hour: hour, Bot: bot},
			{Kind: shortener.KindDevice, Name: []string{"desktop", "mobile"}[rng.IntN(2)], Hour: hour, Bot: bot},
		}
		if bot {
			keys = append(keys, shortener.VisitKey{Kind: shortener.KindBot, Name: "Slackbot", Hour: hour, Bot: true})
		} else {
			keys = append(keys, shortener.VisitKey{Kind: shortener.KindBrowser, Name: fmt.Sprintf("B%d", rng.IntN(5)), Hour: hour})
		}
		if counts[id] == nil {
			counts[id] = map[shortener.VisitKey]int64{}
		}
		for _, k := range keys {
			counts[id][k]++
		}
	}
	b := &shortener.VisitBatch{}
	index := map[shortener.VisitKey]uint32{}
	for id, ks := range counts {
		l := shortener.LinkVisits{ID: id, CreatedAt: created.Unix()}
		for k, n := range ks {
			i, ok := index[k]
			if !ok {
				i = uint32(len(b.Keys))
				index[k] = i
				b.Keys = append(b.Keys, k)
			}
			l.Counts = append(l.Counts, shortener.KeyCount{Key: i, N: n})
			if k.Kind == shortener.KindHour {
				l.Total += n
				if k.Bot {
					l.Bots += n
				}
			}
		}
		b.Links = append(b.Links, l)
	}
	slices.SortFunc(b.Links, func(x, y shortener.LinkVisits) int { return strings.Compare(x.ID, y.ID) })
	return b
}
