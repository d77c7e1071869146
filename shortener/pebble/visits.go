package pebble

import (
	"context"
	"fmt"
	"io"
	"sync"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/linkgate/linkgate/internal/pace"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/internal/statsrec"
)

// visitChunk is how many links AddVisits commits at a time, paced between
// commits (internal/pace): on a server with one core (GOMAXPROCS=1) a
// flush of 20,000 links in one commit held the core while pebble applied
// the whole batch to its memtable (about 10 ms, until the runtime
// preempted it), and every redirect arriving meanwhile waited for it. A
// yield (runtime.Gosched) between commits was not enough: in a runtime
// trace of make bench-visits' fixed rate over a million links the flush
// still ran 1.1–4.2 ms chunks back to back, the redirects getting the P
// only between them (docs/visits.md, "Visit flushes paced").
const visitChunk = 512

// AddVisits adds a batch: one Merge of a statistics record per link that
// exists, committed visitChunk links at a time. Every commit but the last
// is unsynced and the last is synced, which makes the write-ahead log
// durable up to it, so a batch costs one fsync whatever its size; a link
// is marked Applied once the commit holding it succeeds (it is in the
// store and must not be retried), so after an error the links of the
// committed chunks are Applied and the rest are not. Visits of links
// deleted meanwhile are dropped, and so are those of an earlier link
// under the same id (their CreatedAt differs from the link's).
//
// The links of a chunk are first looked up in the read index together
// (index.touch): checked one by one among a million links, each waited
// for two cache misses in turn (BenchmarkIndexGetBatch: 470–640 ns a
// link, 250–330 ns touched first).
func (s *Store) AddVisits(ctx context.Context, batch *shortener.VisitBatch) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("add visits: %w", err)
	}
	s.visitsMu.RLock()
	defer s.visitsMu.RUnlock()
	if s.closed.Load() {
		return unavailable("add visits", errClosed)
	}
	b := s.db.NewBatch()
	defer func() { b.Close() }()
	var d statsrec.Delta
	var key, rec []byte
	names := statsrec.KeyNames(nil, batch)
	from := 0         // the first link of the chunk being built
	unsynced := false // a chunk before it was committed without a sync
	var ids []string  // the chunk's, to touch
	var hs [visitChunk]uint64
	pacer := pace.New(s.pause, s.now)
	for i := range batch.Links {
		if i == from && s.ixOn.Load() {
			ids = ids[:0]
			for j := from; j < min(from+visitChunk, len(batch.Links)); j++ {
				ids = append(ids, batch.Links[j].ID)
			}
			s.ix.touch(ids, hs[:])
		}
		id := batch.Links[i].ID
		switch created, found, err := s.createdAt(id); {
		case err != nil:
			return unavailable("add visits", err)
		case !found:
		case batch.Links[i].CreatedAt != 0 && created != 0 && created != batch.Links[i].CreatedAt:
			// visits of an earlier link under the id, deleted meanwhile
		default:
			d.Reset()
			d.AddBatch(batch, i, names)
			d.Normalize()
			var err error
			if rec, err = statsrec.Merge(rec[:0], nil, &d); err != nil {
				return fmt.Errorf("add visits: link %q: %w", id, err)
			}
			key = appendKey(key[:0], kindStats, id)
			if err := b.Merge(key, rec, nil); err != nil {
				return unavailable("add visits", err)
			}
		}
		last := i == len(batch.Links)-1
		if !last && i-from < visitChunk-1 {
			continue
		}
		o := pebbledb.NoSync
		if last {
			o = pebbledb.Sync
			if b.Empty() && unsynced {
				// Nothing left to merge, but the chunks before are
				// not synced yet: a log-only record makes the commit.
				if err := b.LogData(nil, nil); err != nil {
					return unavailable("add visits", err)
				}
			}
		}
		if err := s.commitVisits(b, o, batch.Links[from:i+1]); err != nil {
			return unavailable("add visits", err)
		}
		if !last {
			unsynced = unsynced || !b.Empty()
			b.Close()
			b = s.db.NewBatch()
			from = i + 1
			pacer.Step()
		}
	}
	return nil
}

// commitVisits commits b (nothing if it is empty), the visits of links,
// with o, and marks links Applied.
func (s *Store) commitVisits(b *pebbledb.Batch, o *pebbledb.WriteOptions, links []shortener.LinkVisits) error {
	if !b.Empty() {
		if s.visitChunkHook != nil {
			if err := s.visitChunkHook(len(links), o.Sync); err != nil {
				return err
			}
		}
		if err := s.commit(b, o); err != nil {
			return err
		}
	}
	for i := range links {
		links[i].Applied = true
	}
	return nil
}

