// Package shardmap is the in-process state of the rate-limiting plugins'
// local policies (limit-count windows, limit-req buckets, limit-conn
// counts): a map of per-key values split in shards, so lock hold times
// stay short under concurrency, whose expired entries are swept as new
// keys arrive. Keys may view a scratch buffer: they are copied only when
// an entry is created, so a lookup of an existing key allocates nothing.
package shardmap

import (
	"hash/maphash"
	"sync"
	"time"
)

// Map holds a *V per key.
type Map[V any] struct {
	seed    maphash.Seed
	shards  [64]shard[V]
	expired func(v *V, now int64) bool
}

type shard[V any] struct {
	mu        sync.Mutex
	m         map[string]*V
	lastSweep int64
}

// New returns an empty map; expired tells (under the shard's lock) whether
// an entry can go, at now in unix nanoseconds.
func New[V any](expired func(v *V, now int64) bool) *Map[V] {
	m := &Map[V]{seed: maphash.MakeSeed(), expired: expired}
	for i := range m.shards {
		m.shards[i].m = map[string]*V{}
	}
	return m
}

const sweepEvery = int64(10 * time.Second)

// Update calls f with key's value under its shard's lock: found is false
// for a new zero value, which is kept only if f returns true. An existing
// value f returns false for is removed.
func (m *Map[V]) Update(key string, now int64, f func(v *V, found bool) (keep bool)) {
	sh := &m.shards[maphash.String(m.seed, key)%uint64(len(m.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	v, found := sh.m[key]
	if !found {
		v = new(V)
	}
	keep := f(v, found)
	switch {
	case found && !keep:
		delete(sh.m, key)
	case !found && keep:
		if now-sh.lastSweep > sweepEvery {
			sh.sweep(now, m.expired)
		}
		sh.m[string([]byte(key))] = v // copy: key may view a scratch buffer
	}
}

// UpdateExisting calls f with key's value under its shard's lock, if key
// has one (f returning false removes it); it allocates nothing.
func (m *Map[V]) UpdateExisting(key string, f func(v *V) (keep bool)) {
	sh := &m.shards[maphash.String(m.seed, key)%uint64(len(m.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if v, found := sh.m[key]; found && !f(v) {
		delete(sh.m, key)
	}
}

func (sh *shard[V]) sweep(now int64, expired func(*V, int64) bool) {
	sh.lastSweep = now
	for k, v := range sh.m {
		if expired(v, now) {
			delete(sh.m, k)
		}
	}
}

// Len counts the entries (for tests).
func (m *Map[V]) Len() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}
