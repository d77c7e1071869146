// Package etcd is a gateway.Store in etcd with APISIX's layout: JSON
// values at <prefix>/<resource>/<id>, POST ids from <prefix>/gen_id. A
// cluster of gateways (and APISIX itself) can share one etcd.
//
// Watch lists the prefix, then watches it from the listed revision + 1;
// after a compaction it lists again. While etcd is unreachable the data
// plane keeps its last good configuration; Reachable reports the state
// (apisix_etcd_reachable) and the client reconnects with backoff.
package etcd

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/linkgate/linkgate/gateway"
)

// Config says where etcd is.
type Config struct {
	Endpoints []string
	Prefix    string // "/apisix" by default
	Username  string
	Password  string
	// TLS, when set, connects over TLS (etcds:// URLs).
	TLS *tls.Config
	// Timeout bounds each request (5 s by default).
	Timeout time.Duration
}

// ParseURL reads etcd://[user[:pass]@]host:port[,host:port][?prefix=/apisix],
// or etcds://… over TLS with ca=FILE (the CA verifying etcd, else the
// system's) and cert=FILE&key=FILE (a client certificate, for etcd's
// --client-cert-auth), loading the files it names. password_file=FILE
// reads the password from a file, so that it is not in the arguments.
func ParseURL(s string) (Config, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "etcd" && u.Scheme != "etcds") || u.Host == "" {
		return Config{}, fmt.Errorf("invalid etcd URL %q: want etcd://HOST:PORT[,HOST:PORT][?prefix=/apisix] or etcds://…[&ca=FILE&cert=FILE&key=FILE]", s)
	}
	q := u.Query()
	c := Config{Prefix: "/apisix"}
	scheme := "http://"
	if u.Scheme == "etcds" {
		scheme = "https://"
		if c.TLS, err = tlsConfig(q.Get("ca"), q.Get("cert"), q.Get("key")); err != nil {
			return Config{}, err
		}
	} else if q.Get("ca") != "" || q.Get("cert") != "" || q.Get("key") != "" {
		return Config{}, fmt.Errorf("invalid etcd URL %q: ca, cert and key need etcds://", s)
	}
	for _, h := range strings.Split(u.Host, ",") {
		c.Endpoints = append(c.Endpoints, scheme+h)
	}
	if p := q.Get("prefix"); p != "" {
		if !strings.HasPrefix(p, "/") {
			return Config{}, fmt.Errorf("invalid etcd prefix %q: must start with /", p)
		}
		c.Prefix = strings.TrimSuffix(p, "/")
	}
	if u.User != nil {
		c.Username = u.User.Username()
		c.Password, _ = u.User.Password()
	}
	if f := q.Get("password_file"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return Config{}, fmt.Errorf("etcd password_file: %w", err)
		}
		c.Password = strings.TrimRight(string(b), "\r\n")
	}
	return c, nil
}

