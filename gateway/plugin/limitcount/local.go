package limitcount

import (
	"hash/maphash"
	"sync"
	"time"
	"unsafe"
)

// localStore counts in this process: fixed windows from each key's first
// request, as resty.limit.count in an nginx shared dict. Sharded to keep
// lock hold times short; expired windows are swept as keys are added.
type localStore struct {
	seed   maphash.Seed
	shards [64]shard
}

type shard struct {
	mu        sync.Mutex
	m         map[string]*window
	lastSweep int64
}

type window struct {
	remaining int64
	expires   int64 // unix nanoseconds
}

func newLocalStore() *localStore {
	s := &localStore{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].m = map[string]*window{}
	}
	return s
}

const sweepEvery = int64(10 * time.Second)

// incoming counts one request against key and returns what remains
// (negative: over the limit) and the time until the window resets.
func (s *localStore) incoming(key string, limit int64, win time.Duration, now time.Time) (int64, time.Duration) {
	sh := &s.shards[maphash.String(s.seed, key)%uint64(len(s.shards))]
	t := now.UnixNano()
	sh.mu.Lock()
	w, ok := sh.m[key]
	if !ok || t >= w.expires {
		if !ok {
			if t-sh.lastSweep > sweepEvery {
				sh.sweep(t)
			}
			w = &window{}
			sh.m[string([]byte(key))] = w // copy: key may view a scratch buffer
		}
		w.remaining, w.expires = limit-1, t+int64(win)
	} else {
		w.remaining--
	}
	remaining, reset := w.remaining, time.Duration(w.expires-t)
	sh.mu.Unlock()
	return remaining, reset
}

func (sh *shard) sweep(t int64) {
	sh.lastSweep = t
	for k, w := range sh.m {
		if t >= w.expires {
			delete(sh.m, k)
		}
	}
}

func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
