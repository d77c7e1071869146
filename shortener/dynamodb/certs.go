//go:build !functiononly

package dynamodb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/caddyserver/certmagic"

	"github.com/linkgate/linkgate/internal/certkey"
)

// The certificate storage is left out of the Lambda function's build
// (-tags functiononly), which serves no TLS.

var (
	_ certmagic.Storage          = (*CertStorage)(nil)
	_ certmagic.TryLocker        = (*CertStorage)(nil)
	_ certmagic.LockLeaseRenewer = (*CertStorage)(nil)
)

// Defaults of CertOptions.
const (
	DefaultLockLease = 20 * time.Second
	DefaultLockPoll  = time.Second
)

// CertOptions configure a CertStorage. Zero fields take defaults.
type CertOptions struct {
	Table   string        // the certificate table; default CertTable(DefaultTable)
	Timeout time.Duration // deadline of each call; default DefaultTimeout
	// LockLease is how long a lock outlives its holder's last renewal:
	// a holder renews it every third of it while it holds it, and a
	// holder that died loses it that long after. Default DefaultLockLease.
	LockLease time.Duration
	// LockPoll is how often Lock tries again while the lock is held
	// elsewhere; default DefaultLockPoll.
	LockPoll time.Duration
	Clock    func() time.Time // the lease clock and modification times; default time.Now
	Logger   *slog.Logger     // failed lease renewals; nil discards them
}

// CertStorage is certmagic's Storage over the certificate table (see
// CertTable): the certificates, ACME accounts and locks of instances that
// share one table, so that they order one certificate per name.
//
// Reads are strongly consistent. A lock is an item written only if it is
// absent or its lease has run out (a conditional PutItem): of instances
// racing for it, one wins; the others poll every LockPoll. The holder
// renews the lease (a conditional UpdateItem on its token) until Unlock
// deletes the item, again only if the token is its own.
type CertStorage struct {
	client *ddb.Client
	table  string
	opts   CertOptions

	mu   sync.Mutex
	held map[string]*heldLock
}

type heldLock struct {
	token string
	stop  chan struct{}
}

// NewCertStorage returns a CertStorage over the table opts.Table. It makes
// no call.
func NewCertStorage(client *ddb.Client, opts CertOptions) *CertStorage {
	if opts.Table == "" {
		opts.Table = CertTable(DefaultTable)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.LockLease <= 0 {
		opts.LockLease = DefaultLockLease
	}
	if opts.LockPoll <= 0 {
		opts.LockPoll = DefaultLockPoll
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &CertStorage{client: client, table: opts.Table, opts: opts, held: map[string]*heldLock{}}
}

// String names the storage in certmagic's logs.
func (c *CertStorage) String() string { return "DynamoDB:" + c.table }

func (c *CertStorage) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.opts.Timeout)
}

func certItemKey(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrCertDir: &types.AttributeValueMemberS{Value: certkey.First(key)},
		attrCertKey: &types.AttributeValueMemberS{Value: key},
	}
}

func lockItemKey(name string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrCertDir: &types.AttributeValueMemberS{Value: lockPartition},
		attrCertKey: &types.AttributeValueMemberS{Value: name},
	}
}

func nanos(t time.Time) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.UnixNano(), 10)}
}

// Store puts value at key.
func (c *CertStorage) Store(ctx context.Context, key string, value []byte) error {
	if err := certkey.Check(key); err != nil {
		return err
	}
	item := certItemKey(key)
	item[attrCertValue] = &types.AttributeValueMemberB{Value: value}
	item[attrCertMod] = nanos(c.opts.Clock())
	ctx, cancel := c.op(ctx)
	defer cancel()
	if _, err := c.client.PutItem(ctx, &ddb.PutItemInput{TableName: &c.table, Item: item}); err != nil {
		return fmt.Errorf("dynamodb store %q: %w", key, err)
	}
	return nil
}

