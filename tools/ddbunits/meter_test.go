package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/linkgate/linkgate/internal/testdep"
	"github.com/linkgate/linkgate/shortener/dynamodb"
)

// Requests in DynamoDB's JSON protocol, as the AWS SDK sends them.
func TestRewriteRequest(t *testing.T) {
	tests := []struct {
		op, body string
		class    string
		items    int
	}{
		{"GetItem", `{"TableName":"t","Key":{"shortURL":{"S":"abc"}}}`, "link", 1},
		{"UpdateItem", `{"TableName":"t","Key":{"shortURL":{"S":"linkgate:v:seq"}},"UpdateExpression":"ADD n :one"}`, "stats", 1},
		{"PutItem", `{"TableName":"t","Item":{"shortURL":{"S":"abc"},"originalURL":{"S":"https://x/"}}}`, "link", 1},
		{"BatchGetItem", `{"RequestItems":{"t":{"Keys":[{"shortURL":{"S":"abc"}},{"shortURL":{"S":"linkgate:v:s:1"}}]}}}`, "mixed", 2},
		{"BatchWriteItem", `{"RequestItems":{"t":[{"PutRequest":{"Item":{"shortURL":{"S":"linkgate:a"}}}},{"DeleteRequest":{"Key":{"shortURL":{"S":"linkgate:b"}}}}]}}`, "stats", 2},
		{"TransactWriteItems", `{"TransactItems":[{"Put":{"TableName":"t","Item":{"shortURL":{"S":"linkgate:x"}}}},{"Update":{"TableName":"t","Key":{"shortURL":{"S":"abc"}}}}]}`, "mixed", 2},
		{"Scan", `{"TableName":"t"}`, "scan", 0},
	}
	for _, tt := range tests {
		body, info := rewriteRequest(tt.op, []byte(tt.body))
		if info.Op != tt.op || info.Class != tt.class || info.Items != tt.items {
			t.Errorf("%s: info %+v, want class %s, %d items", tt.op, info, tt.class, tt.items)
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil || m["ReturnConsumedCapacity"] != "TOTAL" {
			t.Errorf("%s: rewritten body %s (%v) does not ask for capacity", tt.op, body, err)
		}
	}
	// Operations without capacity pass unchanged.
	if body, _ := rewriteRequest("DescribeTable", []byte(`{"TableName":"t"}`)); string(body) != `{"TableName":"t"}` {
		t.Errorf("DescribeTable rewritten: %s", body)
	}
}

func TestParseResponse(t *testing.T) {
	tests := []struct {
		status     int
		body       string
		units      float64
		failed, ok bool
	}{
		{200, `{"ConsumedCapacity":{"CapacityUnits":0.5,"TableName":"t"},"Item":{}}`, 0.5, false, true},
		{200, `{"ConsumedCapacity":[{"CapacityUnits":3,"TableName":"t"},{"CapacityUnits":1.5,"TableName":"u"}]}`, 4.5, false, true},
		{200, `{}`, 0, false, true},
		{400, `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"}`, 0, true, false},
		{400, `{"__type":"com.amazonaws.dynamodb.v20120810#ValidationException"}`, 0, false, false},
	}
	for _, tt := range tests {
		units, failed, ok := parseResponse(tt.status, []byte(tt.body))
		if units != tt.units || failed != tt.failed || ok != tt.ok {
			t.Errorf("%d %s: %v %v %v, want %v %v %v", tt.status, tt.body, units, failed, ok, tt.units, tt.failed, tt.ok)
		}
	}
}

// meteredTable starts a meter in front of DynamoDB Local and creates a
// table named after prefix there, deleted when the test ends; it returns
// clients to DynamoDB Local direct and through the meter.
func meteredTable(t *testing.T, prefix string) (ctx context.Context, m *meter, direct, metered *ddb.Client, table string) {
	t.Helper()
	endpoint := testdep.Env(t, testdep.DynamoDBEndpoint)
	target, _ := url.Parse(endpoint)
	m = newMeter(target)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go http.Serve(ln, m)
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("t", "t", "")}
	direct = dynamodb.NewClient(cfg, func(o *ddb.Options) { o.BaseEndpoint = aws.String(endpoint) })
	metered = dynamodb.NewClient(cfg, func(o *ddb.Options) { o.BaseEndpoint = aws.String("http://" + ln.Addr().String()) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	table = prefix + "-" + time.Now().Format("150405.000000")
	if err := dynamodb.CreateTable(ctx, direct, table, true, time.Minute, nopWriter{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.DeleteTable(ctx, &ddb.DeleteTableInput{TableName: &table}) })
	return ctx, m, direct, metered, table
}

// Through the meter, DynamoDB Local's own figures are counted: item sizes
// by DynamoDB's rules (names plus values), writes rounded up to 1 KB,
// eventually consistent reads to half a unit per 4 KB.
func TestMeterAgainstDynamoDBLocal(t *testing.T) {
	ctx, m, _, metered, table := meteredTable(t, "meter")
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	// shortURL (8) + "abcdefghij" (10) + originalURL (11) + 996 = 1025 bytes: 2 write units.
	item := map[string]types.AttributeValue{"shortURL": s("abcdefghij"), "originalURL": s(strings.Repeat("x", 996))}
	if _, err := metered.PutItem(ctx, &ddb.PutItemInput{TableName: &table, Item: item}); err != nil {
		t.Fatal(err)
	}
	if _, err := metered.GetItem(ctx, &ddb.GetItemInput{TableName: &table, Key: map[string]types.AttributeValue{"shortURL": s("abcdefghij")}}); err != nil {
		t.Fatal(err)
	}
	_, err := metered.PutItem(ctx, &ddb.PutItemInput{TableName: &table, Item: item, ConditionExpression: aws.String("attribute_not_exists(shortURL)")})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("conditional put: %v, want ConditionalCheckFailedException", err)
	}
	got := m.snapshot()
	// The refused put is billed as the larger of the two items: 2 units.
	if c := got[opKey{"PutItem", "link"}]; c.Calls != 1 || c.Units != 2 || c.Failed != 1 || c.Computed != 2 {
		t.Errorf("PutItem counts %+v, want 1 call, 2 units, 1 refused, computed 2", c)
	}
	if c := got[opKey{"GetItem", "link"}]; c.Calls != 1 || c.Units != 0.5 {
		t.Errorf("GetItem counts %+v, want 1 call, 0.5 units", c)
	}
}

// The units the meter computes, where DynamoDB Local reports none, follow
// the rules DynamoDB Local itself applies where it does report: for items
// of every attribute type around the 1 KB and 4 KB boundaries, the write
// and read units computed from the item's size are those DynamoDB Local
// reports for writing and reading it. Then what it does not report:
// refused conditional writes sized by the existing item, a cancelled
// transaction, keys a batch did not find.
func TestComputedUnitsAgainstDynamoDBLocal(t *testing.T) {
	ctx, m, direct, metered, table := meteredTable(t, "units")
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	b := func(n int) types.AttributeValue { return &types.AttributeValueMemberB{Value: make([]byte, n)} }
	key := func(id string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"shortURL": s(id)}
	}
	items := map[string]map[string]types.AttributeValue{}
	for i, pad := range []int{900, 1000, 1010, 2040, 4060, 4100, 9000} {
		items[fmt.Sprintf("k%d", i)] = map[string]types.AttributeValue{
			"shortURL": s(fmt.Sprintf("k%d", i)), "d": b(pad), "n": n("-12345.6789000"), "e": n("1e10"), "ok": &types.AttributeValueMemberBOOL{Value: true},
			"m":  &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"é": s("ünï"), "z": &types.AttributeValueMemberNULL{Value: true}}},
			"l":  &types.AttributeValueMemberL{Value: []types.AttributeValue{n("7"), s("x")}},
			"ss": &types.AttributeValueMemberSS{Value: []string{"a", "bc"}}, "ns": &types.AttributeValueMemberNS{Value: []string{"10", "0.5"}},
			"bs": &types.AttributeValueMemberBS{Value: [][]byte{{1, 2, 3}, {4}}},
		}
	}
	for id, item := range items {
		size := itemBytes(item)
		put, err := direct.PutItem(ctx, &ddb.PutItemInput{TableName: &table, Item: item, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
		if err != nil {
			t.Fatal(err)
		}
		if got := aws.ToFloat64(put.ConsumedCapacity.CapacityUnits); got != writeUnits(size) {
			t.Errorf("%s (%d bytes by the rules): DynamoDB Local reports %v write units, the rules %v", id, size, got, writeUnits(size))
		}
		get, err := direct.GetItem(ctx, &ddb.GetItemInput{TableName: &table, Key: key(id), ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
		if err != nil {
			t.Fatal(err)
		}
		if got := aws.ToFloat64(get.ConsumedCapacity.CapacityUnits); got != readUnits(size, true) {
			t.Errorf("%s (%d bytes by the rules): DynamoDB Local reports %v read units, the rules %v", id, size, got, readUnits(size, true))
		}
	}
	// A refused put of a small item over k6 (9 KB): 9 units, not 1.
	cond := aws.String("attribute_not_exists(shortURL)")
	var ccf *types.ConditionalCheckFailedException
	if _, err := metered.PutItem(ctx, &ddb.PutItemInput{TableName: &table, Item: key("k6"), ConditionExpression: cond}); !errors.As(err, &ccf) {
		t.Fatalf("refused put: %v", err)
	}
	// A refused update of a missing item: 1 unit.
	if _, err := metered.UpdateItem(ctx, &ddb.UpdateItemInput{TableName: &table, Key: key("none"), UpdateExpression: aws.String("ADD v :one"),
		ConditionExpression: aws.String("attribute_exists(shortURL)"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": n("1")}}); !errors.As(err, &ccf) {
		t.Fatalf("refused update: %v", err)
	}
	// A cancelled transaction: a put over k3 (2 KB+) and an update of k0
	// (1 KB-): 2 × (3 + 1).
	var tce *types.TransactionCanceledException
	if _, err := metered.TransactWriteItems(ctx, &ddb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: &table, Item: key("k3"), ConditionExpression: cond}},
		{Update: &types.Update{TableName: &table, Key: key("k0"), UpdateExpression: aws.String("ADD v :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": n("1")}}},
	}}); !errors.As(err, &tce) {
		t.Fatalf("cancelled transaction: %v", err)
	}
	// A batch of two found items (under 4 KB) and two missing ones,
	// strongly consistent: DynamoDB Local reports 2, the missing cost 1 each.
	got, err := metered.BatchGetItem(ctx, &ddb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		table: {ConsistentRead: aws.Bool(true), Keys: []map[string]types.AttributeValue{key("k0"), key("k1"), key("none1"), key("none2")}},
	}})
	if err != nil || len(got.Responses[table]) != 2 {
		t.Fatalf("batch get: %v, %v", got, err)
	}
	counts := m.snapshot()
	for _, tt := range []struct {
		op              string
		units, computed float64
		calls, refused  int64
	}{
		{"PutItem", 0, 9, 0, 1},
		{"UpdateItem", 0, 1, 0, 1},
		{"TransactWriteItems", 0, 8, 0, 1},
		{"BatchGetItem", 2, 2, 1, 0},
	} {
		var c opCount
		for k, v := range counts {
			if k.Op == tt.op {
				c = v
			}
		}
		if c.Units != tt.units || c.Computed != tt.computed || c.Calls != tt.calls || c.Failed != tt.refused {
			t.Errorf("%s: %+v, want %v units reported, %v computed, %d calls, %d refused", tt.op, c, tt.units, tt.computed, tt.calls, tt.refused)
		}
	}
}

