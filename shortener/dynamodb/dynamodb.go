// Package dynamodb is the shortener.Store over an Amazon DynamoDB table,
// data-compatible with the seed's app both ways: partition key shortURL (S),
// the target in originalURL (S). linkgate adds createdAt, expiresAt (the
// table's TTL attribute), maxVisits and visits, all numbers, and reads items
// that lack them. A link of the default domain is the item shortURL = id,
// as the seed's app writes and reads it; a link of another domain is the
// item shortURL = domain "/" id (shortener.LinkKey), which the seed's app
// never asks for.
//
// Every call has a deadline (Options.Timeout) and goes through the SDK's
// retryer (the DynamoDB client's default: 4 attempts, jittered exponential
// backoff from 25 ms, longer for throttling). A call that still fails — a
// timeout, throttling, an unreachable endpoint — answers an error matching
// shortener.ErrUnavailable, so the service says 503 and recovers by itself
// once DynamoDB answers again.
//
// Configuration is the AWS SDK's own chain: AWS_REGION, AWS_PROFILE and the
// shared config files, credentials from the environment, profile, SSO or
// instance role, AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_DYNAMODB for DynamoDB
// Local, AWS_MAX_ATTEMPTS and AWS_RETRY_MODE for the retryer.
package dynamodb

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/linkgate/linkgate/shortener"
)

var _ shortener.Store = (*Store)(nil)

// DefaultTable is the seed's table name.
const DefaultTable = "goUrlShortener"

// DefaultTimeout bounds each store call, retries included.
const DefaultTimeout = time.Second

// Options configure a Store. Zero fields take defaults.
type Options struct {
	Table           string        // table name; default DefaultTable
	ConsistentReads bool          // strongly consistent GetItem and Scan (twice the read cost)
	Timeout         time.Duration // deadline of each call, retries included; default DefaultTimeout
	// VisitInterval is how long visits of links without a visit limit
	// are gathered before they are written, as one log record; default
	// DefaultVisitInterval. Visits of links with a limit are written as
	// AddVisits receives them.
	VisitInterval time.Duration
	// Logger receives the failures of background work (visit records,
	// folds, migrations), which is retried; nil discards them.
	Logger *slog.Logger
	// ManualVisits starts no background work: the caller writes the
	// visit log (FlushVisits) and folds it (FoldVisits). For tests and
	// tools.
	ManualVisits bool
	// Clock is the visit log's clock; default time.Now. For tests.
	Clock func() time.Time
}

// Store is a shortener.Store over one DynamoDB table.
type Store struct {
	client     *ddb.Client
	table      string
	consistent bool
	timeout    time.Duration
	visits     *visitLog
}

// Open loads the AWS configuration from the standard chain (environment,
// shared config and credentials files, SSO, instance and task roles) and
// returns a Store over the table. It makes no call: use CheckTable to
// verify the table at startup.
func Open(ctx context.Context, opts Options) (*Store, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("no AWS region configured: set AWS_REGION (or a region in the AWS profile)")
	}
	return New(NewClient(cfg), opts), nil
}

// NewClient returns a DynamoDB client for cfg with linkgate's transport
// settings: a connection pool sized for a busy server (the SDK keeps only
// 10 idle connections per host by default, which churns connections under
// load), and, for endpoints other than AWS's (DynamoDB Local), no response
// CRC32 check: DynamoDB Local omits x-amz-crc32 on errors, which the SDK
// would otherwise report on every conditional-check failure
// (aws/aws-sdk-go-v2#3545).
func NewClient(cfg aws.Config, optFns ...func(*ddb.Options)) *ddb.Client {
	fns := append([]func(*ddb.Options){func(o *ddb.Options) {
		o.HTTPClient = httpClient()
		if o.BaseEndpoint != nil && !awsEndpoint(*o.BaseEndpoint) {
			o.DisableValidateResponseChecksum = true
		}
	}}, optFns...)
	return ddb.NewFromConfig(cfg, fns...)
}

