package dynamodb_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/linkgate/linkgate/internal/testdep"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/dynamodb"
	"github.com/linkgate/linkgate/shortener/storetest"
)

// awsConfig is a static configuration for a local endpoint. The store's
// own code paths (NewClient) are used on top of it.
func awsConfig() aws.Config {
	return aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	}
}

// newClient returns a client for endpoint, as NewClient builds it.
func newClient(endpoint string) *ddb.Client {
	return dynamodb.NewClient(awsConfig(), func(o *ddb.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// localClient returns a client for the DynamoDB Local that the test command
// started (LINKGATE_TEST_DYNAMODB_ENDPOINT).
func localClient(t testing.TB) *ddb.Client {
	t.Helper()
	return newClient(testdep.Env(t, testdep.DynamoDBEndpoint))
}

var tableSeq atomic.Int64

// newTable creates a table with a name unique to this test run through
// dynamodb.CreateTable, and deletes it at cleanup.
func newTable(t testing.TB, c *ddb.Client) string {
	t.Helper()
	name := fmt.Sprintf("lg-%d-%d", time.Now().UnixNano(), tableSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dynamodb.CreateTable(ctx, c, name, true, 30*time.Second, io.Discard); err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.DeleteTable(ctx, &ddb.DeleteTableInput{TableName: &name})
	})
	return name
}

// newStore returns a store over a fresh table of DynamoDB Local.
func newStore(t testing.TB, opts dynamodb.Options) *dynamodb.Store {
	t.Helper()
	c := localClient(t)
	opts.Table = newTable(t, c)
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second // DynamoDB Local shares 2 cores with -race tests
	}
	s := dynamodb.New(c, opts)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) shortener.Store { return newStore(t, dynamodb.Options{}) })
}

func TestRecordsConformance(t *testing.T) {
	storetest.RunRecords(t, func(t *testing.T) shortener.Store { return newStore(t, dynamodb.Options{ManualVisits: true}) })
}

func TestConformanceConsistentReads(t *testing.T) {
	storetest.Run(t, func(t *testing.T) shortener.Store {
		return newStore(t, dynamodb.Options{ConsistentReads: true})
	})
}

// seedItem is the seed app's struct (databaseStruct.go), tags and all.
type seedItem struct {
	ID          string `dynamodbav:"shortURL" json:"shortURL"`
	OriginalURL string `dynamodbav:"originalURL" json:"originalURL"`
}

// Items the seed's app wrote (only shortURL and originalURL, marshalled by
// attributevalue as it does) resolve through linkgate.
func TestSeedItemsResolve(t *testing.T) {
	s := newStore(t, dynamodb.Options{})
	ctx := context.Background()
	items := []seedItem{
		{"AbC-_x9Q0z", "https://aws.amazon.com/ec2/graviton/"},
		{"-leadingdx", "https://h.example/p?q=1&r=2"},
		{"emptyURL_1", ""}, // the seed stores {} as an empty URL (its case C5)
	}
	for _, it := range items {
		av, err := attributevalue.MarshalMap(it)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Client().PutItem(ctx, &ddb.PutItemInput{TableName: aws.String(s.Table()), Item: av}); err != nil {
			t.Fatal(err)
		}
	}
	svc := shortener.NewService(s, shortener.Options{})
	for _, it := range items {
		l, err := svc.Resolve(ctx, "", it.ID)
		if err != nil {
			t.Fatalf("Resolve(%q): %v", it.ID, err)
		}
		want := shortener.Link{ID: it.ID, URL: it.OriginalURL}
		if !storetest.Equal(l, want) {
			t.Errorf("Resolve(%q) = %+v, want %+v", it.ID, l, want)
		}
		got, _, err := svc.AppendResolve(ctx, []byte("x"), []byte(it.ID))
		if err != nil || string(got) != "x"+it.OriginalURL {
			t.Errorf("AppendResolve(%q) = %q, %v", it.ID, got, err)
		}
	}
	// A seed item's id is taken for linkgate too.
	if _, err := svc.Create(ctx, shortener.CreateRequest{URL: "https://new.example/", Slug: items[0].ID}); !errors.Is(err, shortener.ErrConflict) {
		t.Errorf("Create over a seed item: %v, want ErrConflict", err)
	}
}