func TestItemSizeRules(t *testing.T) {
	tests := []struct {
		item string
		size int
	}{
		{`{"shortURL":{"S":"abc"}}`, 8 + 3},
		{`{"a":{"N":"12345"}}`, 1 + 3 + 1},    // 5 digits: 3 bytes, plus 1
		{`{"a":{"N":"-0.00120"}}`, 1 + 1 + 1}, // significant digits "12"
		{`{"a":{"B":"AAECAw=="}}`, 1 + 4},     // 4 bytes
		{`{"a":{"BOOL":true},"b":{"NULL":true}}`, 2 + 2},
		{`{"a":{"L":[{"S":"xy"},{"N":"1"}]}}`, 1 + 3 + 2 + 2 + 2},
		{`{"a":{"M":{"k":{"S":"xy"}}}}`, 1 + 3 + 1 + 1 + 2},
		{`{"a":{"SS":["x","yz"]},"b":{"BS":["AAE=","AQ=="]}}`, 1 + 3 + 1 + 3},
		{`{"é":{"S":"ü"}}`, 2 + 2},
		{`not json`, 0},
	}
	for _, tt := range tests {
		if got := itemSize(json.RawMessage(tt.item)); got != tt.size {
			t.Errorf("itemSize(%s) = %d, want %d", tt.item, got, tt.size)
		}
	}
	for _, tt := range []struct {
		n     int
		write float64
		read  float64 // eventually consistent
	}{{0, 1, 0.5}, {1024, 1, 0.5}, {1025, 2, 0.5}, {4096, 4, 0.5}, {4097, 5, 1}, {10000, 10, 1.5}} {
		if w, r := writeUnits(tt.n), readUnits(tt.n, false); w != tt.write || r != tt.read || readUnits(tt.n, true) != 2*tt.read {
			t.Errorf("%d bytes: %v write, %v read units; want %v, %v", tt.n, w, r, tt.write, tt.read)
		}
	}
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