// get reads key's item, strongly consistent; nil if there is none.
func (c *CertStorage) get(ctx context.Context, key string) (map[string]types.AttributeValue, error) {
	if err := certkey.Check(key); err != nil {
		return nil, err
	}
	ctx, cancel := c.op(ctx)
	defer cancel()
	out, err := c.client.GetItem(ctx, &ddb.GetItemInput{TableName: &c.table, Key: certItemKey(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("dynamodb load %q: %w", key, err)
	}
	return out.Item, nil
}

// Load returns the value at key; an error matching fs.ErrNotExist if
// there is none.
func (c *CertStorage) Load(ctx context.Context, key string) ([]byte, error) {
	item, err := c.get(ctx, key)
	if err != nil {
		return nil, err
	}
	if item == nil {
		return nil, fmt.Errorf("dynamodb load %q: %w", key, fs.ErrNotExist)
	}
	v, ok := item[attrCertValue].(*types.AttributeValueMemberB)
	if !ok {
		return nil, fmt.Errorf("dynamodb load %q: malformed item", key)
	}
	return v.Value, nil
}

// below returns the keys stored under the directory dir, all of them
// (limit 0) or at most limit.
func (c *CertStorage) below(ctx context.Context, dir string, limit int32) ([]string, error) {
	var keys []string
	in := &ddb.QueryInput{
		TableName:                 &c.table,
		KeyConditionExpression:    aws.String("#d = :d AND begins_with(#k, :p)"),
		ExpressionAttributeNames:  map[string]string{"#d": attrCertDir, "#k": attrCertKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":d": &types.AttributeValueMemberS{Value: certkey.First(dir)}, ":p": &types.AttributeValueMemberS{Value: dir + "/"}},
		ProjectionExpression:      aws.String("#k"),
		ConsistentRead:            aws.Bool(true),
	}
	if dir == "" {
		return c.all(ctx)
	}
	if limit > 0 {
		in.Limit = aws.Int32(limit)
	}
	for {
		qctx, cancel := c.op(ctx)
		out, err := c.client.Query(qctx, in)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("dynamodb list %q: %w", dir, err)
		}
		for _, it := range out.Items {
			if k, ok := it[attrCertKey].(*types.AttributeValueMemberS); ok {
				keys = append(keys, k.Value)
			}
		}
		if len(out.LastEvaluatedKey) == 0 || (limit > 0 && len(keys) >= int(limit)) {
			return keys, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// all scans the table for every stored key (a listing of the root).
func (c *CertStorage) all(ctx context.Context) ([]string, error) {
	var keys []string
	in := &ddb.ScanInput{
		TableName:                 &c.table,
		FilterExpression:          aws.String("#d <> :l"),
		ExpressionAttributeNames:  map[string]string{"#d": attrCertDir, "#k": attrCertKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":l": &types.AttributeValueMemberS{Value: lockPartition}},
		ProjectionExpression:      aws.String("#k"),
		ConsistentRead:            aws.Bool(true),
	}
	for {
		sctx, cancel := c.op(ctx)
		out, err := c.client.Scan(sctx, in)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("dynamodb list: %w", err)
		}
		for _, it := range out.Items {
			if k, ok := it[attrCertKey].(*types.AttributeValueMemberS); ok {
				keys = append(keys, k.Value)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return keys, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// Exists reports whether key is a stored key or a directory above one.
func (c *CertStorage) Exists(ctx context.Context, key string) bool {
	_, err := c.Stat(ctx, key)
	return err == nil
}

// Stat describes key: a stored key (terminal, with its size and
// modification time) or a directory; an error matching fs.ErrNotExist if
// it is neither.
func (c *CertStorage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	item, err := c.get(ctx, key)
	if err != nil {
		return certmagic.KeyInfo{}, err
	}
	if item != nil {
		v, _ := item[attrCertValue].(*types.AttributeValueMemberB)
		m, _ := item[attrCertMod].(*types.AttributeValueMemberN)
		if v == nil || m == nil {
			return certmagic.KeyInfo{}, fmt.Errorf("dynamodb stat %q: malformed item", key)
		}
		ns, err := strconv.ParseInt(m.Value, 10, 64)
		if err != nil {
			return certmagic.KeyInfo{}, fmt.Errorf("dynamodb stat %q: malformed time: %w", key, err)
		}
		return certmagic.KeyInfo{Key: key, Modified: time.Unix(0, ns), Size: int64(len(v.Value)), IsTerminal: true}, nil
	}
	keys, err := c.below(ctx, key, 1)
	if err != nil {
		return certmagic.KeyInfo{}, err
	}
	if len(keys) == 0 {
		return certmagic.KeyInfo{}, fmt.Errorf("dynamodb stat %q: %w", key, fs.ErrNotExist)
	}
	return certmagic.KeyInfo{Key: key}, nil
}

// List names what is below the directory dir: its children, or with
// recursive every key and directory below it. A stored key has no
// children; a dir that is neither gives an error matching fs.ErrNotExist.
func (c *CertStorage) List(ctx context.Context, dir string, recursive bool) ([]string, error) {
	if dir != "" {
		if err := certkey.Check(dir); err != nil {
			return nil, err
		}
	}
	keys, err := c.below(ctx, dir, 0)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 && dir != "" {
		item, err := c.get(ctx, dir)
		if err != nil {
			return nil, err
		}
		if item == nil {
			return nil, fmt.Errorf("dynamodb list %q: %w", dir, fs.ErrNotExist)
		}
	}
	return certkey.List(dir, keys, recursive), nil
}

// Delete deletes key and every key below it; a missing key is no error.
func (c *CertStorage) Delete(ctx context.Context, key string) error {
	if err := certkey.Check(key); err != nil {
		return err
	}
	keys, err := c.below(ctx, key, 0)
	if err != nil {
		return err
	}
	for _, k := range append(keys, key) {
		dctx, cancel := c.op(ctx)
		_, err := c.client.DeleteItem(dctx, &ddb.DeleteItemInput{TableName: &c.table, Key: certItemKey(k)})
		cancel()
		if err != nil {
			return fmt.Errorf("dynamodb delete %q: %w", k, err)
		}
	}
	return nil
}

// Lock takes the lock name, polling every LockPoll while another holder
// has it, until ctx ends.
func (c *CertStorage) Lock(ctx context.Context, name string) error {
	for {
		ok, err := c.TryLock(ctx, name)
		if ok || err != nil {
			return err
		}
		t := time.NewTimer(c.opts.LockPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("dynamodb lock %q: %w", name, ctx.Err())
		case <-t.C:
		}
	}
}

// TryLock takes the lock name if nobody holds it or its holder's lease
// ran out, in one conditional write, and then renews the lease until
// Unlock.
func (c *CertStorage) TryLock(ctx context.Context, name string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	b := make([]byte, 16)
	rand.Read(b)
	token := hex.EncodeToString(b)
	now := c.opts.Clock()
	item := lockItemKey(name)
	item[attrLockOwner] = &types.AttributeValueMemberS{Value: token}
	item[attrLockUntil] = nanos(now.Add(c.opts.LockLease))
	octx, cancel := c.op(ctx)
	defer cancel()
	_, err := c.client.PutItem(octx, &ddb.PutItemInput{
		TableName:                 &c.table,
		Item:                      item,
		ConditionExpression:       aws.String("attribute_not_exists(#k) OR #x < :now"),
		ExpressionAttributeNames:  map[string]string{"#k": attrCertKey, "#x": attrLockUntil},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": nanos(now)},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("dynamodb lock %q: %w", name, err)
	}
	h := &heldLock{token: token, stop: make(chan struct{})}
	c.mu.Lock()
	c.held[name] = h
	c.mu.Unlock()
	go c.keepLease(name, h)
	return true, nil
}

// keepLease renews a held lock's lease every third of it until the lock
// is released or lost.
func (c *CertStorage) keepLease(name string, h *heldLock) {
	t := time.NewTicker(c.opts.LockLease / 3)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		if err := c.renew(context.Background(), name, h.token, c.opts.LockLease); err != nil {
			c.opts.Logger.Warn("renew certificate lock", "lock", name, "err", err)
			if errors.Is(err, errLockLost) {
				return
			}
		}
	}
}

var errLockLost = errors.New("lock not held")

func (c *CertStorage) renew(ctx context.Context, name, token string, lease time.Duration) error {
	ctx, cancel := c.op(ctx)
	defer cancel()
	_, err := c.client.UpdateItem(ctx, &ddb.UpdateItemInput{
		TableName:                 &c.table,
		Key:                       lockItemKey(name),
		UpdateExpression:          aws.String("SET #x = :x"),
		ConditionExpression:       aws.String("#o = :o"),
		ExpressionAttributeNames:  map[string]string{"#o": attrLockOwner, "#x": attrLockUntil},
		ExpressionAttributeValues: map[string]types.AttributeValue{":o": &types.AttributeValueMemberS{Value: token}, ":x": nanos(c.opts.Clock().Add(lease))},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("dynamodb renew lock %q: %w (taken over after its lease ran out)", name, errLockLost)
	}
	if err != nil {
		return fmt.Errorf("dynamodb renew lock %q: %w", name, err)
	}
	return nil
}

// RenewLockLease extends the lease of a lock this storage holds to
// lease from now.
func (c *CertStorage) RenewLockLease(ctx context.Context, name string, lease time.Duration) error {
	c.mu.Lock()
	h := c.held[name]
	c.mu.Unlock()
	if h == nil {
		return fmt.Errorf("dynamodb renew lock %q: %w by this instance", name, errLockLost)
	}
	return c.renew(ctx, name, h.token, lease)
}

// Unlock releases a lock this storage holds: it deletes the lock's item
// if the token in it is still its own. Unlocking a lock held by another
// instance (or taken over from this one) is an error, and leaves it be.
func (c *CertStorage) Unlock(ctx context.Context, name string) error {
	c.mu.Lock()
	h := c.held[name]
	delete(c.held, name)
	c.mu.Unlock()
	if h == nil {
		return fmt.Errorf("dynamodb unlock %q: %w by this instance", name, errLockLost)
	}
	close(h.stop)
	octx, cancel := c.op(ctx)
	defer cancel()
	_, err := c.client.DeleteItem(octx, &ddb.DeleteItemInput{
		TableName:                 &c.table,
		Key:                       lockItemKey(name),
		ConditionExpression:       aws.String("#o = :o"),
		ExpressionAttributeNames:  map[string]string{"#o": attrLockOwner},
		ExpressionAttributeValues: map[string]types.AttributeValue{":o": &types.AttributeValueMemberS{Value: h.token}},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("dynamodb unlock %q: %w (taken over after its lease ran out)", name, errLockLost)
	}
	if err != nil {
		return fmt.Errorf("dynamodb unlock %q: %w", name, err)
	}
	return nil
}