// VisitStats returns the stored statistics of the link under id.
func (s *Store) VisitStats(ctx context.Context, id string) (shortener.VisitStats, error) {
	l, err := s.Get(ctx, id)
	if err != nil {
		return shortener.VisitStats{}, err
	}
	var st shortener.VisitStats
	v, closer, found, err := s.get(appendKey(nil, kindStats, id))
	if err != nil {
		return shortener.VisitStats{}, unavailable(fmt.Sprintf("visit stats %q", id), err)
	}
	if found {
		st, err = statsrec.Decode(v)
		closer.Close()
		if err != nil {
			return shortener.VisitStats{}, fmt.Errorf("visit stats %q: %w", id, err)
		}
	}
	// Get counted the stored visits into a limited link's Visits; the
	// rest of Visits is what the link was created with (imports).
	if l.MaxVisits > 0 {
		l.Visits -= st.Total
	}
	st.Total += l.Visits
	st.Bound()
	return st, nil
}

// storedVisits returns the stored visit total of id; kb is a key buffer.
func storedVisits[T string | []byte](s *Store, kb *[]byte, id T) (int64, error) {
	*kb = appendKey((*kb)[:0], kindStats, id)
	v, closer, found, err := s.get(*kb)
	if err != nil || !found {
		return 0, err
	}
	defer closer.Close()
	return statsrec.Total(v)
}

// merger adds statistics records: the operands of a stats key are records,
// and so is their sum. Other kinds of keys have no merge operands.
var merger = &pebbledb.Merger{
	Name: "linkgate.visits.v1",
	Merge: func(key, value []byte) (pebbledb.ValueMerger, error) {
		if len(key) == 0 || key[0] != kindStats {
			return nil, fmt.Errorf("merge operand under key %q, which is not visit statistics", key)
		}
		m := mergers.Get().(*statsMerger)
		m.acc = append(m.acc[:0], value...)
		return m, nil
	},
}

// mergers are reused: Finish gives pebble the merger as the Closer of its
// result, and Close puts it back.
var mergers = sync.Pool{New: func() any { return new(statsMerger) }}

// statsMerger adds records as pebble hands them over, into acc. The first
// operand is kept as it is, not decoded: a key with a single operand is
// what most keys of a flush or a compaction are (a link visited once since
// its last compaction), and its record is already canonical and bounded
// (AddVisits writes operands with statsrec.Merge), so it is passed through
// unchanged. A corrupt one is reported by the read that decodes it.
type statsMerger struct {
	acc, spare []byte
	d          statsrec.Delta
}

func (m *statsMerger) add(v []byte) error {
	m.d.Reset()
	if err := m.d.AddRecord(v); err != nil {
		return err
	}
	m.d.Normalize()
	out, err := statsrec.Merge(m.spare[:0], m.acc, &m.d)
	if err != nil {
		return err
	}
	m.acc, m.spare = out, m.acc
	return nil
}

// MergeNewer and MergeOlder add: the sum does not depend on the order.
func (m *statsMerger) MergeNewer(v []byte) error { return m.add(v) }
func (m *statsMerger) MergeOlder(v []byte) error { return m.add(v) }

func (m *statsMerger) Finish(includesBase bool) ([]byte, io.Closer, error) {
	return m.acc, m, nil
}

// Close returns m to the pool once pebble is done with its result.
func (m *statsMerger) Close() error {
	m.d.Reset()
	mergers.Put(m)
	return nil
}

// String is for pebble's debugging output.
func (m *statsMerger) String() string { return fmt.Sprintf("stats(%d bytes)", len(m.acc)) }

// createdAt returns the CreatedAt (Unix seconds, 0: none) of the link
// under id, found=false if there is none.
func (s *Store) createdAt(id string) (created int64, found bool, err error) {
	kb := s.keys.Get().(*[]byte)
	defer s.keys.Put(kb)
	v, release, found, err := s.value(kb, []byte(id))
	if !found || err != nil {
		return 0, found, err
	}
	defer release()
	l, _, err := decodeMeta(v)
	if err != nil {
		return 0, true, err
	}
	if !l.CreatedAt.IsZero() {
		created = l.CreatedAt.Unix()
	}
	return created, true, nil
}
