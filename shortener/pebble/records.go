package pebble

import (
	"context"
	"fmt"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/linkgate/linkgate/shortener"
)

var _ shortener.RecordStore = (*Store)(nil)

// ImportRecords stores the records whose ids are free, in one synced batch
// (all of them or, on error, none), each link with its statistics. A link
// already stored under the id, identical, is Unchanged (an import run
// twice); another link there makes the record Conflicting.
func (s *Store) ImportRecords(ctx context.Context, recs []shortener.LinkRecord) ([]shortener.ImportResult, error) {
	ids := make([]string, len(recs))
	for i := range recs {
		if !shortener.ValidKey(recs[i].Link.ID) {
			return nil, fmt.Errorf("import: invalid id %q", recs[i].Link.ID)
		}
		ids[i] = recs[i].Link.ID
	}
	release, err := s.res.acquireAll(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer release()
	if s.closed.Load() {
		return nil, unavailable("import", errClosed)
	}
	b := s.db.NewBatch()
	defer b.Close()
	results := make([]shortener.ImportResult, len(recs))
	first := make(map[string]int, len(recs)) // id → index of the record stored for it
	var key []byte
	var vals [][]byte // the values stored, for the read index
	// Held shared, as by AddVisits: a fold (vbase.go) must not read the
	// record of a link imported meanwhile.
	s.visitsMu.RLock()
	defer s.visitsMu.RUnlock()
	w := visitWriter{scopes: map[string]*scopeAcc{}, floor: s.spanFloor.Load()}
	now := s.statsClock()
	for i := range recs {
		l := &recs[i].Link
		if j, ok := first[l.ID]; ok {
			results[i] = shortener.ImportOver(recs[j].Link, *l)
			continue
		}
		key = appendKey(key[:0], kindLink, l.ID)
		v, closer, found, err := s.get(key)
		if err != nil {
			return nil, unavailable("import", err)
		}
		if found {
			old, err := decodeLink(l.ID, v)
			closer.Close()
			if err != nil {
				return nil, fmt.Errorf("import: link %q: %w", l.ID, err)
			}
			results[i] = shortener.ImportOver(old, *l)
			continue
		}
		first[l.ID] = i
		val := appendLink(nil, l)
		vals = append(vals, val)
		if err := b.Set(key, val, nil); err != nil {
			return nil, unavailable("import", err)
		}
		if err := indexLink(b, l.ID, nil, l); err != nil {
			return nil, unavailable("import", err)
		}
		if st := recs[i].Stats; !st.IsZero() {
			if err := w.lifetime(b, l.ID, l.Tags, st, now, l.MaxVisits <= 0); err != nil {
				return nil, unavailable("import", err)
			}
		}
		results[i] = shortener.Imported
	}
	if err := w.flushScopes(b); err != nil {
		return nil, unavailable("import", err)
	}
	if err := s.commit(b, pebbledb.Sync); err != nil {
		return nil, unavailable("import", err)
	}
	j := 0
	for i, r := range results {
		if r == shortener.Imported {
			s.indexed(recs[i].Link.ID, vals[j])
			j++
		}
	}
	return results, nil
}

// ExportRecords calls fn with every link and its statistics, in List's order,
// from one snapshot of the store.
func (s *Store) ExportRecords(ctx context.Context, fn func(shortener.LinkRecord) error) error {
	if s.closed.Load() {
		return unavailable("export", errClosed)
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	it, err := snap.NewIter(&pebbledb.IterOptions{LowerBound: linksLower, UpperBound: linksUpper})
	if err != nil {
		return unavailable("export", err)
	}
	defer it.Close()
	now := s.statsClock()
	for ok := it.First(); ok; ok = it.Next() {
		if err := ctx.Err(); err != nil {
			return err
		}
		id := linkKey(it.Key())
		v, err := it.ValueAndErr()
		if err != nil {
			return unavailable("export", err)
		}
		rec := shortener.LinkRecord{}
		if rec.Link, err = decodeLink(id, v); err != nil {
			return fmt.Errorf("export: link %q: %w", id, err)
		}
		if rec.Stats, err = lifetimeStats(snap, &rec.Link, now); err != nil {
			return fmt.Errorf("export: statistics of %q: %w", id, err)
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return unavailable("export", err)
	}
	return nil
}

// Backup writes a consistent copy of the store into dir (which must not
// exist) while it serves: a pebble checkpoint, hard links to the immutable
// tables where the file system allows, copies of the rest. dir opens as a
// store of its own.
func (s *Store) Backup(dir string) error {
	if s.closed.Load() {
		return unavailable("backup", errClosed)
	}
	if err := s.db.Checkpoint(dir, pebbledb.WithFlushedWAL()); err != nil {
		return fmt.Errorf("backup to %s: %w", dir, err)
	}
	return nil
}