// httpClient is the SDK's buildable client (which the DynamoDB client
// still tunes: connect and TLS timeouts) with a larger idle pool.
func httpClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().
		WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConns = 1024
			t.MaxIdleConnsPerHost = 1024
			t.IdleConnTimeout = 90 * time.Second
		}).
		WithDialerOptions(func(d *net.Dialer) {
			d.KeepAlive = 30 * time.Second
		})
}

// awsEndpoint reports whether endpoint is one of AWS's own hosts.
func awsEndpoint(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	h := u.Hostname()
	return strings.HasSuffix(h, ".amazonaws.com") || strings.HasSuffix(h, ".amazonaws.com.cn") || strings.HasSuffix(h, ".api.aws")
}

// New returns a Store over the table using client. It makes no call.
func New(client *ddb.Client, opts Options) *Store {
	s := &Store{client: client, table: opts.Table, consistent: opts.ConsistentReads, timeout: opts.Timeout}
	if s.table == "" {
		s.table = DefaultTable
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	s.visits = newVisitLog(s, opts)
	return s
}

// Table returns the table's name.
func (s *Store) Table() string { return s.table }

// Client returns the DynamoDB client the store uses.
func (s *Store) Client() *ddb.Client { return s.client }

// Create puts l's item unless an item with its id exists
// (attribute_not_exists(shortURL)); an existing one gives ErrConflict.
// DynamoDB acknowledges a write once it is durable in several zones.
func (s *Store) Create(ctx context.Context, l shortener.Link) error {
	if err := checkItem(l); err != nil {
		return err
	}
	return s.putNew(ctx, "create link", l.ID, encode(l))
}

// putNew writes item unless one exists under its key (ErrConflict); op
// and id name it in the error.
func (s *Store) putNew(ctx context.Context, op, id string, item map[string]types.AttributeValue) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.client.PutItem(ctx, &ddb.PutItemInput{
		TableName:           &s.table,
		Item:                item,
		ConditionExpression: aws.String("attribute_not_exists(" + AttrID + ")"),
	})
	return s.conditional(op, id, err, shortener.ErrConflict)
}

// conditional maps the outcome of a conditional write: a failed
// condition is the domain error failed, anything else goes through fail.
func (s *Store) conditional(op, id string, err, failed error) error {
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ccf):
		return fmt.Errorf("%s %q: %w", op, id, failed)
	}
	return s.fail(op+" "+quote(id), err)
}

// Get reads the item under id (eventually consistent unless
// Options.ConsistentReads). Expired items that DynamoDB's TTL has not yet
// deleted are returned as stored; the Service enforces expiry.
// AppendURL is Get with the link's URL appended to dst and left out of
// the link: a network read allocates anyway, and the read cache in front
// of this store (serve's --cache-size) is what keeps redirects
// allocation-free.
func (s *Store) AppendURL(ctx context.Context, dst, id []byte) ([]byte, shortener.Link, error) {
	l, err := s.Get(ctx, string(id))
	if err != nil {
		return dst, shortener.Link{}, err
	}
	dst = append(dst, l.URL...)
	l.ID, l.URL = "", ""
	return dst, l, nil
}

