package dynamodb

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The certificate table holds what automatic HTTPS shares between
// instances (certmagic's storage, CertStorage): one item per stored file,
// partition key d (S) the key's first path component, sort key k (S) the
// whole key, so that listing a directory is one Query; the value in v (B),
// its modification time in m (N, Unix nanoseconds). Locks are items of
// the partition "/locks" (no key's first component can be that), sort key
// the lock's name, with the holder's token in o (S) and the lease's end
// in x (N, Unix nanoseconds). The links' table, and so the seed's items,
// are untouched.
const (
	attrCertDir   = "d"
	attrCertKey   = "k"
	attrCertValue = "v"
	attrCertMod   = "m"
	attrLockOwner = "o"
	attrLockUntil = "x"
	lockPartition = "/locks"
)

// CertTable is the name of the certificate table that goes with the
// links' table table.
func CertTable(table string) string { return table + "-certs" }

// CreateCertTable creates the certificate table (on-demand capacity,
// partition key d, sort key k) unless it exists with that key; with wait,
// it waits for the table to become ACTIVE. Progress goes to out.
func CreateCertTable(ctx context.Context, client *ddb.Client, table string, wait bool, maxWait time.Duration, out io.Writer) error {
	s := types.ScalarAttributeTypeS
	_, err := createTable(ctx, client, &ddb.CreateTableInput{
		TableName:   &table,
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrCertDir), AttributeType: s},
			{AttributeName: aws.String(attrCertKey), AttributeType: s},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrCertDir), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrCertKey), KeyType: types.KeyTypeRange},
		},
	}, checkCertSchema, wait, maxWait, out)
	return err
}

// checkCertSchema accepts a table keyed by d (S) and k (S).
func checkCertSchema(table string, d *types.TableDescription) error {
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, a := range d.AttributeDefinitions {
		attrTypes[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	ks := d.KeySchema
	if len(ks) == 2 && ks[0].KeyType == types.KeyTypeHash && aws.ToString(ks[0].AttributeName) == attrCertDir &&
		ks[1].KeyType == types.KeyTypeRange && aws.ToString(ks[1].AttributeName) == attrCertKey &&
		attrTypes[attrCertDir] == types.ScalarAttributeTypeS && attrTypes[attrCertKey] == types.ScalarAttributeTypeS {
		return nil
	}
	return fmt.Errorf("DynamoDB table %q is not a certificate table: want partition key %s (S) and sort key %s (S)", table, attrCertDir, attrCertKey)
}