// With several domains, the default domain's links keep the seed's
// layout (shortURL = id: the seed's GetItem reads them), and another
// domain's link of the same slug is the item shortURL = domain/id, which
// the seed's app never asks for.
func TestDomainItemsKeepTheSeedLayout(t *testing.T) {
	s := newStore(t, dynamodb.Options{})
	ctx := context.Background()
	svc := shortener.NewService(s, shortener.Options{})
	for _, req := range []shortener.CreateRequest{
		{URL: "https://default.example/", Slug: "promo"},
		{URL: "https://other.example/", Slug: "promo", Domain: "go.example.com"},
	} {
		if _, err := svc.Create(ctx, req); err != nil {
			t.Fatalf("Create(%+v): %v", req, err)
		}
	}
	for key, want := range map[string]string{"promo": "https://default.example/", "go.example.com/promo": "https://other.example/"} {
		out, err := s.Client().GetItem(ctx, &ddb.GetItemInput{TableName: aws.String(s.Table()), Key: map[string]types.AttributeValue{
			"shortURL": &types.AttributeValueMemberS{Value: key}}})
		if err != nil {
			t.Fatal(err)
		}
		var got seedItem
		if err := attributevalue.UnmarshalMap(out.Item, &got); err != nil || got != (seedItem{ID: key, OriginalURL: want}) {
			t.Errorf("GetItem shortURL=%q: %+v %v, want %s", key, got, err, want)
		}
	}
	if err := svc.Delete(ctx, "go.example.com", "promo"); err != nil {
		t.Fatal(err)
	}
	if l, err := svc.Resolve(ctx, "", "promo"); err != nil || l.URL != "https://default.example/" {
		t.Errorf("default domain's link after the other's delete: %+v %v", l, err)
	}
	if _, err := svc.Create(ctx, shortener.CreateRequest{URL: "https://x.example/", Slug: "promo", Domain: "linkgate:1234"}); shortener.ErrorCode(err) != shortener.InvalidParameter {
		t.Errorf("a domain in DynamoDB's reserved prefix: %v, want invalid_parameter", err)
	}
}

// Links linkgate writes read back in the seed's shape: GetItem and
// attributevalue.UnmarshalMap into its struct, as its getItem.go does.
func TestLinkgateItemsReadBySeed(t *testing.T) {
	s := newStore(t, dynamodb.Options{})
	ctx := context.Background()
	svc := shortener.NewService(s, shortener.Options{})
	tests := []shortener.CreateRequest{
		{URL: "https://aws.amazon.com/ec2/graviton/"},
		{URL: "https://h.example/x?a=1&b=<2>", Slug: "my-custom_slug"},
		{URL: "https://e.example/", ExpiresAt: time.Now().Add(time.Hour), MaxVisits: 10},
	}
	for _, req := range tests {
		l, err := svc.Create(ctx, req)
		if err != nil {
			t.Fatalf("Create(%+v): %v", req, err)
		}
		out, err := s.Client().GetItem(ctx, &ddb.GetItemInput{TableName: aws.String(s.Table()), Key: map[string]types.AttributeValue{
			"shortURL": &types.AttributeValueMemberS{Value: l.ID}}})
		if err != nil {
			t.Fatal(err)
		}
		var got seedItem
		if err := attributevalue.UnmarshalMap(out.Item, &got); err != nil {
			t.Fatalf("unmarshal as the seed does: %v", err)
		}
		if want := (seedItem{ID: l.ID, OriginalURL: req.URL}); got != want {
			t.Errorf("seed reads %+v, want %+v", got, want)
		}
		// The extra attributes are numbers, expiresAt in epoch seconds (TTL).
		if n, ok := out.Item["createdAt"].(*types.AttributeValueMemberN); !ok || n.Value != fmt.Sprint(l.CreatedAt.Unix()) {
			t.Errorf("createdAt = %#v, want N %d", out.Item["createdAt"], l.CreatedAt.Unix())
		}
		if !req.ExpiresAt.IsZero() {
			if n, ok := out.Item["expiresAt"].(*types.AttributeValueMemberN); !ok || n.Value != fmt.Sprint(l.ExpiresAt.Unix()) {
				t.Errorf("expiresAt = %#v, want N %d", out.Item["expiresAt"], l.ExpiresAt.Unix())
			}
			if n, ok := out.Item["maxVisits"].(*types.AttributeValueMemberN); !ok || n.Value != "10" {
				t.Errorf("maxVisits = %#v, want N 10", out.Item["maxVisits"])
			}
		} else if _, ok := out.Item["expiresAt"]; ok {
			t.Errorf("expiresAt written for a link that never expires: %#v", out.Item)
		}
	}
}