// tlsConfig builds the client TLS configuration of an etcds:// URL.
func tlsConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("etcd ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd ca %s: no PEM certificate in it", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("etcd: cert and key go together")
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("etcd client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// Store is a gateway.Store backed by etcd.
type Store struct {
	cli       *clientv3.Client
	cfg       Config
	log       *slog.Logger
	reachable atomic.Bool
	stop      context.CancelFunc
	done      chan struct{}
}

var (
	_ gateway.Store        = (*Store)(nil)
	_ gateway.Reachability = (*Store)(nil)
)

// Open connects lazily: an etcd that is down at startup is retried, not fatal.
func Open(_ context.Context, cfg Config, logger *slog.Logger) (*Store, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = "/apisix"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.Endpoints,
		DialTimeout:          cfg.Timeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		Username:             cfg.Username,
		Password:             cfg.Password,
		TLS:                  cfg.TLS,
		// Reconnect quickly after an outage: exponential backoff capped at 2 s
		// (gRPC's default cap is 120 s).
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 2 * time.Second,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{cli: cli, cfg: cfg, log: logger, stop: cancel, done: make(chan struct{})}
	go s.probe(ctx)
	return s, nil
}

// Close stops the store.
func (s *Store) Close() error {
	s.stop()
	<-s.done
	return s.cli.Close()
}

// Reachable reports whether etcd answered recently.
func (s *Store) Reachable() bool { return s.reachable.Load() }

// probe checks etcd once a second.
func (s *Store) probe(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		c, cancel := context.WithTimeout(ctx, time.Second)
		_, err := s.cli.Get(c, s.cfg.Prefix+"/gen_id", clientv3.WithCountOnly())
		cancel()
		if ctx.Err() != nil {
			return
		}
		was := s.reachable.Swap(err == nil)
		if was != (err == nil) {
			s.log.Info("etcd reachability changed", "reachable", err == nil, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Store) key(k gateway.Kind, id string) string {
	return s.cfg.Prefix + "/" + string(k) + "/" + id
}

func (s *Store) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.Timeout)
}

// wrap maps client errors to gateway errors.
func (s *Store) wrap(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, rpctypes.ErrGRPCNoLeader) || errors.Is(err, rpctypes.ErrNoLeader) {
		s.reachable.Store(false)
		return fmt.Errorf("%w: etcd: %v", gateway.ErrUnavailable, err)
	}
	return fmt.Errorf("etcd: %w", err)
}

// Get returns one entry.
func (s *Store) Get(ctx context.Context, k gateway.Kind, id string) (gateway.Entry, error) {
	id = strings.Clone(id)
	ctx, cancel := s.op(ctx)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.key(k, id))
	if err != nil {
		return gateway.Entry{}, s.wrap(err)
	}
	if len(resp.Kvs) == 0 {
		return gateway.Entry{}, gateway.ErrNotFound
	}
	kv := resp.Kvs[0]
	return gateway.Entry{Kind: k, ID: id, Value: kv.Value, CreatedIndex: kv.CreateRevision, ModifiedIndex: kv.ModRevision}, nil
}

// List returns a kind's entries sorted by key, without APISIX's init_dir placeholder.
func (s *Store) List(ctx context.Context, k gateway.Kind) ([]gateway.Entry, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.cfg.Prefix+"/"+string(k)+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, s.wrap(err)
	}
	var out []gateway.Entry
	for _, kv := range resp.Kvs {
		if e, ok := s.entry(kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision); ok && e.Kind == k {
			out = append(out, e)
		}
	}
	return out, nil
}

// entry parses an etcd key into a resource entry; placeholders, nested
// keys and resources linkgate does not serve are not entries.
func (s *Store) entry(key, value []byte, created, modified int64) (gateway.Entry, bool) {
	rest, ok := strings.CutPrefix(string(key), s.cfg.Prefix+"/")
	if !ok {
		return gateway.Entry{}, false
	}
	kindStr, id, ok := strings.Cut(rest, "/")
	if !ok || id == "" {
		return gateway.Entry{}, false
	}
	kind, ok := gateway.ParseKind(kindStr)
	if !ok || string(value) == "init_dir" {
		return gateway.Entry{}, false
	}
	if _, _, cred := gateway.ParseCredentialKey(id); strings.Contains(id, "/") && !(cred && kind == gateway.KindConsumer) {
		return gateway.Entry{}, false // a consumer's credentials are its only nested keys
	}
	return gateway.Entry{Kind: kind, ID: id, Value: value, CreatedIndex: created, ModifiedIndex: modified}, true
}

// Put stores a value, conditionally on its revision when prevRev > 0.
func (s *Store) Put(ctx context.Context, k gateway.Kind, id string, value []byte, prevRev int64) (gateway.Entry, bool, error) {
	id, value = strings.Clone(id), bytes.Clone(value)
	ctx, cancel := s.op(ctx)
	defer cancel()
	key := s.key(k, id)
	if prevRev > 0 {
		resp, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", prevRev)).
			Then(clientv3.OpPut(key, string(value), clientv3.WithPrevKV())).
			Commit()
		if err != nil {
			return gateway.Entry{}, false, s.wrap(err)
		}
		if !resp.Succeeded {
			return gateway.Entry{}, false, gateway.ErrConflict
		}
		put := resp.Responses[0].GetResponsePut()
		created := resp.Header.Revision
		if put.PrevKv != nil {
			created = put.PrevKv.CreateRevision
		}
		return gateway.Entry{Kind: k, ID: id, Value: value, CreatedIndex: created, ModifiedIndex: resp.Header.Revision}, put.PrevKv == nil, nil
	}
	resp, err := s.cli.Put(ctx, key, string(value), clientv3.WithPrevKV())
	if err != nil {
		return gateway.Entry{}, false, s.wrap(err)
	}
	created := resp.Header.Revision
	if resp.PrevKv != nil {
		created = resp.PrevKv.CreateRevision
	}
	return gateway.Entry{Kind: k, ID: id, Value: value, CreatedIndex: created, ModifiedIndex: resp.Header.Revision}, resp.PrevKv == nil, nil
}

