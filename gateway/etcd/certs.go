package etcd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/linkgate/linkgate/internal/certkey"
)

var (
	_ certmagic.Storage   = (*CertStorage)(nil)
	_ certmagic.TryLocker = (*CertStorage)(nil)
)

// DefaultLockTTL is how long a certificate lock outlives a gateway that
// died holding it.
const DefaultLockTTL = 20 * time.Second

// CertOptions configure a CertStorage. Zero fields take defaults.
type CertOptions struct {
	// LockTTL is the TTL of the etcd lease the gateway's locks are
	// attached to (kept alive while the gateway runs): a gateway that
	// died holding a lock loses it that long after. Default
	// DefaultLockTTL; etcd raises it to its minimum (about 2 s).
	LockTTL time.Duration
	Clock   func() time.Time // modification times; default time.Now
}

// CertStorage is certmagic's Storage in etcd, beside the gateway's
// configuration: every gateway of a cluster serves the certificates one of
// them ordered. Values are at <prefix>_acme/data/<key> (outside the
// prefix the gateways watch), each an 8-byte big-endian modification time
// in Unix nanoseconds followed by the stored bytes. Locks are etcd's
// concurrency mutexes under <prefix>_acme/locks/<name>, attached to one
// lease per CertStorage: the first waiter gets the lock when its holder
// unlocks or its lease runs out.
type CertStorage struct {
	cli     *clientv3.Client
	base    string
	timeout time.Duration
	opts    CertOptions

	mu      sync.Mutex
	session *concurrency.Session
	held    map[string]*concurrency.Mutex
	local   map[string]chan struct{} // one holder per name within the process
}

// CertStorage returns the certificate storage that shares the store's
// etcd client and prefix.
func (s *Store) CertStorage(opts CertOptions) *CertStorage {
	if opts.LockTTL <= 0 {
		opts.LockTTL = DefaultLockTTL
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	return &CertStorage{cli: s.cli, base: s.cfg.Prefix + "_acme", timeout: s.cfg.Timeout, opts: opts,
		held: map[string]*concurrency.Mutex{}, local: map[string]chan struct{}{}}
}

// String names the storage in certmagic's logs.
func (c *CertStorage) String() string { return "etcd:" + c.base }

func (c *CertStorage) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

func (c *CertStorage) dataKey(key string) string { return c.base + "/data/" + key }

// Store puts value at key.
func (c *CertStorage) Store(ctx context.Context, key string, value []byte) error {
	if err := certkey.Check(key); err != nil {
		return err
	}
	v := make([]byte, 8+len(value))
	binary.BigEndian.PutUint64(v, uint64(c.opts.Clock().UnixNano()))
	copy(v[8:], value)
	ctx, cancel := c.op(ctx)
	defer cancel()
	if _, err := c.cli.Put(ctx, c.dataKey(key), string(v)); err != nil {
		return fmt.Errorf("etcd store %q: %w", key, err)
	}
	return nil
}

// get returns key's stored bytes and time; ok false if there are none.
func (c *CertStorage) get(ctx context.Context, key string) (value []byte, mod time.Time, ok bool, err error) {
	if err := certkey.Check(key); err != nil {
		return nil, time.Time{}, false, err
	}
	ctx, cancel := c.op(ctx)
	defer cancel()
	resp, err := c.cli.Get(ctx, c.dataKey(key))
	if err != nil {
		return nil, time.Time{}, false, fmt.Errorf("etcd load %q: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, time.Time{}, false, nil
	}
	v := resp.Kvs[0].Value
	if len(v) < 8 {
		return nil, time.Time{}, false, fmt.Errorf("etcd load %q: malformed value", key)
	}
	return v[8:], time.Unix(0, int64(binary.BigEndian.Uint64(v))), true, nil
}

// Load returns the value at key; an error matching fs.ErrNotExist if
// there is none.
func (c *CertStorage) Load(ctx context.Context, key string) ([]byte, error) {
	v, _, ok, err := c.get(ctx, key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("etcd load %q: %w", key, fs.ErrNotExist)
	}
	return v, nil
}

// below returns the keys stored under the directory dir ("" for all),
// at most limit of them unless limit is 0.
func (c *CertStorage) below(ctx context.Context, dir string, limit int64) ([]string, error) {
	p := c.dataKey(dir + "/")
	if dir == "" {
		p = c.dataKey("")
	}
	ctx, cancel := c.op(ctx)
	defer cancel()
	resp, err := c.cli.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("etcd list %q: %w", dir, err)
	}
	keys := make([]string, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		keys[i] = strings.TrimPrefix(string(kv.Key), c.dataKey(""))
	}
	return keys, nil
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
	v, mod, ok, err := c.get(ctx, key)
	if err != nil {
		return certmagic.KeyInfo{}, err
	}
	if ok {
		return certmagic.KeyInfo{Key: key, Modified: mod, Size: int64(len(v)), IsTerminal: true}, nil
	}
	keys, err := c.below(ctx, key, 1)
	if err != nil {
		return certmagic.KeyInfo{}, err
	}
	if len(keys) == 0 {
		return certmagic.KeyInfo{}, fmt.Errorf("etcd stat %q: %w", key, fs.ErrNotExist)
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
		_, _, ok, err := c.get(ctx, dir)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("etcd list %q: %w", dir, fs.ErrNotExist)
		}
	}
	return certkey.List(dir, keys, recursive), nil
}