// An item whose TTL has passed but that DynamoDB has not deleted yet is
// refused by the Service.
func TestExpiredItemRefused(t *testing.T) {
	s := newStore(t, dynamodb.Options{})
	ctx := context.Background()
	past := time.Now().Add(-time.Minute).Unix()
	_, err := s.Client().PutItem(ctx, &ddb.PutItemInput{TableName: aws.String(s.Table()), Item: map[string]types.AttributeValue{
		"shortURL":    &types.AttributeValueMemberS{Value: "expired001"},
		"originalURL": &types.AttributeValueMemberS{Value: "https://old.example/"},
		"expiresAt":   &types.AttributeValueMemberN{Value: fmt.Sprint(past)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	svc := shortener.NewService(s, shortener.Options{})
	if _, err := svc.Resolve(ctx, "", "expired001"); !errors.Is(err, shortener.ErrExpired) && !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("Resolve(expired) = %v, want ErrExpired (or ErrNotFound once TTL deleted it)", err)
	}
}

// Items DynamoDB would refuse are refused before any call, with an error a
// client can act on (a 4xx), never Unavailable or Internal.
func TestBadInputRefusedBeforeTheCall(t *testing.T) {
	// No DynamoDB at all behind this client: a call would fail Unavailable.
	s := dynamodb.New(newClient("http://127.0.0.1:1"), dynamodb.Options{Table: "t", Timeout: time.Second})
	ctx := context.Background()
	tests := []struct {
		name string
		link shortener.Link
		code shortener.Code
	}{
		{"item over 400 KB", shortener.Link{ID: "big0000001", URL: "https://big.example/" + strings.Repeat("a", 400*1024)}, shortener.URLTooLong},
		{"empty id", shortener.Link{URL: "https://x.example/"}, shortener.InvalidSlug},
		{"id over 2048 bytes", shortener.Link{ID: strings.Repeat("k", 2049), URL: "https://x.example/"}, shortener.InvalidSlug},
		{"URL not UTF-8", shortener.Link{ID: "badutf8001", URL: "https://x.example/\xff"}, shortener.InvalidURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Create(ctx, tt.link)
			if got := shortener.ErrorCode(err); got != tt.code {
				t.Errorf("Create: %v (code %q), want code %q", err, got, tt.code)
			}
		})
	}
	for _, id := range []string{"", strings.Repeat("k", 2049), "\xff\xfe"} {
		if _, err := s.Get(ctx, id); !errors.Is(err, shortener.ErrNotFound) {
			t.Errorf("Get(%q): %v, want ErrNotFound", id, err)
		}
		if err := s.Delete(ctx, id); !errors.Is(err, shortener.ErrNotFound) {
			t.Errorf("Delete(%q): %v, want ErrNotFound", id, err)
		}
	}
}

// The largest item that fits is stored: the size check is not too strict.
func TestLargestURLThatFits(t *testing.T) {
	s := newStore(t, dynamodb.Options{})
	l := shortener.Link{ID: "large00001", URL: "https://l.example/" + strings.Repeat("b", 399*1024), CreatedAt: time.Unix(1700000000, 0).UTC()}
	if err := s.Create(context.Background(), l); err != nil {
		t.Fatalf("Create(399 KB URL): %v", err)
	}
	got, err := s.Get(context.Background(), l.ID)
	if err != nil || got.URL != l.URL {
		t.Fatalf("Get: %d bytes, %v", len(got.URL), err)
	}
}

func TestCreateTableIdempotent(t *testing.T) {
	c := localClient(t)
	name := newTable(t, c) // created once (and TTL enabled) here
	ctx := context.Background()
	for i := range 2 {
		var out strings.Builder
		if err := dynamodb.CreateTable(ctx, c, name, i == 0, time.Minute, &out); err != nil {
			t.Fatalf("CreateTable again (%d): %v", i, err)
		}
		if !strings.Contains(out.String(), "already exists") {
			t.Errorf("output %q does not say the table exists", out.String())
		}
	}
	d, err := c.DescribeTable(ctx, &ddb.DescribeTableInput{TableName: &name})
	if err != nil {
		t.Fatal(err)
	}
	if d.Table.BillingModeSummary == nil || d.Table.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
		t.Errorf("billing mode %+v, want PAY_PER_REQUEST", d.Table.BillingModeSummary)
	}
	ttl, err := c.DescribeTimeToLive(ctx, &ddb.DescribeTimeToLiveInput{TableName: &name})
	if err != nil {
		t.Fatal(err)
	}
	if st := ttl.TimeToLiveDescription; st.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(st.AttributeName) != "expiresAt" {
		t.Errorf("TTL %s on %q, want ENABLED on expiresAt", st.TimeToLiveStatus, aws.ToString(st.AttributeName))
	}
	if err := dynamodb.New(c, dynamodb.Options{Table: name}).CheckTable(ctx); err != nil {
		t.Errorf("CheckTable: %v", err)
	}
}

func TestCheckTable(t *testing.T) {
	c := localClient(t)
	ctx := context.Background()

	missing := fmt.Sprintf("lg-missing-%d", time.Now().UnixNano())
	err := dynamodb.New(c, dynamodb.Options{Table: missing}).CheckTable(ctx)
	var te *dynamodb.TableError
	if !errors.As(err, &te) {
		t.Fatalf("CheckTable(missing) = %v, want a *TableError", err)
	}
	for _, want := range []string{missing, "does not exist", "linkgate dynamodb create-table --table " + missing} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	// A table keyed otherwise (here: with a sort key) is refused, and so is
	// creating "it" again.
	wrong := fmt.Sprintf("lg-wrongkey-%d", time.Now().UnixNano())
	_, err = c.CreateTable(ctx, &ddb.CreateTableInput{
		TableName:   &wrong,
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("shortURL"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("owner"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("shortURL"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("owner"), KeyType: types.KeyTypeRange}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteTable(context.Background(), &ddb.DeleteTableInput{TableName: &wrong}) })
	err = dynamodb.New(c, dynamodb.Options{Table: wrong}).CheckTable(ctx)
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "RANGE owner") {
		t.Errorf("CheckTable(sort key) = %v, want a *TableError naming the key", err)
	}
	if err := dynamodb.CreateTable(ctx, c, wrong, false, time.Minute, io.Discard); !errors.As(err, &te) {
		t.Errorf("CreateTable over a table keyed otherwise = %v, want a *TableError", err)
	}

	// Store calls on a missing table are Unavailable and name the fix.
	s := dynamodb.New(c, dynamodb.Options{Table: missing})
	_, err = s.Get(ctx, "abcdefghij")
	if !errors.Is(err, shortener.ErrUnavailable) || !strings.Contains(err.Error(), "create-table") {
		t.Errorf("Get on a missing table = %v, want ErrUnavailable naming create-table", err)
	}
	if err := s.Ping(ctx); !errors.Is(err, shortener.ErrUnavailable) {
		t.Errorf("Ping on a missing table = %v, want ErrUnavailable", err)
	}
}

// forwarder is a TCP proxy to DynamoDB Local that can be cut and restored
// on the same address, to play an outage.
type forwarder struct {
	t      *testing.T
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
}

func newForwarder(t *testing.T, target string) *forwarder {
	f := &forwarder{t: t, target: target, conns: map[net.Conn]bool{}}
	f.up("127.0.0.1:0")
	t.Cleanup(f.down)
	return f
}

func (f *forwarder) up(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		f.t.Fatalf("listen %s: %v", addr, err)
	}
	f.mu.Lock()
	f.ln, f.addr = ln, ln.Addr().String()
	f.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", f.target)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.conns[c], f.conns[up] = true, true
			f.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
}

// down closes the listener and every connection: the endpoint refuses
// connections as a dead host's port would.
func (f *forwarder) down() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ln != nil {
		f.ln.Close()
		f.ln = nil
	}
	for c := range f.conns {
		c.Close()
	}
	clear(f.conns)
}

