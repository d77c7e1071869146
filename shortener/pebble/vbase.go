package pebble

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/linkgate/linkgate/shortener"
)

// Lifetime totals, format 4 (vrecord.go): a link without a visit limit
// keeps a base record, which no flush merges into — its totals are the
// base plus its span records, which every flush merges anyway — and a
// limited link, whose totals every redirect reads, a complete record
// merged by every flush (format 3 merged every link's, keys spread over
// all links, which made every compaction of the flushed records rewrite
// the whole totals range). What changes a record's kind holds visitsMu
// exclusively, so no flush merges between its read and its write: a
// limit set or removed (Update), a link deleted (Delete: the next link
// under the id starts from a base of minus the span records left), the
// fold of a span leaving the retention into the base records.

// spanFloorKey holds the first span that may have span records (u32
// big-endian): those before it are folded into the base records.
var spanFloorKey = []byte{kindMeta, 's', 'p', 'a', 'n', 'f', 'l', 'o', 'o', 'r'}

// foldChunk is how many span records a fold commits at a time, visitsMu
// held: a few milliseconds.
const foldChunk = 4096

// retainedSpan is the first span of the retention on day today.
func retainedSpan(today uint32) uint32 { return (today - min(today, keepDays)) / spanDays }

// readSpanFloor returns the span floor stored in r (0 if none).
func readSpanFloor(r pebbledb.Reader) (uint32, error) {
	v, closer, err := r.Get(spanFloorKey)
	if errors.Is(err, pebbledb.ErrNotFound) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(v) != 4 {
		return 0, errCorruptVisits
	}
	return binary.BigEndian.Uint32(v), nil
}

// readTotals returns the totals or base record of id in r, found=false if
// it has none.
func readTotals(r pebbledb.Reader, key []byte) (t totals, found bool, err error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebbledb.ErrNotFound) {
		return t, false, nil
	} else if err != nil {
		return t, false, err
	}
	defer closer.Close()
	t, err = decodeTotals(v)
	return t, true, err
}

// spanVisits returns the visits of id's span records in r, of the spans
// from r's span floor to today's, and calls day (if not nil) with every
// day that has visits, in order.
func spanVisits(r pebbledb.Reader, id string, today uint32, day func(uint32)) (shortener.PeopleBots, error) {
	var sum shortener.PeopleBots
	floor, err := readSpanFloor(r)
	if err != nil {
		return sum, err
	}
	var key []byte
	for span := floor; span <= today/spanDays; span++ {
		key = linkBucketKey(key[:0], resSpan, span, id)
		v, closer, err := r.Get(key)
		if errors.Is(err, pebbledb.ErrNotFound) {
			continue
		} else if err != nil {
			return sum, err
		}
		rest, err := spanEntries(v)
		for err == nil && len(rest) > 0 {
			var d byte
			var pb shortener.PeopleBots
			if d, pb, rest, err = nextSpanDay(rest); err == nil {
				sum.Add(pb)
				if day != nil {
					day(span*spanDays + uint32(d))
				}
			}
		}
		closer.Close()
		if err != nil {
			return sum, err
		}
	}
	return sum, nil
}

// lifetimeTotals returns the lifetime totals of the link under id in r,
// limited if it has a visit limit, and whether they are of a complete
// record (else of a base record and the spans, then day is called with
// the span records' days as spanVisits calls it).
func lifetimeTotals(r pebbledb.Reader, id string, limited bool, today uint32, day func(uint32)) (t totals, complete bool, err error) {
	t, found, err := readTotals(r, appendKey(nil, kindStats, id))
	if err != nil || found && !t.base || !found && limited {
		return t, true, err
	}
	sum, err := spanVisits(r, id, today, day)
	t.total += sum.People + sum.Bots
	t.bots += sum.Bots
	t.base = false
	return t, false, err
}

// rebase adds to b the Set (or Delete) that makes the record of id, whose
// link is limited or not (wasLimited before), of the kind its link now
// needs, keeping its totals; with gone, for the next link under the id
// (its totals 0). visitsMu must be held exclusively until b commits.
func (s *Store) rebase(b *pebbledb.Batch, id string, wasLimited, limited, gone bool) error {
	today := uint32(s.statsClock().Unix() / 86400)
	var first, last uint32
	t, _, err := lifetimeTotals(s.db, id, wasLimited, today, nil)
	if err != nil {
		return err
	}
	sum, err := spanVisits(s.db, id, today, func(d uint32) {
		if first == 0 {
			first = d + 1
		}
		last = d + 1
	})
	if err != nil {
		return err
	}
	key := appendKey(nil, kindStats, id)
	switch {
	case gone: // the span records' days from today on are the next link's
		t = totals{total: -(sum.People + sum.Bots), bots: -sum.Bots, first: today + 1, last: today + 1, base: true}
	case limited:
		if t.first == 0 {
			t.first, t.last = first, last
		}
	default:
		t = totals{total: t.total - sum.People - sum.Bots, bots: t.bots - sum.Bots, first: t.first, last: t.last, base: true}
	}
	if t.total == 0 && t.bots == 0 && t.base && !gone {
		return b.Delete(key, nil)
	}
	return b.Set(key, appendTotals(nil, t), nil)
}

