package dynamodb

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/linkgate/linkgate/shortener"
)

var (
	_ shortener.VisitStore      = (*Store)(nil)
	_ shortener.VisitRangeStore = (*Store)(nil)
)

// Visit statistics live apart from the links (docs/dynamodb.md, "Visit
// statistics"): in a log of records, each the visits of many links over
// VisitInterval (vlog.go), folded in the background into state items per
// shard of ids and month (vfold.go). A link's item keeps only what
// redirects need: the seed's shortURL and originalURL, createdAt,
// expiresAt, maxVisits, and visits — the visits it was created with, plus
// for a link with a visit limit those counted since, added to the item at
// once so the limit is enforced on them (as before). Its size never grows
// with its statistics, so a redirect's read is one read unit.
//
// Items of the old layout (before 2026-12) carry their statistics as
// attributes of the link's item, which one UpdateItem ADD per link and
// flush incremented:
//
//	bots  vd:2026-03-14  vr:news.example.com  vb:Firefox  vx:Slack  vc:DE
//
// They are read as they are, and moved into the log (migrateLegacy) the
// first time a link's item is read by a redirect or its statistics are
// read: one transaction moves them and removes the attributes, on
// condition that they still hold what was read. Their visits attribute
// stays, as the count of visits the link had before.
const (
	AttrBots      = "bots"
	prefixDay     = "vd:"
	prefixRef     = "vr:"
	prefixBrowser = "vb:"
	prefixBot     = "vx:"
	prefixCountry = "vc:"
)

// kindPrefix is the attribute prefix of each breakdown in the old layout.
var kindPrefix = [shortener.NumVisitKinds]string{prefixDay, prefixRef, prefixBrowser, prefixBot, prefixCountry}

// visitWriters bounds the UpdateItem calls of one batch in flight.
const visitWriters = 64

// AddVisits takes a batch from the visit aggregator. Visits of links
// without a visit limit go to the visit log's buffer (written within
// VisitInterval, or by FlushVisits and Close). Visits of links with a
// limit are added to the link's item at once, one UpdateItem ADD each, on
// condition that the link is still the one visited (a deleted link's
// visits are dropped, and never counted for a new link under its id); their
// breakdowns go to the buffer too. Every link buffered or dropped is
// marked Applied; when the buffer is full, the links it could not take
// are not, and AddVisits returns an error.
func (s *Store) AddVisits(ctx context.Context, batch *shortener.VisitBatch) error {
	v := s.visits
	v.run()
	now := v.now()
	var limited []*shortener.LinkVisits
	full := 0
	for i := range batch.Links {
		l := &batch.Links[i]
		switch {
		case l.Total == 0 && l.Bots == 0 && len(l.Counts) == 0 || !validKey(l.ID):
			l.Applied = true
		case l.Limited:
			limited = append(limited, l)
		case v.add(false, func(set *deltaSet) { set.addVisits(batch, l, l.Total, now) }):
			l.Applied = true
		default:
			full++
		}
	}
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, visitWriters)
	)
	for _, l := range limited {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			gone, err := s.addLimited(ctx, l)
			if err == nil && !gone {
				v.add(true, func(set *deltaSet) { set.addVisits(batch, l, 0, now) })
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
				}
				return
			}
			l.Applied = true
		})
	}
	wg.Wait()
	if full > 0 && first == nil {
		first = fmt.Errorf("dynamodb add visits: %d links not taken, the visit buffer is full (%d links): %w",
			full, maxBufferedLinks, shortener.ErrUnavailable)
	}
	return first
}