// When DynamoDB cannot be reached every call answers ErrUnavailable (within
// its deadline), and the same store works again once it can.
func TestUnreachableThenRecovers(t *testing.T) {
	endpoint := testdep.Env(t, testdep.DynamoDBEndpoint)
	c := localClient(t)
	table := newTable(t, c)
	fwd := newForwarder(t, strings.TrimPrefix(endpoint, "http://"))
	s := dynamodb.New(newClient("http://"+fwd.addr), dynamodb.Options{Table: table, Timeout: 2 * time.Second})
	ctx := context.Background()
	l := shortener.Link{ID: "outage0001", URL: "https://o.example/", CreatedAt: time.Unix(1700000000, 0).UTC()}
	if err := s.Create(ctx, l); err != nil {
		t.Fatalf("Create before the outage: %v", err)
	}

	fwd.down()
	checks := map[string]func() error{
		"Get":    func() error { _, err := s.Get(ctx, l.ID); return err },
		"Create": func() error { return s.Create(ctx, shortener.Link{ID: "outage0002", URL: "https://o.example/2"}) },
		"Delete": func() error { return s.Delete(ctx, l.ID) },
		"List":   func() error { _, err := s.List(ctx, "", 10); return err },
		"Ping":   func() error { return s.Ping(ctx) },
	}
	for name, call := range checks {
		if err := call(); !errors.Is(err, shortener.ErrUnavailable) {
			t.Errorf("%s during the outage: %v, want ErrUnavailable", name, err)
		}
	}

	fwd.up(fwd.addr)
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping after the outage: %v", err)
	}
	got, err := s.Get(ctx, l.ID)
	if err != nil || !storetest.Equal(got, l) {
		t.Errorf("Get after the outage: %+v, %v", got, err)
	}
}

