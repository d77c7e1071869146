package pebble

import (
	"context"
	"encoding/binary"
	"fmt"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/linkgate/linkgate/shortener"
)

var _ shortener.DomainStore = (*Store)(nil)

// The domain registry's entries are records 'd' host (the package
// comment's layout), their value
//
//	u8 version (1) · u8 0: https, 1: http · i64 created (Unix seconds)
//
// Adds and deletes are serialised by registryMu, so that the bound
// (shortener.MaxRegisteredDomains) holds.
const (
	kindDomain            = 'd'
	domainRecordVersion   = 1
	domainRecordLen       = 1 + 1 + 8
	domainSchemeHTTPS     = 0
	domainSchemeHTTP      = 1
	domainRecordSchemeOff = 1
)

func domainKey(host string) []byte { return append([]byte{kindDomain}, host...) }

// AddDomain stores d unless its host is registered; it returns once
// synced.
func (s *Store) AddDomain(ctx context.Context, d shortener.Domain) error {
	if !shortener.ValidRegisteredDomain(d) {
		return shortener.Errorf(shortener.InvalidParameter, "invalid domain %q", d.Host)
	}
	s.registryMu.Lock()
	defer s.registryMu.Unlock()
	ds, err := s.Domains(ctx)
	if err != nil {
		return err
	}
	for _, o := range ds {
		if o.Host == d.Host {
			return fmt.Errorf("add domain %q: %w", d.Host, shortener.ErrConflict)
		}
	}
	if len(ds) >= shortener.MaxRegisteredDomains {
		return shortener.Errorf(shortener.InvalidParameter, "the registry holds %d domains, its most", len(ds))
	}
	v := make([]byte, 0, domainRecordLen)
	v = append(v, domainRecordVersion, domainSchemeHTTPS)
	if d.Scheme == "http" {
		v[domainRecordSchemeOff] = domainSchemeHTTP
	}
	v = binary.BigEndian.AppendUint64(v, uint64(unixSeconds(d.CreatedAt)))
	if s.closed.Load() {
		return unavailable("add domain", errClosed)
	}
	if err := s.db.Set(domainKey(d.Host), v, pebbledb.Sync); err != nil {
		return unavailable(fmt.Sprintf("add domain %q", d.Host), err)
	}
	return nil
}

// Domains returns the registry, by host.
func (s *Store) Domains(ctx context.Context) ([]shortener.Domain, error) {
	if s.closed.Load() {
		return nil, unavailable("list domains", errClosed)
	}
	it, err := s.db.NewIter(&pebbledb.IterOptions{LowerBound: []byte{kindDomain}, UpperBound: []byte{kindDomain + 1}})
	if err != nil {
		return nil, unavailable("list domains", err)
	}
	defer it.Close()
	ds := []shortener.Domain{}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, unavailable("list domains", err)
		}
		host := string(it.Key()[1:])
		if len(v) != domainRecordLen || v[0] != domainRecordVersion || v[domainRecordSchemeOff] > domainSchemeHTTP {
			return nil, fmt.Errorf("domain %q: malformed record", host)
		}
		d := shortener.Domain{Host: host, Scheme: "https", CreatedAt: fromUnix(int64(binary.BigEndian.Uint64(v[2:])))}
		if v[domainRecordSchemeOff] == domainSchemeHTTP {
			d.Scheme = "http"
		}
		ds = append(ds, d)
	}
	if err := it.Error(); err != nil {
		return nil, unavailable("list domains", err)
	}
	return ds, nil
}

// DeleteDomain removes the domain host; it returns once synced.
func (s *Store) DeleteDomain(ctx context.Context, host string) error {
	if !shortener.ValidDomain(host) {
		return fmt.Errorf("delete domain %q: %w", host, shortener.ErrNotFound)
	}
	s.registryMu.Lock()
	defer s.registryMu.Unlock()
	_, closer, found, err := s.get(domainKey(host))
	switch {
	case err != nil:
		return unavailable(fmt.Sprintf("delete domain %q", host), err)
	case !found:
		return fmt.Errorf("delete domain %q: %w", host, shortener.ErrNotFound)
	}
	closer.Close()
	if err := s.db.Delete(domainKey(host), pebbledb.Sync); err != nil {
		return unavailable(fmt.Sprintf("delete domain %q", host), err)
	}
	return nil
}
