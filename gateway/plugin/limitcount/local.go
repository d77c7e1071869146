package limitcount

import (
	"time"
	"unsafe"

	"github.com/linkgate/linkgate/gateway/plugin/internal/shardmap"
)

// localStore counts in this process: fixed windows from each key's first
// request, as resty.limit.count in an nginx shared dict.
type localStore struct {
	m *shardmap.Map[window]
}

type window struct {
	remaining int64
	expires   int64 // unix nanoseconds
}

func newLocalStore() *localStore {
	return &localStore{m: shardmap.New(func(w *window, now int64) bool { return now >= w.expires })}
}

// incoming counts one request against key and returns what remains
// (negative: over the limit) and the time until the window resets.
func (s *localStore) incoming(key string, limit int64, win time.Duration, now time.Time) (remaining int64, reset time.Duration) {
	t := now.UnixNano()
	s.m.Update(key, t, func(w *window, found bool) bool {
		if !found || t >= w.expires {
			w.remaining, w.expires = limit-1, t+int64(win)
		} else {
			w.remaining--
		}
		remaining, reset = w.remaining, time.Duration(w.expires-t)
		return true
	})
	return remaining, reset
}

func b2s(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