// An endpoint that accepts connections and never answers: the call ends at
// its deadline with ErrUnavailable instead of hanging.
func TestDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	s := dynamodb.New(newClient("http://"+ln.Addr().String()), dynamodb.Options{Table: "t", Timeout: 100 * time.Millisecond})
	if _, err := s.Get(context.Background(), "abcdefghij"); !errors.Is(err, shortener.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get from a silent endpoint: %v, want ErrUnavailable from the deadline", err)
	}
}

// Throttling is retried by the SDK's retryer with backoff; when it
// persists the call answers ErrUnavailable. The endpoint is a fake that
// throttles every request, the only way to get throttled locally.
func TestThrottlingRetriedThenUnavailable(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"slow down"}`)
	}))
	defer srv.Close()
	c := dynamodb.NewClient(awsConfig(), func(o *ddb.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
		o.RetryMaxAttempts = 2 // one retry: throttling backs off from 1 s
	})
	s := dynamodb.New(c, dynamodb.Options{Table: "t", Timeout: 30 * time.Second})
	_, err := s.Get(context.Background(), "abcdefghij")
	if !errors.Is(err, shortener.ErrUnavailable) {
		t.Fatalf("Get while throttled: %v, want ErrUnavailable", err)
	}
	var pte *types.ProvisionedThroughputExceededException
	if !errors.As(err, &pte) {
		t.Errorf("cause %v is not kept", err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d attempts, want 2: throttling was not retried", n)
	}
}

// BenchmarkGet is one GetItem through the SDK against DynamoDB Local: its
// allocations are what a cache miss or a background refresh costs the
// server (the latency is DynamoDB Local's).
func BenchmarkGet(b *testing.B) {
	s := newStore(b, dynamodb.Options{})
	l := shortener.Link{ID: "bench00001", URL: "https://bench.example/", CreatedAt: time.Unix(1700000000, 0).UTC()}
	if err := s.Create(context.Background(), l); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Get(context.Background(), l.ID); err != nil {
			b.Fatal(err)
		}
	}
}