// Delete removes an entry.
func (s *Store) Delete(ctx context.Context, k gateway.Kind, id string) error {
	ctx, cancel := s.op(ctx)
	defer cancel()
	resp, err := s.cli.Delete(ctx, s.key(k, id))
	if err != nil {
		return s.wrap(err)
	}
	if resp.Deleted == 0 {
		return gateway.ErrNotFound
	}
	return nil
}

// NextID bumps <prefix>/gen_id and returns the new revision, zero-padded
// to 20 digits, as APISIX does.
func (s *Store) NextID(ctx context.Context) (string, error) {
	ctx, cancel := s.op(ctx)
	defer cancel()
	resp, err := s.cli.Put(ctx, s.cfg.Prefix+"/gen_id", "0")
	if err != nil {
		return "", s.wrap(err)
	}
	return fmt.Sprintf("%020d", resp.Header.Revision), nil
}

// Watch lists, then watches from the listed revision + 1, re-listing after
// a compaction or a broken watch. It returns when ctx ends.
func (s *Store) Watch(ctx context.Context, fn func(gateway.Update)) error {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		rev, err := s.listAll(ctx, fn)
		if err != nil {
			s.reachable.Store(false)
			s.log.Warn("etcd list failed; serving the last good configuration", "err", err, "retry_in", backoff)
			if !sleep(ctx, backoff) {
				return nil
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		err = s.watchFrom(ctx, rev+1, fn)
		if ctx.Err() != nil {
			return nil
		}
		s.log.Warn("etcd watch ended; listing again", "err", err)
		if !sleep(ctx, 100*time.Millisecond) {
			return nil
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (s *Store) listAll(ctx context.Context, fn func(gateway.Update)) (int64, error) {
	c, cancel := s.op(ctx)
	defer cancel()
	resp, err := s.cli.Get(c, s.cfg.Prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	s.reachable.Store(true)
	u := gateway.Update{Reset: true, Revision: resp.Header.Revision}
	for _, kv := range resp.Kvs {
		if e, ok := s.entry(kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision); ok {
			u.Entries = append(u.Entries, e)
		}
	}
	fn(u)
	return resp.Header.Revision, nil
}

// errCompacted asks Watch to list again.
var errCompacted = errors.New("watch revision compacted")

func (s *Store) watchFrom(ctx context.Context, rev int64, fn func(gateway.Update)) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := s.cli.Watch(wctx, s.cfg.Prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithPrevKV())
	for resp := range wch {
		if resp.CompactRevision != 0 {
			return fmt.Errorf("%w at %d", errCompacted, resp.CompactRevision)
		}
		if err := resp.Err(); err != nil {
			return err
		}
		u := gateway.Update{Revision: resp.Header.Revision}
		for _, ev := range resp.Events {
			kv := ev.Kv
			if ev.Type == clientv3.EventTypeDelete {
				if e, ok := s.entry(kv.Key, []byte("{}"), 0, 0); ok {
					u.Deleted = append(u.Deleted, gateway.Entry{Kind: e.Kind, ID: e.ID})
				}
				continue
			}
			if e, ok := s.entry(kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision); ok {
				u.Entries = append(u.Entries, e)
			}
		}
		s.reachable.Store(true)
		if len(u.Entries) > 0 || len(u.Deleted) > 0 {
			fn(u)
		}
	}
	return errors.New("watch channel closed")
}
