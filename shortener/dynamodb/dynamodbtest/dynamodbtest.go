// Package dynamodbtest opens real DynamoDB stores for tests: a fresh table
// on the DynamoDB Local the test command started
// (LINKGATE_TEST_DYNAMODB_ENDPOINT; skipped without it outside CI),
// deleted when the test ends.
package dynamodbtest

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/linkgate/linkgate/internal/testdep"
	"github.com/linkgate/linkgate/shortener/dynamodb"
)

var seq atomic.Int64

// Open returns a store over a new table, closed and deleted at cleanup.
// opts.Table is set; opts.Timeout defaults to 10 s (DynamoDB Local shares
// the machine with the tests). The table's TTL is off: a test clock in
// the past would make DynamoDB Local delete the visit log's records.
func Open(tb testing.TB, opts dynamodb.Options) *dynamodb.Store {
	tb.Helper()
	endpoint := testdep.Env(tb, testdep.DynamoDBEndpoint)
	c := dynamodb.NewClient(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")},
		func(o *ddb.Options) { o.BaseEndpoint = aws.String(endpoint) })
	opts.Table = fmt.Sprintf("lg-t-%d-%d", time.Now().UnixNano(), seq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dynamodb.CreateTable(ctx, c, opts.Table, true, 30*time.Second, io.Discard); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.DeleteTable(ctx, &ddb.DeleteTableInput{TableName: &opts.Table})
	})
	if _, err := c.UpdateTimeToLive(ctx, &ddb.UpdateTimeToLiveInput{TableName: &opts.Table, TimeToLiveSpecification: &types.TimeToLiveSpecification{
		AttributeName: aws.String(dynamodb.AttrExpiresAt), Enabled: aws.Bool(false)}}); err != nil {
		tb.Fatal(err)
	}
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	s := dynamodb.New(c, opts)
	tb.Cleanup(func() { s.Close() })
	return s
}