func (s *Store) Get(ctx context.Context, id string) (shortener.Link, error) {
	if !validKey(id) {
		return shortener.Link{}, shortener.ErrNotFound
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.client.GetItem(ctx, &ddb.GetItemInput{
		TableName:      &s.table,
		Key:            key(id),
		ConsistentRead: &s.consistent,
	})
	if err != nil {
		return shortener.Link{}, s.fail("get link "+quote(id), err)
	}
	if out.Item == nil {
		return shortener.Link{}, shortener.ErrNotFound
	}
	l, err := decode(out.Item)
	if err != nil {
		return shortener.Link{}, fmt.Errorf("get link %q: malformed item: %w", id, err)
	}
	s.visits.noticeLegacy(id, out.Item)
	return l, nil
}

// Update edits the item under id with one conditional UpdateItem:
// attribute_exists(shortURL) makes a missing link ErrNotFound (an edit
// never creates an item, so it cannot bring back a link deleted
// meanwhile). It SETs the attributes u changes and REMOVEs those it makes
// zero, touching no other attribute: concurrent edits of other fields and
// the visit counters are kept. The answer is the item after the edit
// (ReturnValues ALL_NEW), so no read follows.
func (s *Store) Update(ctx context.Context, id string, u shortener.LinkUpdate) (shortener.Link, error) {
	if !validKey(id) {
		return shortener.Link{}, shortener.ErrNotFound
	}
	// What the edit sets must fit an item on its own.
	var part shortener.Link
	u.Apply(&part)
	part.ID = id
	if err := checkItem(part); err != nil {
		return shortener.Link{}, err
	}
	names := map[string]string{"#id": AttrID}
	values := map[string]types.AttributeValue{}
	var set, remove []string
	field := func(name string, v types.AttributeValue) {
		ref := fmt.Sprintf("#a%d", len(names))
		names[ref] = name
		if v == nil {
			remove = append(remove, ref)
			return
		}
		values[":"+ref[1:]] = v
		set = append(set, ref+" = :"+ref[1:])
	}
	if u.URL != nil {
		field(AttrURL, &types.AttributeValueMemberS{Value: *u.URL})
	}
	if u.ExpiresAt != nil {
		var v types.AttributeValue
		if !u.ExpiresAt.IsZero() {
			v = number(u.ExpiresAt.Unix())
		}
		field(AttrExpiresAt, v)
	}
	if u.MaxVisits != nil {
		var v types.AttributeValue
		if *u.MaxVisits != 0 {
			v = number(*u.MaxVisits)
		}
		field(AttrMaxVisits, v)
	}
	if u.Tags != nil {
		var v types.AttributeValue
		if len(*u.Tags) > 0 {
			v = &types.AttributeValueMemberSS{Value: *u.Tags}
		}
		field(AttrTags, v)
	}
	if u.ForwardQuery != nil {
		var v types.AttributeValue
		if *u.ForwardQuery != shortener.ForwardDefault {
			v = number(int64(*u.ForwardQuery))
		}
		field(AttrForward, v)
	}
	expr := ""
	if len(set) > 0 {
		expr = "SET " + strings.Join(set, ", ")
	}
	if len(remove) > 0 {
		expr += " REMOVE " + strings.Join(remove, ", ")
	}
	in := &ddb.UpdateItemInput{
		TableName:                &s.table,
		Key:                      key(id),
		ConditionExpression:      aws.String("attribute_exists(#id)"),
		ExpressionAttributeNames: names,
		ReturnValues:             types.ReturnValueAllNew,
	}
	if expr == "" { // nothing to change (the Service sends no such edit)
		return s.Get(ctx, id)
	}
	in.UpdateExpression = aws.String(strings.TrimSpace(expr))
	if len(values) > 0 {
		in.ExpressionAttributeValues = values
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.client.UpdateItem(ctx, in)
	if err := s.conditional("update link", id, err, shortener.ErrNotFound); err != nil {
		return shortener.Link{}, err
	}
	l, err := decode(out.Attributes)
	if err != nil {
		return shortener.Link{}, fmt.Errorf("update link %q: malformed item: %w", id, err)
	}
	return l, nil
}

// Delete removes the item under id; attribute_exists(shortURL) makes a
// missing one ErrNotFound.
func (s *Store) Delete(ctx context.Context, id string) error {
	if !validKey(id) {
		return shortener.ErrNotFound
	}
	return s.deleteItem(ctx, "delete link", id, key(id))
}

// deleteItem deletes the item under k if there is one (ErrNotFound if
// not); op and id name it in the error.
func (s *Store) deleteItem(ctx context.Context, op, id string, k map[string]types.AttributeValue) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.client.DeleteItem(ctx, &ddb.DeleteItemInput{
		TableName:           &s.table,
		Key:                 k,
		ConditionExpression: aws.String("attribute_exists(" + AttrID + ")"),
	})
	return s.conditional(op, id, err, shortener.ErrNotFound)
}

// List scans the table, one Scan call per page, in DynamoDB's order (by
// key hash). The cursor is the last key of the previous page, encoded; a
// page may be shorter than limit when DynamoDB stops at 1 MB, and the last
// page may be empty.
func (s *Store) List(ctx context.Context, cursor string, limit int) (shortener.Page, error) {
	in := &ddb.ScanInput{TableName: &s.table, Limit: aws.Int32(int32(limit)), ConsistentRead: &s.consistent}
	if cursor != "" {
		id, err := decodeCursor(cursor)
		if err != nil {
			return shortener.Page{}, err
		}
		in.ExclusiveStartKey = key(id)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.client.Scan(ctx, in)
	if err != nil {
		return shortener.Page{}, s.fail("list links", err)
	}
	p := shortener.Page{Links: make([]shortener.Link, 0, len(out.Items))}
	for _, item := range out.Items {
		if k, _ := str(item, AttrID); strings.HasPrefix(k, reservedPrefix) {
			continue // visit statistics and counters, not a link
		}
		l, err := decode(item)
		if err != nil {
			return shortener.Page{}, fmt.Errorf("list links: malformed item: %w", err)
		}
		p.Links = append(p.Links, l)
	}
	if k, ok := out.LastEvaluatedKey[AttrID].(*types.AttributeValueMemberS); ok {
		p.Next = base64.RawURLEncoding.EncodeToString([]byte(k.Value))
	}
	return p, nil
}

func decodeCursor(cursor string) (string, error) {
	// Only the exact encoding List produced is accepted (the decoder alone
	// would also take line breaks and non-zero padding bits).
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || !validKey(string(b)) || base64.RawURLEncoding.EncodeToString(b) != cursor {
		return "", shortener.Errorf(shortener.InvalidParameter, "invalid cursor")
	}
	return string(b), nil
}

// pingKey is never a link id (':' is not an id character), so Ping reads
// nothing: the cheapest data-plane call that proves the table answers
// (half a read unit), and one that needs only the GetItem permission.
const pingKey = reservedPrefix + "ping"

// Ping reads a key that never exists.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.client.GetItem(ctx, &ddb.GetItemInput{
		TableName:            &s.table,
		Key:                  key(pingKey),
		ProjectionExpression: aws.String(AttrID),
	})
	if err != nil {
		return s.fail("ping", err)
	}
	return nil
}