// foldSpans folds the span records before the retention's first span into
// their links' base records, foldChunk at a time, each chunk's merges and
// deletions in one batch (a fold cut short is resumed, nothing counted
// twice), visitsMu held exclusively meanwhile so no record changes kind
// under it; the span floor moves up once none is left. A link with a
// complete record (a limited link) keeps it as it is: it counts them.
func (s *Store) foldSpans() error {
	today := uint32(s.statsClock().Unix() / 86400)
	to := retainedSpan(today)
	if s.spanFloor.Load() >= to {
		return nil
	}
	s.visitsMu.Lock()
	defer s.visitsMu.Unlock()
	if s.spanFloor.Load() >= to || s.closed.Load() {
		return nil
	}
	lo := bucketKey[string](nil, resSpan, 0, 0, "")[:2]
	hi := bucketKey[string](nil, resSpan, to, 0, "")[:visitsKeyPrefix]
	it, err := s.db.NewIter(&pebbledb.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	defer it.Close()
	b := s.db.NewBatch()
	defer b.Close()
	n := 0
	var key, rec []byte
	for ok := it.First(); ok && n < foldChunk; ok = it.Next() {
		n++
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		sum, err := spanSum(v, 0, spanDays-1)
		if err != nil {
			return err
		}
		id := linkKey(it.Key()[visitsKeyPrefix:])
		key = appendKey(key[:0], kindStats, id)
		t, found, err := readTotals(s.db, key)
		if err != nil {
			return err
		}
		if !found {
			m, exists, err := s.linkMeta(id)
			if err != nil {
				return err
			}
			t.base = !exists || !m.limited
		}
		if t.base && (sum != shortener.PeopleBots{}) {
			rec = appendTotals(rec[:0], totals{total: sum.People + sum.Bots, bots: sum.Bots, base: true})
			if err := b.Merge(key, rec, nil); err != nil {
				return err
			}
		}
		if err := b.Delete(it.Key(), nil); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	if n < foldChunk { // none left
		if err := b.Set(spanFloorKey, binary.BigEndian.AppendUint32(nil, to), nil); err != nil {
			return err
		}
	}
	if err := s.commit(b, pebbledb.NoSync); err != nil {
		return err
	}
	if n < foldChunk {
		s.spanFloor.Store(to)
	}
	return nil
}

// migrateBase turns a store of format 3 into format 4: the records of
// links without a visit limit, and of ids whose link was deleted, become
// base records (their totals minus their span records'), those of
// limited links stay complete, and the span records before the
// retention's are dropped (the totals count them). Links are converted
// in chunks, each chunk one batch; a converted record is a base record,
// so a migration cut short skips it when resumed. First the links with
// span records (read in link order, as a query reads them), then the
// other records. The store's format becomes 4 last. It stops after a
// chunk once ctx ends.
func (s *Store) migrateBase(ctx context.Context) error {
	today := uint32(s.statsClock().Unix() / 86400)
	floor, err := readSpanFloor(s.db)
	if err != nil {
		return err
	}
	if floor == 0 { // not resumed: the floor a cut-short migration used stays
		floor = retainedSpan(today)
		if err := s.db.Set(spanFloorKey, binary.BigEndian.AppendUint32(nil, floor), pebbledb.NoSync); err != nil {
			return err
		}
	}
	b := s.db.NewBatch()
	defer func() { b.Close() }()
	n := 0
	var ferr error
	convert := func(id string, sum shortener.PeopleBots) {
		if ferr != nil {
			return
		}
		key := appendKey(nil, kindStats, id)
		t, found, err := readTotals(s.db, key)
		if err != nil || found && t.base {
			ferr = err
			return
		}
		m, exists, err := s.linkMeta(id)
		if err != nil || exists && m.limited {
			ferr = err
			return
		}
		if !exists { // deleted: the span records' days from today on are the next link's
			t.first, t.last = today+1, today+1
		}
		t = totals{total: t.total - sum.People - sum.Bots, bots: t.bots - sum.Bots, first: t.first, last: t.last, base: true}
		if !found && t.total == 0 && t.bots == 0 {
			return
		}
		if ferr = b.Set(key, appendTotals(nil, t), nil); ferr != nil {
			return
		}
		if n++; n%s.openBatch == 0 {
			if ferr = b.Commit(pebbledb.NoSync); ferr == nil {
				b.Close()
				b = s.db.NewBatch()
				ferr = s.openStep(ctx)
			}
		}
	}
	h, err := s.linkIters(resSpan, floor, today/spanDays, &shortener.StatsQuery{})
	if err != nil {
		return err
	}
	var sum shortener.PeopleBots
	err = mergeLinks(ctx, h, func(k, v []byte) error {
		pb, err := spanSum(v, 0, spanDays-1)
		sum.Add(pb)
		return err
	}, func(link []byte) {
		convert(linkKey(link), sum)
		sum = shortener.PeopleBots{}
	})
	if err == nil && ferr == nil { // before the second pass reads the records
		ferr = b.Commit(pebbledb.NoSync)
		b.Close()
		b = s.db.NewBatch()
	}
	if err != nil || ferr != nil {
		return fmt.Errorf("migrate to base records: %w", errors.Join(err, ferr))
	}
	it, err := s.db.NewIter(&pebbledb.IterOptions{LowerBound: []byte{kindStats}, UpperBound: []byte{kindStats + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok && ferr == nil; ok = it.Next() {
		convert(linkKey(it.Key()), shortener.PeopleBots{}) // records of links with span records are base records by now
	}
	if err := errors.Join(it.Error(), ferr); err != nil {
		return fmt.Errorf("migrate to base records: %w", err)
	}
	lo := bucketKey[string](nil, resSpan, 0, 0, "")[:2]
	hi := bucketKey[string](nil, resSpan, floor, 0, "")[:visitsKeyPrefix]
	if err := b.DeleteRange(lo, hi, nil); err != nil {
		return err
	}
	if err := b.Set(formatKey, []byte{format}, nil); err != nil {
		return err
	}
	if err := b.Commit(pebbledb.Sync); err != nil {
		return err
	}
	s.spanFloor.Store(floor)
	return nil
}
