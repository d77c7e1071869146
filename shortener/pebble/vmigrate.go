package pebble

import (
	"fmt"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/linkgate/linkgate/shortener"
)

// migrateChunk is how many links the migration commits at a time.
const migrateChunk = 1000

// migrateVisits turns the lifetime statistics records of format 1 into
// format 2 (vrecord.go): per link, its totals, and its days as day
// records (breakdowns in its latest day's: format 1 kept them for the
// link's whole life), counted into its scopes too. Each chunk of links
// is one batch, its links' totals records rewritten in the batch that
// adds their day records, so a migration cut short is resumed where it
// stopped: records already of format 2 are skipped. The store's format
// becomes 2 last.
func (s *Store) migrateVisits() error {
	now := s.statsClock()
	it, err := s.db.NewIter(&pebbledb.IterOptions{LowerBound: []byte{kindStats}, UpperBound: []byte{kindStats + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	w := visitWriter{scopes: map[string]*scopeAcc{}}
	b := s.db.NewBatch()
	defer func() { b.Close() }()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if len(v) == 0 || v[0] != 1 {
			continue // of format 2 already
		}
		id := linkKey(it.Key())
		st, err := decodeStatsV1(v)
		if err != nil {
			return fmt.Errorf("migrate visit statistics of %q: %w", id, err)
		}
		m, _, err := s.linkMeta(id)
		if err != nil {
			return fmt.Errorf("migrate visit statistics of %q: %w", id, err)
		}
		if err := w.lifetime(b, id, m.tags, st, now); err != nil {
			return err
		}
		if n++; n%migrateChunk == 0 {
			if err := w.flushScopes(b); err != nil {
				return err
			}
			if err := b.Commit(pebbledb.NoSync); err != nil {
				return err
			}
			b.Close()
			b = s.db.NewBatch()
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	if err := w.flushScopes(b); err != nil {
		return err
	}
	if err := b.Set(formatKey, []byte{format}, nil); err != nil {
		return err
	}
	return b.Commit(pebbledb.Sync)
}

// lifetime adds to b what lifetime statistics st of the link under key
// (with tags) are in format 2: its totals record (set), and its day
// records and its scopes' (merged), as AddVisits adds a batch of the
// lifetime form (VisitBatch.HourlyFrom).
func (w *visitWriter) lifetime(b *pebbledb.Batch, key string, tags []string, st shortener.VisitStats, now time.Time) error {
	hb := shortener.NewVisitBatch(shortener.VisitDelta{ID: key, Stats: st}).HourlyFrom(now)
	t := totals{total: st.Total, bots: st.Bots}
	for _, k := range hb.Keys {
		day := uint32(k.Hour)/24 + 1
		if t.first == 0 || day < t.first {
			t.first = day
		}
		t.last = max(t.last, day)
	}
	if err := b.Set(appendKey(nil, kindStats, key), appendTotals(nil, t), nil); err != nil {
		return err
	}
	w.names = w.names[:0]
	for _, k := range hb.Keys {
		w.names = append(w.names, []byte(k.Name))
	}
	return w.buckets(b, hb, &hb.Links[0], tags, resDay)
}