// Close writes the visits it holds (see FlushVisits; call that first to
// choose the deadline) and releases idle connections.
func (s *Store) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*s.timeout)
	defer cancel()
	err := s.visits.close(ctx)
	if c, ok := s.client.Options().HTTPClient.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	return err
}

// fail turns a failed call into a domain error. A ValidationException means
// DynamoDB refused the request itself (the checks before each call should
// make it unreachable): the client's input was at fault, not the store.
// Everything else — timeouts, throttling, network errors, a missing table,
// denied credentials — is Unavailable, with the cause kept for the logs.
func (s *Store) fail(op string, err error) error {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "ValidationException":
			return &shortener.Error{Code: shortener.InvalidParameter, Message: "DynamoDB rejected the request",
				Err: fmt.Errorf("dynamodb %s: %w", op, err)}
		case "ResourceNotFoundException":
			return fmt.Errorf("dynamodb %s: table %q not found (create it: linkgate dynamodb create-table --table %s): %w: %w",
				op, s.table, s.table, shortener.ErrUnavailable, err)
		}
	}
	return fmt.Errorf("dynamodb %s: %w: %w", op, shortener.ErrUnavailable, err)
}

func quote(id string) string {
	if len(id) > 80 {
		id = id[:80] + "…"
	}
	return fmt.Sprintf("%q", id)
}
