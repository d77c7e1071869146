package main

import (
	"context"
	"encoding/json"
	"errors"
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

// Through the meter, DynamoDB Local's own figures are counted: item sizes
// by DynamoDB's rules (names plus values), writes rounded up to 1 KB,
// eventually consistent reads to half a unit per 4 KB.
func TestMeterAgainstDynamoDBLocal(t *testing.T) {
	endpoint := testdep.Env(t, testdep.DynamoDBEndpoint)
	target, _ := url.Parse(endpoint)
	m := newMeter(target)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go http.Serve(ln, m)
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("t", "t", "")}
	direct := dynamodb.NewClient(cfg, func(o *ddb.Options) { o.BaseEndpoint = aws.String(endpoint) })
	metered := dynamodb.NewClient(cfg, func(o *ddb.Options) { o.BaseEndpoint = aws.String("http://" + ln.Addr().String()) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	table := "meter-" + time.Now().Format("150405.000000")
	if err := dynamodb.CreateTable(ctx, direct, table, true, time.Minute, nopWriter{}); err != nil {
		t.Fatal(err)
	}
	defer direct.DeleteTable(ctx, &ddb.DeleteTableInput{TableName: &table})
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	// shortURL (8) + "abcdefghij" (10) + originalURL (11) + 996 = 1025 bytes: 2 write units.
	item := map[string]types.AttributeValue{"shortURL": s("abcdefghij"), "originalURL": s(strings.Repeat("x", 996))}
	if _, err := metered.PutItem(ctx, &ddb.PutItemInput{TableName: &table, Item: item}); err != nil {
		t.Fatal(err)
	}
	if _, err := metered.GetItem(ctx, &ddb.GetItemInput{TableName: &table, Key: map[string]types.AttributeValue{"shortURL": s("abcdefghij")}}); err != nil {
		t.Fatal(err)
	}
	_, err = metered.PutItem(ctx, &ddb.PutItemInput{TableName: &table, Item: item, ConditionExpression: aws.String("attribute_not_exists(shortURL)")})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("conditional put: %v, want ConditionalCheckFailedException", err)
	}
	got := m.snapshot()
	if c := got[opKey{"PutItem", "link"}]; c.Calls != 1 || c.Units != 2 || c.Failed != 1 {
		t.Errorf("PutItem counts %+v, want 1 call, 2 units, 1 refused", c)
	}
	if c := got[opKey{"GetItem", "link"}]; c.Calls != 1 || c.Units != 0.5 {
		t.Errorf("GetItem counts %+v, want 1 call, 0.5 units", c)
	}
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