// Delete deletes key and every key below it, in one transaction; a
// missing key is no error.
func (c *CertStorage) Delete(ctx context.Context, key string) error {
	if err := certkey.Check(key); err != nil {
		return err
	}
	ctx, cancel := c.op(ctx)
	defer cancel()
	_, err := c.cli.Txn(ctx).Then(clientv3.OpDelete(c.dataKey(key)), clientv3.OpDelete(c.dataKey(key+"/"), clientv3.WithPrefix())).Commit()
	if err != nil {
		return fmt.Errorf("etcd delete %q: %w", key, err)
	}
	return nil
}

// Lock takes the lock name, waiting (on an etcd watch, not by polling)
// until it is free or ctx ends.
func (c *CertStorage) Lock(ctx context.Context, name string) error {
	_, err := c.lock(ctx, name, true)
	return err
}

// TryLock takes the lock name if it is free.
func (c *CertStorage) TryLock(ctx context.Context, name string) (bool, error) {
	return c.lock(ctx, name, false)
}

func (c *CertStorage) guard(name string) chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.local[name]
	if g == nil {
		g = make(chan struct{}, 1)
		c.local[name] = g
	}
	return g
}

func (c *CertStorage) lock(ctx context.Context, name string, wait bool) (bool, error) {
	// etcd's mutex is per session, and this storage has one session:
	// goroutines of the process take turns here first.
	g := c.guard(name)
	if wait {
		select {
		case g <- struct{}{}:
		case <-ctx.Done():
			return false, fmt.Errorf("etcd lock %q: %w", name, ctx.Err())
		}
	} else {
		select {
		case g <- struct{}{}:
		default:
			return false, nil
		}
	}
	sess, err := c.sessionFor(ctx)
	if err != nil {
		<-g
		return false, fmt.Errorf("etcd lock %q: %w", name, err)
	}
	m := concurrency.NewMutex(sess, c.base+"/locks/"+name)
	if wait {
		err = m.Lock(ctx)
	} else {
		octx, cancel := c.op(ctx)
		err = m.TryLock(octx)
		cancel()
		if errors.Is(err, concurrency.ErrLocked) {
			<-g
			return false, nil
		}
	}
	if err != nil {
		<-g
		return false, fmt.Errorf("etcd lock %q: %w", name, err)
	}
	c.mu.Lock()
	c.held[name] = m
	c.mu.Unlock()
	return true, nil
}

// sessionFor returns the storage's session, granting a new lease when
// there is none or the last one was lost.
func (c *CertStorage) sessionFor(ctx context.Context) (*concurrency.Session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != nil {
		select {
		case <-c.session.Done():
		default:
			return c.session, nil
		}
	}
	ttl := int64((c.opts.LockTTL + time.Second - 1) / time.Second)
	gctx, cancel := c.op(ctx)
	lease, err := c.cli.Grant(gctx, ttl)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("grant lease: %w", err)
	}
	// The session lives as long as the client, not as this call.
	sess, err := concurrency.NewSession(c.cli, concurrency.WithLease(lease.ID), concurrency.WithContext(context.Background()))
	if err != nil {
		return nil, fmt.Errorf("keep lease alive: %w", err)
	}
	c.session = sess
	return sess, nil
}

var errNotHeld = errors.New("lock not held by this gateway")

// Unlock releases a lock this storage holds; unlocking one it does not
// hold is an error and leaves the lock be.
func (c *CertStorage) Unlock(ctx context.Context, name string) error {
	c.mu.Lock()
	m := c.held[name]
	delete(c.held, name)
	g := c.local[name]
	c.mu.Unlock()
	if m == nil {
		return fmt.Errorf("etcd unlock %q: %w", name, errNotHeld)
	}
	defer func() { <-g }()
	ctx, cancel := c.op(ctx)
	defer cancel()
	if err := m.Unlock(ctx); err != nil {
		return fmt.Errorf("etcd unlock %q: %w", name, err)
	}
	return nil
}

// Close revokes the storage's lease, which releases the locks it holds.
func (c *CertStorage) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == nil {
		return nil
	}
	err := c.session.Close()
	c.session = nil
	return err
}
