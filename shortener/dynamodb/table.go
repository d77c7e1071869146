package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/linkgate/linkgate/shortener"
)

// TableError says the table cannot serve linkgate: it does not exist or
// its key is not the seed's. It is a configuration mistake, not an outage:
// a server should refuse to start.
type TableError struct {
	Table   string
	Problem string
}

func (e *TableError) Error() string {
	return fmt.Sprintf("DynamoDB table %q %s; create it with: linkgate dynamodb create-table --table %s",
		e.Table, e.Problem, e.Table)
}

// CheckTable verifies that the table exists and is keyed by shortURL (S)
// alone. It returns a *TableError when it is missing or keyed otherwise,
// and an error matching shortener.ErrUnavailable when DynamoDB does not
// answer (or the credentials may not call DescribeTable): a server can
// start then and report not ready until it does.
func (s *Store) CheckTable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.client.DescribeTable(ctx, &ddb.DescribeTableInput{TableName: &s.table})
	var rnf *types.ResourceNotFoundException
	if errors.As(err, &rnf) {
		return &TableError{Table: s.table, Problem: "does not exist (region " + s.client.Options().Region + ")"}
	}
	if err != nil {
		return fmt.Errorf("describe DynamoDB table %q: %w: %w", s.table, shortener.ErrUnavailable, err)
	}
	return checkSchema(s.table, out.Table)
}

// checkSchema accepts a table whose only key is a string partition key
// named shortURL.
func checkSchema(table string, d *types.TableDescription) error {
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, a := range d.AttributeDefinitions {
		attrTypes[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	ok := len(d.KeySchema) == 1 && d.KeySchema[0].KeyType == types.KeyTypeHash &&
		aws.ToString(d.KeySchema[0].AttributeName) == AttrID && attrTypes[AttrID] == types.ScalarAttributeTypeS
	if ok {
		return nil
	}
	var desc string
	for _, k := range d.KeySchema {
		name := aws.ToString(k.AttributeName)
		desc += fmt.Sprintf(" %s %s (%s)", k.KeyType, name, attrTypes[name])
	}
	return &TableError{Table: table, Problem: "has key" + desc + ", but linkgate needs the partition key " + AttrID + " (S) and no sort key"}
}

// CreateTable creates the table as linkgate and the seed's app expect it:
// on-demand capacity (PAY_PER_REQUEST), partition key shortURL (S), TTL on
// expiresAt. It is idempotent: an existing table with that key is fine, and
// TTL is enabled if it is not yet.
//
// DynamoDB enables TTL only on an ACTIVE table. With wait, CreateTable
// waits (up to maxWait) for the table to become ACTIVE and then enables
// TTL. Without it, it enables TTL if the table is already ACTIVE (DynamoDB
// Local creates tables at once) and otherwise says so: running it again
// finishes the job. Progress goes to out.
func CreateTable(ctx context.Context, client *ddb.Client, table string, wait bool, maxWait time.Duration, out io.Writer) error {
	active, err := createTable(ctx, client, &ddb.CreateTableInput{
		TableName:            &table,
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(AttrID), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(AttrID), KeyType: types.KeyTypeHash}},
	}, checkSchema, wait, maxWait, out)
	if err != nil {
		return err
	}
	if !active {
		fmt.Fprintf(out, "table %s is not ACTIVE yet; TTL on %s can be enabled once it is: run this again with --wait\n",
			table, AttrExpiresAt)
		return nil
	}
	return enableTTL(ctx, client, table, out)
}

// createTable creates the table in (on-demand capacity) unless it exists,
// checks its key with check, and, with wait, waits for it to become
// ACTIVE. It reports whether the table is ACTIVE.
func createTable(ctx context.Context, client *ddb.Client, in *ddb.CreateTableInput,
	check func(string, *types.TableDescription) error, wait bool, maxWait time.Duration, out io.Writer) (bool, error) {
	table := *in.TableName
	_, err := client.CreateTable(ctx, in)
	var inUse *types.ResourceInUseException
	switch {
	case errors.As(err, &inUse):
		fmt.Fprintf(out, "table %s already exists\n", table)
	case err != nil:
		return false, fmt.Errorf("create DynamoDB table %q: %w", table, err)
	default:
		var keys []string
		for _, k := range in.KeySchema {
			keys = append(keys, strings.ToLower(string(k.KeyType))+" key "+aws.ToString(k.AttributeName))
		}
		fmt.Fprintf(out, "table %s created (on-demand capacity, %s)\n", table, strings.Join(keys, ", "))
	}

	desc, err := client.DescribeTable(ctx, &ddb.DescribeTableInput{TableName: &table})
	if err != nil {
		return false, fmt.Errorf("describe DynamoDB table %q: %w", table, err)
	}
	if err := check(table, desc.Table); err != nil {
		return false, err
	}
	if desc.Table.TableStatus == types.TableStatusActive {
		return true, nil
	}
	if !wait {
		return false, nil
	}
	fmt.Fprintf(out, "waiting for table %s to become ACTIVE…\n", table)
	w := ddb.NewTableExistsWaiter(client, func(o *ddb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = time.Second, 5*time.Second
	})
	if err := w.Wait(ctx, &ddb.DescribeTableInput{TableName: &table}, maxWait); err != nil {
		return false, fmt.Errorf("wait for DynamoDB table %q: %w", table, err)
	}
	return true, nil
}

func enableTTL(ctx context.Context, client *ddb.Client, table string, out io.Writer) error {
	ttl, err := client.DescribeTimeToLive(ctx, &ddb.DescribeTimeToLiveInput{TableName: &table})
	if err != nil {
		return fmt.Errorf("describe TTL of DynamoDB table %q: %w", table, err)
	}
	d := ttl.TimeToLiveDescription
	attr, status := "", types.TimeToLiveStatusDisabled
	if d != nil {
		attr, status = aws.ToString(d.AttributeName), d.TimeToLiveStatus
	}
	switch {
	case (status == types.TimeToLiveStatusEnabled || status == types.TimeToLiveStatusEnabling) && attr == AttrExpiresAt:
		fmt.Fprintf(out, "TTL on %s is %s\n", AttrExpiresAt, status)
		return nil
	case status == types.TimeToLiveStatusEnabled || status == types.TimeToLiveStatusEnabling:
		// Not fatal: linkgate enforces expiry on every read anyway; only
		// the automatic deletion of expired items is missing.
		fmt.Fprintf(out, "warning: TTL of table %s is on attribute %q, not %q: expired links are refused but not deleted by DynamoDB\n",
			table, attr, AttrExpiresAt)
		return nil
	case status == types.TimeToLiveStatusDisabling:
		return fmt.Errorf("TTL of DynamoDB table %q is being disabled (this can take up to an hour); run this again later to enable it on %s", table, AttrExpiresAt)
	}
	_, err = client.UpdateTimeToLive(ctx, &ddb.UpdateTimeToLiveInput{
		TableName:               &table,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(AttrExpiresAt), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("enable TTL on %s of DynamoDB table %q: %w", AttrExpiresAt, table, err)
	}
	fmt.Fprintf(out, "TTL enabled on %s\n", AttrExpiresAt)
	return nil
}
