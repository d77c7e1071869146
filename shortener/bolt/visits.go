package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"strings"

	bbolt "go.etcd.io/bbolt"

	"github.com/linkgate/linkgate/shortener"
)

var _ shortener.VisitStore = (*Store)(nil)

// visitsBucket holds each visited link's statistics under its id, apart
// from the links bucket: a flush rewrites only these small records, and the
// pages redirects read stay untouched.
var visitsBucket = []byte("visits")

// yieldEvery is how many records AddVisits writes between yields.
const yieldEvery = 64

// AddVisits adds a batch in one transaction (one fsync). Deltas are applied
// in id order, so neighbouring records share page writes; deltas of links
// that no longer exist are dropped.
func (s *Store) AddVisits(ctx context.Context, batch []shortener.VisitDelta) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("add visits: %w", err)
	}
	order := make([]int, len(batch))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(batch[a].ID, batch[b].ID) })
	err := s.update(func(tx *bbolt.Tx) error { // applies pending links first
		links, visits := tx.Bucket(linksBucket), tx.Bucket(visitsBucket)
		// Values must stay valid until the commit: they are cut from
		// arenas, a new one when the last is full.
		var arena []byte
		for j, i := range order {
			if j%yieldEvery == yieldEvery-1 {
				// Let request handlers run: on a server with one core
				// (GOMAXPROCS=1) a batch of thousands of links would
				// otherwise hold it for a whole scheduler slice (10 ms)
				// at a time, which redirects would see as latency.
				runtime.Gosched()
			}
			d := &batch[i]
			key := []byte(d.ID)
			v := visits.Get(key)
			// A record exists only while its link does (Delete removes
			// both), so the links bucket need not be searched for one.
			if v == nil && links.Get(key) == nil {
				continue // deleted meanwhile
			}
			if cap(arena)-len(arena) < len(v)+512 {
				arena = make([]byte, 0, max(64<<10, 2*len(v)+512))
			}
			start := len(arena)
			merged, ok := mergeStats(arena, v, &d.Stats)
			if !ok { // a bound is reached (or an old record is malformed): decode and bound
				var st shortener.VisitStats
				if v != nil {
					var err error
					if st, err = decodeStats(v); err != nil {
						return fmt.Errorf("link %q: %w", d.ID, err)
					}
				}
				st.Add(d.Stats)
				st.Bound()
				merged = append(arena[:start], encodeStats(st)...)
			}
			arena = merged
			if err := visits.Put(key, arena[start:len(arena):len(arena)]); err != nil {
				return err
			}
		}
		return nil
	})
	s.snaps.retire() // later reads must see the new counts
	if err != nil {
		return fmt.Errorf("add visits: %w: %w", shortener.ErrUnavailable, err)
	}
	for i := range batch {
		batch[i].Applied = true
	}
	return nil
}

// VisitStats returns the stored statistics of a link.
func (s *Store) VisitStats(ctx context.Context, id string) (shortener.VisitStats, error) {
	var st shortener.VisitStats
	pv := s.pendingValue([]byte(id)) // created, not yet applied (looked up first, as in Get)
	err := s.db.View(func(tx *bbolt.Tx) error {
		lv := tx.Bucket(linksBucket).Get([]byte(id))
		if lv == nil {
			lv = pv
		}
		if lv == nil {
			return shortener.ErrNotFound
		}
		l, _, err := decodeMeta(lv)
		if err != nil {
			return err
		}
		if v := tx.Bucket(visitsBucket).Get([]byte(id)); v != nil {
			if st, err = decodeStats(v); err != nil {
				return err
			}
		}
		st.Total += l.Visits // counted before statistics were kept (imports)
		return nil
	})
	if err != nil {
		return shortener.VisitStats{}, fmt.Errorf("visit stats %q: %w", id, err)
	}
	return st, nil
}

// storedVisits returns the total under key in a visits bucket (nil: none).
func storedVisits(b *bbolt.Bucket, key []byte) int64 {
	if b == nil {
		return 0
	}
	v := b.Get(key)
	if len(v) < 2 || v[0] != statsVersion {
		return 0
	}
	n, _ := binary.Varint(v[1:])
	return n
}

// A statistics record:
//
//	byte    version (1)
//	varint  Total
//	varint  Bots
//	then Days, Referrers, Browsers, BotAgents, Countries, each:
//	uvarint number of entries, then per entry: uvarint key length, key, varint count
const statsVersion = 1

func encodeStats(st shortener.VisitStats) []byte {
	b := []byte{statsVersion}
	b = binary.AppendVarint(b, st.Total)
	b = binary.AppendVarint(b, st.Bots)
	for _, m := range []shortener.Breakdown{st.Days, st.Referrers, st.Browsers, st.BotAgents, st.Countries} {
		b = binary.AppendUvarint(b, uint64(len(m)))
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys) // deterministic records
		for _, k := range keys {
			b = binary.AppendUvarint(b, uint64(len(k)))
			b = append(b, k...)
			b = binary.AppendVarint(b, m[k])
		}
	}
	return b
}

var errCorruptStats = fmt.Errorf("corrupt visit statistics record")

// decodeStats parses a record; v may live in the memory map, so keys are
// copied.
func decodeStats(v []byte) (shortener.VisitStats, error) {
	if len(v) < 1 || v[0] != statsVersion {
		return shortener.VisitStats{}, errCorruptStats
	}
	r := bytes.NewReader(v[1:])
	var st shortener.VisitStats
	var err error
	if st.Total, err = binary.ReadVarint(r); err != nil {
		return shortener.VisitStats{}, errCorruptStats
	}
	if st.Bots, err = binary.ReadVarint(r); err != nil {
		return shortener.VisitStats{}, errCorruptStats
	}
	for _, m := range []*shortener.Breakdown{&st.Days, &st.Referrers, &st.Browsers, &st.BotAgents, &st.Countries} {
		n, err := binary.ReadUvarint(r)
		if err != nil || n > uint64(r.Len()) {
			return shortener.VisitStats{}, errCorruptStats
		}
		if n > 0 {
			*m = make(shortener.Breakdown, n)
		}
		for range n {
			kl, err := binary.ReadUvarint(r)
			if err != nil || kl > uint64(r.Len()) {
				return shortener.VisitStats{}, errCorruptStats
			}
			k := make([]byte, kl)
			r.Read(k)
			c, err := binary.ReadVarint(r)
			if err != nil {
				return shortener.VisitStats{}, errCorruptStats
			}
			(*m)[string(k)] = c
		}
	}
	if r.Len() != 0 {
		return shortener.VisitStats{}, errCorruptStats
	}
	return st, nil
}
