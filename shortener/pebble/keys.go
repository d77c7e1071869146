package pebble

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/linkgate/linkgate/shortener"
)

var _ shortener.KeyStore = (*Store)(nil)

// API keys are records 'k' id (the package comment's layout), their value
//
//	u8 version (1) · [32] SHA-256 of the secret · i64 created · i64 last used
//	(Unix seconds, 0: never) · u8 name length · name · scopes, comma-separated
//
// Creates, deletes and touches of one key are serialised by the same
// reservations as links' (under "k:" + id, which no link id can be).
const keyRecordVersion = 1

func keyKey(id string) []byte { return append([]byte{kindKey}, id...) }

func encodeKey(k shortener.APIKey) []byte {
	b := make([]byte, 0, 1+32+16+1+len(k.Name)+64)
	b = append(b, keyRecordVersion)
	b = append(b, k.Hash[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(unixSeconds(k.CreatedAt)))
	b = binary.BigEndian.AppendUint64(b, uint64(unixSeconds(k.LastUsed)))
	b = append(b, byte(len(k.Name)))
	b = append(b, k.Name...)
	scopes := make([]string, len(k.Scopes))
	for i, s := range k.Scopes {
		scopes[i] = string(s)
	}
	return append(b, strings.Join(scopes, ",")...)
}

func unixSeconds(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

func fromUnix(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(n, 0).UTC()
}

func decodeKey(id string, v []byte) (shortener.APIKey, error) {
	const fixed = 1 + 32 + 16 + 1
	if len(v) < fixed || v[0] != keyRecordVersion || len(v) < fixed+int(v[fixed-1]) {
		return shortener.APIKey{}, fmt.Errorf("key %q: malformed record", id)
	}
	k := shortener.APIKey{ID: id}
	copy(k.Hash[:], v[1:33])
	k.CreatedAt = fromUnix(int64(binary.BigEndian.Uint64(v[33:])))
	k.LastUsed = fromUnix(int64(binary.BigEndian.Uint64(v[41:])))
	n := int(v[fixed-1])
	k.Name = string(v[fixed : fixed+n])
	for _, s := range strings.Split(string(v[fixed+n:]), ",") {
		if s != "" {
			k.Scopes = append(k.Scopes, shortener.Scope(s))
		}
	}
	return k, nil
}

// CreateKey stores k unless its id is taken; it returns once synced.
func (s *Store) CreateKey(ctx context.Context, k shortener.APIKey) error {
	if !shortener.ValidKeyID(k.ID) || len(k.Name) > 255 {
		return shortener.Errorf(shortener.InvalidParameter, "invalid key")
	}
	release, err := s.res.acquire(ctx, "k:"+k.ID)
	if err != nil {
		return fmt.Errorf("create key %q: %w", k.ID, err)
	}
	defer release()
	switch _, err := s.GetKey(ctx, k.ID); {
	case err == nil:
		return fmt.Errorf("create key %q: %w", k.ID, shortener.ErrConflict)
	case !errors.Is(err, shortener.ErrNotFound):
		return err
	}
	if s.closed.Load() {
		return unavailable("create key", errClosed)
	}
	if err := s.db.Set(keyKey(k.ID), encodeKey(k), pebbledb.Sync); err != nil {
		return unavailable(fmt.Sprintf("create key %q", k.ID), err)
	}
	return nil
}

// GetKey returns the key under id.
func (s *Store) GetKey(ctx context.Context, id string) (shortener.APIKey, error) {
	if !shortener.ValidKeyID(id) {
		return shortener.APIKey{}, shortener.ErrNotFound
	}
	v, closer, found, err := s.get(keyKey(id))
	switch {
	case err != nil:
		return shortener.APIKey{}, unavailable(fmt.Sprintf("get key %q", id), err)
	case !found:
		return shortener.APIKey{}, shortener.ErrNotFound
	}
	defer closer.Close()
	return decodeKey(id, v)
}

// ListKeys returns every key, by id.
func (s *Store) ListKeys(ctx context.Context) ([]shortener.APIKey, error) {
	if s.closed.Load() {
		return nil, unavailable("list keys", errClosed)
	}
	it, err := s.db.NewIter(&pebbledb.IterOptions{LowerBound: []byte{kindKey}, UpperBound: []byte{kindKey + 1}})
	if err != nil {
		return nil, unavailable("list keys", err)
	}
	defer it.Close()
	keys := []shortener.APIKey{}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, unavailable("list keys", err)
		}
		k, err := decodeKey(string(it.Key()[1:]), v)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	if err := it.Error(); err != nil {
		return nil, unavailable("list keys", err)
	}
	return keys, nil
}

// DeleteKey removes the key under id; it returns once synced.
func (s *Store) DeleteKey(ctx context.Context, id string) error {
	release, err := s.res.acquire(ctx, "k:"+id)
	if err != nil {
		return fmt.Errorf("delete key %q: %w", id, err)
	}
	defer release()
	if _, err := s.GetKey(ctx, id); err != nil {
		return err
	}
	if err := s.db.Delete(keyKey(id), pebbledb.Sync); err != nil {
		return unavailable(fmt.Sprintf("delete key %q", id), err)
	}
	return nil
}

// TouchKey moves the key's last use forward to t (not synced: a crash
// loses at most the last touches, which are approximate anyway).
func (s *Store) TouchKey(ctx context.Context, id string, t time.Time) error {
	release, err := s.res.acquire(ctx, "k:"+id)
	if err != nil {
		return fmt.Errorf("touch key %q: %w", id, err)
	}
	defer release()
	k, err := s.GetKey(ctx, id)
	switch {
	case errors.Is(err, shortener.ErrNotFound):
		return nil
	case err != nil:
		return err
	case !t.After(k.LastUsed):
		return nil
	}
	k.LastUsed = t.UTC().Truncate(time.Second)
	if err := s.db.Set(keyKey(id), encodeKey(k), pebbledb.NoSync); err != nil {
		return unavailable(fmt.Sprintf("touch key %q", id), err)
	}
	return nil
}
