package pebble

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/linkgate/linkgate/shortener"
)

// migrateVisits turns the lifetime statistics records of format 1 into
// those of format 3 (vrecord.go): per link, its totals, and its days as
// day and span records (breakdowns in its latest day's: format 1 kept
// them for the link's whole life), counted into its scopes too. Each
// chunk of links is one batch, its links' totals records rewritten in
// the batch that adds their day records, so a migration cut short is
// resumed where it stopped: records already of format 2 are skipped. The
// store's format becomes 3 last (then 4: migrateBase). It stops after a
// chunk once ctx ends.
func (s *Store) migrateVisits(ctx context.Context) error {
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
		if err := w.lifetime(b, id, m.tags, st, now, false); err != nil {
			return err
		}
		if n++; n%s.openBatch == 0 {
			if err := w.flushScopes(b); err != nil {
				return err
			}
			if err := b.Commit(pebbledb.NoSync); err != nil {
				return err
			}
			b.Close()
			b = s.db.NewBatch()
			if err := s.openStep(ctx); err != nil {
				return fmt.Errorf("migrate visit statistics: %w", err)
			}
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	if err := w.flushScopes(b); err != nil {
		return err
	}
	if err := b.Set(formatKey, []byte{3}, nil); err != nil {
		return err
	}
	return b.Commit(pebbledb.Sync)
}

// lifetime adds to b what lifetime statistics st of the link under key
// (with tags) are: its day and span records and its scopes' (merged), as
// AddVisits adds a batch of the lifetime form (VisitBatch.HourlyFrom), and
// its totals record (set) or, with base, what its span records do not
// count merged into its base record (vbase.go).
func (w *visitWriter) lifetime(b *pebbledb.Batch, key string, tags []string, st shortener.VisitStats, now time.Time, base bool) error {
	hb := shortener.NewVisitBatch(shortener.VisitDelta{ID: key, Stats: st}).HourlyFrom(now)
	w.names = w.names[:0]
	for _, k := range hb.Keys {
		w.names = append(w.names, []byte(k.Name))
	}
	if err := w.buckets(b, hb, &hb.Links[0], tags, resDay); err != nil || base {
		return errors.Join(err, w.rest(b, key, st.Total, st.Bots))
	}
	t := totals{total: st.Total, bots: st.Bots}
	for _, k := range hb.Keys {
		day := uint32(k.Hour)/24 + 1
		if t.first == 0 || day < t.first {
			t.first = day
		}
		t.last = max(t.last, day)
	}
	return b.Set(appendKey(nil, kindStats, key), appendTotals(nil, t), nil)
}

// migrateSpans adds the span records of format 3 to a store of format 2:
// span by span over the retention, each link's day records of the span
// (read together in link order, as a query reads them) become its span
// record. The records are Set, not merged, so a migration cut short is
// done again from the start when the store next opens, counting nothing
// twice (nothing else writes while a store opens). The store's format
// becomes 3 last. It stops after a span once ctx ends.
func (s *Store) migrateSpans(ctx context.Context) error {
	today := uint32(s.statsClock().Unix() / 86400)
	b := s.db.NewBatch()
	defer func() { b.Close() }()
	var days [spanDays]shortener.PeopleBots
	var seen uint32 // the days of days that have records
	var key, rec []byte
	all := shortener.StatsQuery{}
	for span := (today - min(today, keepDays)) / spanDays; span <= today/spanDays; span++ {
		h, err := s.linkIters(resDay, span*spanDays, span*spanDays+spanDays-1, &all)
		if err != nil {
			return err
		}
		var ferr error // of done: a failed Set or commit
		err = mergeLinks(ctx, h, func(k, v []byte) error {
			people, bots, _, err := brecHeader(v)
			day := binary.BigEndian.Uint32(k[2:]) % spanDays
			days[day].Add(shortener.PeopleBots{People: people, Bots: bots})
			seen |= 1 << day
			return err
		}, func(link []byte) {
			rec = append(rec[:0], spanVersion)
			for d := range byte(spanDays) {
				if seen&(1<<d) != 0 {
					rec = appendSpanDay(rec, d, days[d].People, days[d].Bots)
				}
			}
			days, seen = [spanDays]shortener.PeopleBots{}, 0
			key = append(bucketKey[string](key[:0], resSpan, span, subjectLink, ""), link[1:]...)
			if ferr == nil {
				ferr = b.Set(key, rec, nil)
			}
			if ferr == nil && b.Len() > 4<<20 {
				ferr = b.Commit(pebbledb.NoSync)
				b.Close()
				b = s.db.NewBatch()
			}
		})
		if err != nil {
			return fmt.Errorf("migrate to span records: %w", err)
		}
		if ferr != nil {
			return fmt.Errorf("migrate to span records: %w", ferr)
		}
		if err := s.openStep(ctx); err != nil {
			return fmt.Errorf("migrate to span records: %w", err)
		}
	}
	if err := b.Set(formatKey, []byte{3}, nil); err != nil {
		return err
	}
	return b.Commit(pebbledb.Sync)
}