// addLimited adds the visits of a link with a visit limit to its item. gone
// is true when the link no longer exists, or is another link under the
// same id.
func (s *Store) addLimited(ctx context.Context, l *shortener.LinkVisits) (gone bool, err error) {
	names := map[string]string{"#id": AttrID, "#v": AttrVisits}
	values := map[string]types.AttributeValue{":n": number(l.Total)}
	cond := "attribute_exists(#id)"
	if l.CreatedAt != 0 {
		names["#c"] = AttrCreatedAt
		values[":c"] = number(l.CreatedAt)
		cond += " AND (attribute_not_exists(#c) OR #c = :c)"
	}
	_, gone, err = s.update(ctx, "add visits "+quote(l.ID), &ddb.UpdateItemInput{
		Key:                       key(l.ID),
		UpdateExpression:          aws.String("ADD #v :n"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	return gone, err
}

// FlushVisits writes the visits the store holds (the buffer of the visit
// log) to the table now: on shutdown, after the aggregator's last batch.
func (s *Store) FlushVisits(ctx context.Context) error {
	return s.visits.flushAll(ctx)
}

// FoldVisits folds the visit log into state items now, whether due or not
// (the background work does it when due).
func (s *Store) FoldVisits(ctx context.Context) (FoldResult, error) {
	return s.visits.fold(ctx, s.visits.now())
}

// VisitStats returns a link's statistics: the visits on its item (those it
// was created with, those of a limited link, the old layout's attributes),
// its rows in the state items of the months since it was created, its rows
// in the records not folded into them yet, and what this process holds and
// has not written (linkRows).
func (s *Store) VisitStats(ctx context.Context, id string) (shortener.VisitStats, error) {
	var rows shortener.VisitStats
	item, _, err := s.linkRows(ctx, id, nil, func(set *deltaSet, r *row) { rows.Add(set.stats(r)) })
	if err != nil {
		return shortener.VisitStats{}, err
	}
	st, err := decodeStats(item)
	if err != nil {
		return shortener.VisitStats{}, fmt.Errorf("visit stats %q: malformed item: %w", id, err)
	}
	st.Add(rows)
	st.Bound()
	return st, nil
}

// VisitCounts implements shortener.VisitRangeStore for one link (q.ID):
// its rows of the months the range meets (linkRows), their counts of the
// hourly form within the range; rows written before it (lifetime form)
// and the old layout's attributes count as shortener.VisitBatch.HourlyFrom
// says. Across links (q.ID == ""): allCounts.
func (s *Store) VisitCounts(ctx context.Context, q shortener.StatsQuery) (shortener.VisitCounts, error) {
	if q.ID == "" {
		return s.allCounts(ctx, &q)
	}
	c := shortener.NewVisitCounts(&q)
	first, last := monthOfTime(q.From), monthOfTime(q.To.Add(-time.Nanosecond))
	item, created, err := s.linkRows(ctx, q.ID, func(m int32) bool { return m >= first && m <= last },
		func(set *deltaSet, r *row) { set.rangeCounts(r, &q, &c) })
	if err != nil {
		return c, err
	}
	if legacy := legacyAttrs(item); len(legacy) > 0 {
		sub := map[string]types.AttributeValue{}
		for _, a := range legacy {
			sub[a] = item[a]
		}
		st, err := decodeStats(sub)
		if err != nil {
			return c, fmt.Errorf("visit counts %q: malformed item: %w", q.ID, err)
		}
		set := newDeltaSet()
		set.addStats(q.ID, created, st, s.visits.now())
		for i := range set.rows {
			set.rangeCounts(&set.rows[i], &q, &c)
		}
	}
	return c, nil
}

// linkRows calls add for every row of link id that the table and this
// process hold, of the months for which month is true (nil: every month
// since the link was created): its rows in the state items, in the records
// not folded into them yet, and what this process holds and has not
// written. It reads the link's item, the counter and the fold item
// (consistently), then the state items and record headers, then the
// records' parts for the link: three round trips. It returns the link's
// item and its CreatedAt (Unix seconds, 0: unknown).
func (s *Store) linkRows(ctx context.Context, id string, month func(int32) bool, add func(*deltaSet, *row)) (map[string]types.AttributeValue, int64, error) {
	if !validKey(id) {
		return nil, 0, shortener.ErrNotFound
	}
	s.visits.run() // migrations of the old layout start with a read
	items, err := s.batchGet(ctx, []string{id, keySeq, keyFold}, true)
	if err != nil {
		return nil, 0, err
	}
	item := items[id]
	if item == nil {
		return nil, 0, shortener.ErrNotFound
	}
	l, err := decode(item)
	if err != nil {
		return nil, 0, fmt.Errorf("visit stats %q: malformed item: %w", id, err)
	}
	var created int64
	if !l.CreatedAt.IsZero() {
		created = l.CreatedAt.Unix()
	}
	numbered, _ := integer(items[keySeq], attrN)
	f, err := decodeFold(items[keyFold])
	if err != nil {
		return nil, 0, err
	}
	h := keyHash(id)
	wanted := func(r *row) bool {
		return r.ID == id && sameLink(r.CreatedAt, created) && (month == nil || month(r.Month))
	}

	// State items: the link's shard of each month with state since the
	// link was created.
	var stateKeys []string
	var months []int32
	for m, mm := range f.months {
		if (created == 0 || m >= monthOfTime(l.CreatedAt)) && (month == nil || month(m)) {
			stateKeys = append(stateKeys, stateKey(m, mm.k, shardOf(h, mm.k)))
			months = append(months, m)
		}
	}
	states, err := s.readState(ctx, stateKeys)
	if err != nil {
		return nil, 0, err
	}
	upto := map[int32]int64{}
	for i, k := range stateKeys {
		sk := states[k]
		for j := range sk.set.rows {
			if r := &sk.set.rows[j]; wanted(r) {
				add(sk.set, r)
			}
		}
		upto[months[i]] = sk.upto
	}

	// Records not folded yet: their headers, then the link's part of each.
	var recKeys []string
	for n := f.folded + 1; n <= numbered; n++ {
		recKeys = append(recKeys, recordKey(n))
	}
	hdrs, err := s.batchGet(ctx, recKeys, true)
	if err != nil {
		return nil, 0, err
	}
	committed := map[int64]bool{}
	sets := map[int64]*deltaSet{}
	var partKeys []string
	partRecord := map[string]int64{}
	for n := f.folded + 1; n <= numbered; n++ {
		item := hdrs[recordKey(n)]
		if item == nil {
			continue
		}
		committed[n] = true
		hd := decodeHeader(n, item)
		switch {
		case hd.void:
		case hd.parts == 1:
			set := newDeltaSet()
			if err := set.decodeInto(hd.data); err != nil {
				return nil, 0, fmt.Errorf("visit record %d: %w", n, err)
			}
			sets[n] = set
		default:
			k := partKey(n, partOf(h, hd.parts))
			partKeys = append(partKeys, k)
			partRecord[k] = n
		}
	}
	partItems, err := s.batchGet(ctx, partKeys, true)
	if err != nil {
		return nil, 0, err
	}
	for _, k := range partKeys {
		d, ok := partItems[k][attrData].(*types.AttributeValueMemberB)
		if !ok {
			continue // no rows in this part
		}
		set := newDeltaSet()
		if err := set.decodeInto(d.Value); err != nil {
			return nil, 0, fmt.Errorf("visit record part %s: %w", k, err)
		}
		sets[partRecord[k]] = set
	}
	for n, set := range sets {
		for i := range set.rows {
			if r := &set.rows[i]; wanted(r) && n > upto[r.Month] {
				add(set, r)
			}
		}
	}

	s.visits.local(id, created, func(set *deltaSet, r *row) {
		if month == nil || month(r.Month) {
			add(set, r)
		}
	}, func(n int64) bool { return committed[n] })
	s.visits.noticeLegacy(id, item)
	return item, created, nil
}

// decodeStats reads the statistics on a link's item: its visits attribute
// (the visits it was created with, and those counted on the item) and the
// old layout's breakdowns.
func decodeStats(item map[string]types.AttributeValue) (shortener.VisitStats, error) {
	var st shortener.VisitStats
	var err error
	if st.Total, err = integer(item, AttrVisits); err != nil {
		return st, err
	}
	if st.Bots, err = integer(item, AttrBots); err != nil {
		return st, err
	}
	for name := range item {
		for kind, prefix := range kindPrefix {
			if k, ok := strings.CutPrefix(name, prefix); ok {
				n, err := integer(item, name)
				if err != nil {
					return st, err
				}
				bd := st.Breakdown(shortener.VisitKind(kind))
				if *bd == nil {
					*bd = shortener.Breakdown{}
				}
				(*bd)[k] = n
			}
		}
	}
	return st, nil
}

// legacyAttrs returns the names of the old layout's statistics attributes
// on an item, sorted.
func legacyAttrs(item map[string]types.AttributeValue) []string {
	var out []string
	for name := range item {
		if name == AttrBots || slices.ContainsFunc(kindPrefix[:], func(p string) bool { return strings.HasPrefix(name, p) }) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// noticeLegacy queues a link whose item holds statistics of the old layout
// for migration, which the visit log's background work does once it runs
// (from the first batch of visits or statistics read on: a process that
// counts no visits moves nothing). The queue is bounded: a link not taken
// is queued again by its next read. Reads before the log runs are queued
// too, so the links a new instance reads first are not left for their
// next cache miss.
func (v *visitLog) noticeLegacy(id string, item map[string]types.AttributeValue) {
	if len(legacyAttrs(item)) == 0 {
		return
	}
	select {
	case v.migrations <- id:
	default:
	}
}

// migrateChunk bounds the attributes one migration transaction removes,
// to keep its update expression under DynamoDB's 4 KB.
const migrateChunk = 500

// migrateLegacy moves the statistics attributes of the old layout off a
// link's item into the visit log: a record holding them and the removal of
// the attributes, in one transaction (two for an item with more than
// migrateChunk of them), on condition that the item's visits attribute
// still holds the value read. Every write of the old layout adds to it, so
// a build of the old layout still running that counted visits meanwhile
// makes the move fail: nothing moves, and a later read tries again. A
// move costs one read and twice (transactions) the item's size plus the
// record's in write units, once.
func (s *Store) migrateLegacy(ctx context.Context, id string) error {
	item, err := s.getItem(ctx, id, true)
	if err != nil || item == nil {
		return err
	}
	attrs := legacyAttrs(item)
	if len(attrs) == 0 {
		return nil
	}
	created, err := integer(item, AttrCreatedAt)
	if err != nil {
		return err
	}
	now := s.visits.now()
	for len(attrs) > 0 {
		chunk := attrs[:min(migrateChunk, len(attrs))]
		attrs = attrs[len(chunk):]
		sub := map[string]types.AttributeValue{}
		names := map[string]string{"#id": AttrID, "#v": AttrVisits}
		var removes []string
		for i, a := range chunk {
			sub[a] = item[a]
			n := "#a" + strconv.Itoa(i)
			names[n] = a
			removes = append(removes, n)
		}
		cond := "attribute_exists(#id) AND attribute_not_exists(#v)"
		var values map[string]types.AttributeValue
		if v, ok := item[AttrVisits]; ok {
			cond, values = "attribute_exists(#id) AND #v = :v", map[string]types.AttributeValue{":v": v}
		}
		st, err := decodeStats(sub)
		if err != nil {
			return err
		}
		set := newDeltaSet()
		set.addStats(id, created, st, now)
		rec := &record{set: set, blobs: [][]byte{set.encode(nil)}}
		rec.bytes = len(rec.blobs[0])
		if rec.n, err = s.number(ctx, rec.bytes); err != nil {
			return err
		}
		hdr := headerItem(rec, s.visits.writer, now)
		tctx, cancel := context.WithTimeout(ctx, s.timeout)
		_, err = s.client.TransactWriteItems(tctx, &ddb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: &s.table, Item: hdr, ConditionExpression: aws.String("attribute_not_exists(" + AttrID + ")")}},
			{Update: &types.Update{
				TableName:                 &s.table,
				Key:                       key(id),
				UpdateExpression:          aws.String("REMOVE " + strings.Join(removes, ", ")),
				ConditionExpression:       aws.String(cond),
				ExpressionAttributeNames:  names,
				ExpressionAttributeValues: values,
			}},
		}})
		cancel()
		if err != nil {
			// The number taken stays uncommitted: the fold voids it.
			return s.fail("migrate visit counters of "+quote(id), err)
		}
		s.visits.migrated.Add(1)
	}
	return nil
}
