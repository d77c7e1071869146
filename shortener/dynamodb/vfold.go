package dynamodb

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/linkgate/linkgate/shortener"
)

// The fold merges log records into state items: per month, the month's
// statistics of every link, cut by the top bits of the id's hash into 2^k
// items (shards), so a reader of one link reads one item a month and the
// records not folded yet. k grows with the month's state (16 to 4096 items,
// about stateItemBytes each), as the fold item's month table records. The
// fold runs in whichever process holds the lease in the fold item, when
// the unfolded records add up to the size of the current month's state
// (so each byte of log costs about one byte of state rewritten), or number
// more than maxUnfolded, or are older than maxFoldAge.
//
// A fold first writes its target (the last record it folds) into the fold
// item, then rewrites the state items it touches, each stamped with the
// target (attribute u), then advances the fold item. A fold that stops
// half-way is resumed with the same target; items already stamped are
// skipped, so nothing is counted twice, and readers use each item's stamp
// to know which records it holds. A month whose state outgrew its shards is
// written with more, in full, by the next fold; its old items go at the one
// after.
// stateItemBytes is the size state items aim at (a variable for tests).
var stateItemBytes = 16 << 10

const (
	minShardBits, maxShardBits = 4, 12             // 16 to 4096 state items a month
	foldRanges                 = 1 << minShardBits // a fold works through the shards in this many steps
	foldCheckInterval          = time.Minute
	minFoldBytes               = 256 << 10
	maxUnfolded                = 512
	maxFoldAge                 = time.Hour
	maxFoldRecords             = 1024 // records one fold takes at most
	foldLease                  = time.Minute
	// chunkBytes bounds one state item's data (DynamoDB's limit is 400 KB
	// an item); a shard with more is cut into chunks.
	chunkBytes = 350 << 10
)

// shardOf returns the shard of an id's hash among 2^k.
func shardOf(h uint64, k int) int { return int(h >> (64 - k)) }

// rangeOf returns the fold range of an id's hash.
func rangeOf(h uint64) int { return shardOf(h, minShardBits) }

func stateKey(m int32, k, shard int) string {
	return fmt.Sprintf("%sv:s:%s:%d:%d", reservedPrefix, monthName(m), k, shard)
}

// chunkKey names chunk c (≥ 1) of a state item written by the fold of
// target upto; the item's first chunk is the item itself.
func chunkKey(k string, upto int64, c int) string {
	return k + "#" + strconv.FormatInt(upto, 10) + "#" + strconv.Itoa(c)
}

// monthMeta is the fold item's record of a month's state.
type monthMeta struct {
	k     int   // its state is in 2^k items
	bytes int64 // their bytes
	old   int   // an earlier k whose items are to be deleted; 0: none
}

// shardBits returns the k for a month of about bytes of state.
func shardBits(bytes int64) int {
	k := minShardBits
	for k < maxShardBits && bytes > int64(stateItemBytes)<<k {
		k++
	}
	return k
}

// encodeMonths and decodeMonths are the fold item's month table: per month,
// in order, uvarints month, k, bytes, old k.
func encodeMonths(ms map[int32]monthMeta) []byte {
	var keys []int32
	for m := range ms {
		keys = append(keys, m)
	}
	slices.Sort(keys)
	b := binary.AppendUvarint(nil, uint64(len(keys)))
	for _, m := range keys {
		mm := ms[m]
		for _, v := range []uint64{uint64(m), uint64(mm.k), uint64(mm.bytes), uint64(mm.old)} {
			b = binary.AppendUvarint(b, v)
		}
	}
	return b
}

func decodeMonths(b []byte) (map[int32]monthMeta, error) {
	out := map[int32]monthMeta{}
	if len(b) == 0 {
		return out, nil
	}
	r := reader{b: b}
	n := r.uvarint()
	for range min(n, uint64(len(b))) {
		m, k, bytes, old := r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint()
		if r.err != nil || m > 1<<20 || k > maxShardBits || old > maxShardBits || bytes > 1<<50 {
			return nil, errCorrupt
		}
		out[int32(m)] = monthMeta{k: int(k), bytes: int64(bytes), old: int(old)}
	}
	if r.err != nil || len(r.b) != 0 {
		return nil, errCorrupt
	}
	return out, nil
}

// foldState is the fold item.
type foldState struct {
	folded, bytes, target, foldedAt int64
	months                          map[int32]monthMeta
	owner                           string
	lease                           int64
}

func decodeFold(item map[string]types.AttributeValue) (foldState, error) {
	var f foldState
	f.folded, _ = integer(item, attrN)
	f.bytes, _ = integer(item, attrBytes)
	f.target, _ = integer(item, attrTarget)
	f.foldedAt, _ = integer(item, attrFoldedA)
	f.owner, _ = str(item, attrOwner)
	f.lease, _ = integer(item, attrLease)
	var b []byte
	if d, ok := item[attrMonths].(*types.AttributeValueMemberB); ok {
		b = d.Value
	}
	var err error
	if f.months, err = decodeMonths(b); err != nil {
		return f, fmt.Errorf("visit fold item: month table: %w", err)
	}
	return f, nil
}

// FoldResult says what one fold did.
type FoldResult struct {
	Records     int   // records folded
	Items       int   // state items written
	StateBytes  int64 // their bytes
	Through     int64 // the log is folded through this record
	Unavailable bool  // another process holds the lease
}

// foldIfDue folds when the log has grown enough (see above).
func (v *visitLog) foldIfDue(ctx context.Context, now time.Time) (FoldResult, error) {
	items, err := v.s.batchGet(ctx, []string{keySeq, keyFold}, true)
	if err != nil {
		return FoldResult{}, err
	}
	numbered, _ := integer(items[keySeq], attrN)
	numberedBytes, _ := integer(items[keySeq], attrBytes)
	f, err := decodeFold(items[keyFold])
	if err != nil {
		return FoldResult{}, err
	}
	unfolded, unfoldedBytes := numbered-f.folded, numberedBytes-f.bytes
	if unfolded <= 0 {
		return FoldResult{Through: f.folded}, nil
	}
	// The age of the log: since the last fold, or the first record.
	since := f.foldedAt
	if since == 0 {
		h, err := v.s.getItem(ctx, recordKey(f.folded+1), true)
		if err != nil {
			return FoldResult{}, err
		}
		if since, _ = integer(h, attrTime); since == 0 {
			since = now.Unix()
		}
	}
	due := unfoldedBytes >= max(f.months[monthOfTime(now)].bytes, minFoldBytes) || unfolded >= maxUnfolded ||
		now.Sub(time.Unix(since, 0)) >= maxFoldAge || f.target > f.folded
	if !due {
		return FoldResult{Through: f.folded}, nil
	}
	return v.fold(ctx, now)
}

// fold folds the committed records after the fold item's mark, up to
// maxFoldRecords of them.
func (v *visitLog) fold(ctx context.Context, now time.Time) (FoldResult, error) {
	v.foldMu.Lock()
	defer v.foldMu.Unlock()
	f, ok, err := v.s.lease(ctx, v.writer, now)
	if err != nil || !ok {
		return FoldResult{Unavailable: !ok}, err
	}
	leased := now // the lease runs until leased + foldLease
	res := FoldResult{Through: f.folded}
	target := f.target
	if target <= f.folded {
		if target, err = v.settled(ctx, f.folded, now); err != nil {
			return res, err
		}
		if target == f.folded {
			return res, v.s.releaseLease(ctx, v.writer)
		}
		if err := v.s.setTarget(ctx, v.writer, f.folded, target); err != nil {
			return res, err
		}
	}
	headers, err := v.s.headers(ctx, f.folded+1, target)
	if err != nil {
		return res, err
	}
	var logBytes int64
	for _, h := range headers {
		logBytes += h.bytes
	}
	// The old items of months that moved to more shards at the last fold.
	months := maps.Clone(f.months)
	for m, mm := range months {
		if mm.old != 0 {
			if err := v.s.deleteShards(ctx, m, mm.old); err != nil {
				return res, err
			}
			mm.old = 0
			months[m] = mm
		}
	}
	p := &foldPlan{old: f.months, months: months, logBytes: logBytes, dayAfter: dayAfter(now)}
	// A month that outgrew its shards is spread over more in every range:
	// planned before the first, not at its first row, or the ranges before
	// that row would leave their links in the old items, which the month
	// table no longer names (TestFoldSpreadsAGrowingMonth lost visits so).
	for m, mm := range f.months {
		if shardBits(mm.bytes) > mm.k {
			p.month(m)
		}
	}
	small := map[int64]*deltaSet{} // parts of small records span several ranges: read them once
	for r := range foldRanges {
		// The lease is renewed before a range once half of it has
		// passed, so a range starts with at least half a lease left; a
		// renewal is a write, and most folds take seconds (renewing
		// before every range was 15 of the fold's 20 writes to the fold
		// item in make bench-dynamodb's runs).
		if now := v.now(); now.After(leased.Add(foldLease / 2)) {
			if _, ok, err := v.s.lease(ctx, v.writer, now); err != nil || !ok {
				return res, errors.Join(errors.New("fold lease lost"), err)
			}
			leased = now
		}
		set, err := v.s.rangeDeltas(ctx, headers, r, small)
		if err != nil {
			return res, err
		}
		items, bytes, err := v.s.foldRange(ctx, p, set, r, f.folded, target)
		if err != nil {
			return res, err
		}
		res.Items += items
		res.StateBytes += bytes
		if v.foldHook != nil {
			if err := v.foldHook(r); err != nil {
				return res, err
			}
		}
	}
	if err := v.s.finishFold(ctx, v.writer, f.folded, target, f.bytes+logBytes, months, v.now()); err != nil {
		return res, err
	}
	v.folds.Add(1)
	for n := range v.missing {
		if n <= target {
			delete(v.missing, n)
		}
	}
	res.Records, res.Through = len(headers), target
	return res, nil
}

// foldPlan is what a fold decides per month: in how many shards it writes
// it (2^k), and what it wrote.
type foldPlan struct {
	old, months map[int32]monthMeta // as the fold found them, as it leaves them
	logBytes    int64
	planned     map[int32]bool
	dayAfter    int32 // hours before it are kept by day (deltaSet.bound)
}

// dayAfter returns the first hour whose counts the fold keeps by hour at
// now: a day beyond shortener.HourRetention.
func dayAfter(now time.Time) int32 {
	return int32(shortener.HourStart(now).Add(-shortener.HourRetention-24*time.Hour).Unix() / 3600)
}

// month returns the k a month is written with in this fold, and its k
// before (0: it has no state yet). A month keeps its k until its state
// outgrew it; a new month starts with the k of the month before, or one
// fitting this fold's records.
func (p *foldPlan) month(m int32) (k, oldK int) {
	old := p.old[m]
	if p.planned[m] {
		return p.months[m].k, old.k
	}
	if p.planned == nil {
		p.planned = map[int32]bool{}
	}
	p.planned[m] = true
	k = shardBits(p.logBytes)
	switch prev, ok := p.old[m-1]; {
	case old.k != 0:
		k = max(old.k, shardBits(old.bytes))
	case ok:
		k = prev.k
	}
	mm := p.months[m]
	if k != old.k {
		mm.bytes = 0 // every item is written again
		if old.k != 0 {
			mm.old = old.k
		}
	}
	mm.k = k
	p.months[m] = mm
	return k, old.k
}

// settled returns the last record after folded, at most maxFoldRecords
// later, up to which every number is committed or voided. A number
// uncommitted for recordGrace is voided here.
func (v *visitLog) settled(ctx context.Context, folded int64, now time.Time) (int64, error) {
	seq, err := v.s.getItem(ctx, keySeq, true)
	if err != nil {
		return folded, err
	}
	numbered, _ := integer(seq, attrN)
	last := min(numbered, folded+maxFoldRecords)
	var keys []string
	for n := folded + 1; n <= last; n++ {
		keys = append(keys, recordKey(n))
	}
	items, err := v.s.batchGet(ctx, keys, true)
	if err != nil {
		return folded, err
	}
	t := folded
	for n := folded + 1; n <= last; n++ {
		if items[recordKey(n)] != nil {
			t = n
			continue
		}
		since, seen := v.missing[n]
		if !seen {
			v.missing[n] = now
			break
		}
		if now.Sub(since) < recordGrace {
			break
		}
		if err := v.s.void(ctx, n, now); err != nil {
			return t, err
		}
		t = n
	}
	return t, nil
}

// void writes a void header for number n unless it was committed
// meanwhile (either way the number is settled).
func (s *Store) void(ctx context.Context, n int64, now time.Time) error {
	_, err := s.put(ctx, "void visit record", &ddb.PutItemInput{
		Item: map[string]types.AttributeValue{
			AttrID:        &types.AttributeValueMemberS{Value: recordKey(n)},
			attrVoid:      &types.AttributeValueMemberBOOL{Value: true},
			AttrExpiresAt: number(now.Add(recordTTL).Unix()),
		},
		ConditionExpression: aws.String("attribute_not_exists(" + AttrID + ")"),
	})
	return err
}

// header is a committed record's header.
type header struct {
	n     int64
	parts int
	bytes int64
	data  []byte // the record's data when it has one part
	void  bool
}

func decodeHeader(n int64, item map[string]types.AttributeValue) header {
	h := header{n: n}
	if _, ok := item[attrVoid]; ok {
		h.void = true
		return h
	}
	p, _ := integer(item, attrParts)
	h.parts = int(max(p, 1))
	h.bytes, _ = integer(item, attrBytes)
	if d, ok := item[attrData].(*types.AttributeValueMemberB); ok {
		h.data = d.Value
	}
	return h
}

// headers reads the headers of records from through to, which are all
// settled; void ones are left out.
func (s *Store) headers(ctx context.Context, from, to int64) ([]header, error) {
	var keys []string
	for n := from; n <= to; n++ {
		keys = append(keys, recordKey(n))
	}
	items, err := s.batchGet(ctx, keys, true)
	if err != nil {
		return nil, err
	}
	var out []header
	for n := from; n <= to; n++ {
		// A settled number without a header: deleted by hand, or expired
		// (records live recordTTL). Nothing to fold.
		if item := items[recordKey(n)]; item != nil {
			if h := decodeHeader(n, item); !h.void {
				out = append(out, h)
			}
		}
	}
	return out, nil
}

// rangeDeltas returns the rows of the records whose ids fall in fold range
// r. Parts that cover several ranges are decoded once, into small.
func (s *Store) rangeDeltas(ctx context.Context, headers []header, r int, small map[int64]*deltaSet) (*deltaSet, error) {
	out := newDeltaSet()
	var keys []string
	cached := map[string]int64{} // part key → its key in small, for parts that cover several ranges
	for _, h := range headers {
		switch {
		case h.parts == 1:
			set, ok := small[h.n*maxParts]
			if !ok {
				set = newDeltaSet()
				if err := set.decodeInto(h.data); err != nil {
					return nil, fmt.Errorf("visit record %d: %w", h.n, err)
				}
				small[h.n*maxParts] = set
			}
			addRange(out, set, r)
		case h.parts < foldRanges:
			p := r * h.parts / foldRanges
			if set, ok := small[h.n*maxParts+int64(p)]; ok {
				addRange(out, set, r)
				continue
			}
			k := partKey(h.n, p)
			keys = append(keys, k)
			cached[k] = h.n*maxParts + int64(p)
		default:
			per := h.parts / foldRanges
			for p := r * per; p < (r+1)*per; p++ {
				keys = append(keys, partKey(h.n, p))
			}
		}
	}
	items, err := s.batchGet(ctx, keys, true)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		item := items[k]
		if item == nil {
			continue // a part without rows is not written
		}
		d, _ := item[attrData].(*types.AttributeValueMemberB)
		if d == nil {
			return nil, fmt.Errorf("visit record part %s has no data", k)
		}
		set := newDeltaSet()
		if err := set.decodeInto(d.Value); err != nil {
			return nil, fmt.Errorf("visit record part %s: %w", k, err)
		}
		if c, ok := cached[k]; ok {
			small[c] = set
		}
		addRange(out, set, r)
	}
	return out, nil
}

// addRange adds the rows of set whose ids fall in fold range r to out.
func addRange(out, set *deltaSet, r int) {
	for i := range set.rows {
		if row := &set.rows[i]; rangeOf(keyHash(row.ID)) == r {
			out.addRow(set, row)
		}
	}
}

// foldRange merges the rows of one fold range (the records after folded,
// through target) into their state items, stamped with target. It returns
// the items and bytes it wrote.
func (s *Store) foldRange(ctx context.Context, p *foldPlan, rows *deltaSet, r int, folded, target int64) (int, int64, error) {
	type item struct {
		month int32
		rows  []int     // rows of rows
		set   *deltaSet // rows of old items, for a month spread over more shards
	}
	byKey := map[string]*item{}
	var order []string
	touch := func(k string, m int32) *item {
		it := byKey[k]
		if it == nil {
			it = &item{month: m}
			byKey[k] = it
			order = append(order, k)
		}
		return it
	}
	for i := range rows.rows {
		row := &rows.rows[i]
		k, _ := p.month(row.Month)
		it := touch(stateKey(row.Month, k, shardOf(keyHash(row.ID), k)), row.Month)
		it.rows = append(it.rows, i)
	}
	// A month written with more shards than before is written in full:
	// every item of the range, from every old item of the range.
	var spread []string
	for m := range p.planned {
		k, oldK := p.month(m)
		if oldK == 0 || oldK == k {
			continue
		}
		per := 1 << (oldK - minShardBits)
		for sh := r * per; sh < (r+1)*per; sh++ {
			spread = append(spread, stateKey(m, oldK, sh))
		}
	}
	old, err := s.readState(ctx, spread)
	if err != nil {
		return 0, 0, err
	}
	for _, ok := range spread {
		st := old[ok]
		if st.upto > folded {
			return 0, 0, fmt.Errorf("visit state %s, being spread over more shards, holds records through %d, after the fold's start %d", ok, st.upto, folded)
		}
		for i := range st.set.rows {
			row := &st.set.rows[i]
			k, _ := p.month(row.Month)
			it := touch(stateKey(row.Month, k, shardOf(keyHash(row.ID), k)), row.Month)
			if it.set == nil {
				it.set = newDeltaSet()
			}
			it.set.addRow(st.set, row)
		}
	}
	current, err := s.readState(ctx, order)
	if err != nil {
		return 0, 0, err
	}
	var (
		mu           sync.Mutex
		items, total int64
	)
	err = inParallel(len(order), func(i int) error {
		k := order[i]
		it, st := byKey[k], current[k]
		switch {
		case st.upto >= target:
			return nil // written by an earlier attempt at this fold
		case st.upto > folded:
			return fmt.Errorf("visit state %s holds records through %d, between the fold's start %d and target %d", k, st.upto, folded, target)
		}
		set := st.set
		if it.set != nil {
			set.addAll(it.set)
		}
		for _, i := range it.rows {
			set.addRow(rows, &rows.rows[i])
		}
		set = compact(set, p.dayAfter)
		n, err := s.writeState(ctx, k, set, st, target)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		mm := p.months[it.month]
		mm.bytes += int64(n - st.bytes)
		p.months[it.month] = mm
		items++
		total += int64(n)
		return nil
	})
	return int(items), total, err
}

// deleteShards deletes the state items of month m written with 2^k shards
// (and their chunks).
func (s *Store) deleteShards(ctx context.Context, m int32, k int) error {
	var keys []string
	for sh := range 1 << k {
		keys = append(keys, stateKey(m, k, sh))
	}
	old, err := s.readState(ctx, keys)
	if err != nil {
		return err
	}
	var reqs []types.WriteRequest
	for _, k := range keys {
		st := old[k]
		if !st.exists {
			continue
		}
		reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: key(k)}})
		for c := 1; c <= st.chunks; c++ {
			reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: key(chunkKey(k, st.upto, c))}})
		}
	}
	return s.batchWrite(ctx, reqs, "delete old visit state")
}

// compact returns set with each link's rows of earlier links under its id
// dropped (a link deleted and created again starts from zero), and every
// row bounded (hours before dayAfter by day).
func compact(set *deltaSet, dayAfter int32) *deltaSet {
	latest := map[string]int64{}
	for i := range set.rows {
		r := &set.rows[i]
		latest[r.ID] = max(latest[r.ID], r.CreatedAt)
	}
	out := newDeltaSet()
	for i := range set.rows {
		r := &set.rows[i]
		if r.CreatedAt != 0 && r.CreatedAt < latest[r.ID] {
			continue
		}
		out.addRow(set, r)
	}
	for i := range out.rows {
		out.bound(&out.rows[i], dayAfter)
	}
	return out
}

// state is a state item as read.
type state struct {
	set    *deltaSet
	upto   int64
	chunks int
	bytes  int
	exists bool
}

// readState reads state items and their chunks.
func (s *Store) readState(ctx context.Context, keys []string) (map[string]state, error) {
	items, err := s.batchGet(ctx, keys, true)
	if err != nil {
		return nil, err
	}
	out := make(map[string]state, len(keys))
	var more []string
	for _, k := range keys {
		st := state{set: newDeltaSet()}
		if item := items[k]; item != nil {
			st.exists = true
			st.upto, _ = integer(item, attrUpto)
			c, _ := integer(item, attrChunks)
			st.chunks = int(c)
			if d, ok := item[attrData].(*types.AttributeValueMemberB); ok {
				st.bytes = len(d.Value)
				if err := st.set.decodeInto(d.Value); err != nil {
					return nil, fmt.Errorf("visit state %s: %w", k, err)
				}
			}
			for c := 1; c <= st.chunks; c++ {
				more = append(more, chunkKey(k, st.upto, c))
			}
		}
		out[k] = st
	}
	if len(more) == 0 {
		return out, nil
	}
	chunks, err := s.batchGet(ctx, more, true)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		st := out[k]
		for c := 1; c <= st.chunks; c++ {
			ck := chunkKey(k, st.upto, c)
			d, ok := chunks[ck][attrData].(*types.AttributeValueMemberB)
			if !ok {
				return nil, fmt.Errorf("visit state %s: chunk %d is missing", k, c)
			}
			st.bytes += len(d.Value)
			if err := st.set.decodeInto(d.Value); err != nil {
				return nil, fmt.Errorf("visit state %s chunk %d: %w", k, c, err)
			}
		}
		out[k] = st
	}
	return out, nil
}

// writeState writes a state item holding set, stamped upto, in chunks of
// at most chunkBytes, on condition that it still holds what was read
// (old). It returns the bytes written. The chunks beyond the first are
// written first under names of their own, so a reader sees either the old
// item and its chunks or the new ones; the old chunks are deleted after.
func (s *Store) writeState(ctx context.Context, k string, set *deltaSet, old state, upto int64) (int, error) {
	var chunks [][]byte
	if b := set.encode(nil); len(b) <= chunkBytes {
		chunks = [][]byte{b}
	} else {
		n := len(b)/chunkBytes + 1
		for c := range n {
			chunks = append(chunks, set.encode(func(r *row) bool { return int(keyHash(r.ID)%uint64(n)) == c }))
		}
	}
	total := 0
	var reqs []types.WriteRequest
	for c := 1; c < len(chunks); c++ {
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
			AttrID:   &types.AttributeValueMemberS{Value: chunkKey(k, upto, c)},
			attrData: &types.AttributeValueMemberB{Value: chunks[c]},
		}}})
		total += len(chunks[c])
	}
	if err := s.batchWrite(ctx, reqs, "write visit state chunks"); err != nil {
		return 0, err
	}
	total += len(chunks[0])
	cond := "attribute_not_exists(" + AttrID + ")"
	values := map[string]types.AttributeValue{}
	if old.exists {
		cond = "#u = :old"
		values[":old"] = number(old.upto)
	}
	item := map[string]types.AttributeValue{
		AttrID:   &types.AttributeValueMemberS{Value: k},
		attrData: &types.AttributeValueMemberB{Value: chunks[0]},
		attrUpto: number(upto),
	}
	if len(chunks) > 1 {
		item[attrChunks] = number(int64(len(chunks) - 1))
	}
	in := &ddb.PutItemInput{Item: item, ConditionExpression: aws.String(cond)}
	if old.exists {
		in.ExpressionAttributeNames = map[string]string{"#u": attrUpto}
		in.ExpressionAttributeValues = values
	}
	switch refused, err := s.put(ctx, "write visit state", in); {
	case err != nil:
		return 0, err
	case refused:
		return 0, fmt.Errorf("visit state %s: another fold wrote it meanwhile (this one is retried later)", k)
	}
	var del []types.WriteRequest
	for c := 1; c <= old.chunks; c++ {
		del = append(del, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: key(chunkKey(k, old.upto, c))}})
	}
	return total, s.batchWrite(ctx, del, "delete old visit state chunks")
}

// lease takes or renews the fold lease for owner; ok is false when another
// owner holds it. It returns the fold item.
func (s *Store) lease(ctx context.Context, owner string, now time.Time) (foldState, bool, error) {
	attrs, refused, err := s.update(ctx, "take the visit fold lease", &ddb.UpdateItemInput{
		Key:                       key(keyFold),
		UpdateExpression:          aws.String("SET #o = :me, #l = :until"),
		ConditionExpression:       aws.String("attribute_not_exists(#o) OR #o = :me OR #l < :now"),
		ExpressionAttributeNames:  map[string]string{"#o": attrOwner, "#l": attrLease},
		ExpressionAttributeValues: map[string]types.AttributeValue{":me": &types.AttributeValueMemberS{Value: owner}, ":until": number(now.Add(foldLease).UnixMilli()), ":now": number(now.UnixMilli())},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil || refused {
		return foldState{}, false, err
	}
	f, err := decodeFold(attrs)
	return f, err == nil, err
}

func (s *Store) releaseLease(ctx context.Context, owner string) error {
	_, _, err := s.update(ctx, "release the visit fold lease", &ddb.UpdateItemInput{
		Key:                       key(keyFold),
		UpdateExpression:          aws.String("REMOVE #o, #l"),
		ConditionExpression:       aws.String("#o = :me"),
		ExpressionAttributeNames:  map[string]string{"#o": attrOwner, "#l": attrLease},
		ExpressionAttributeValues: map[string]types.AttributeValue{":me": &types.AttributeValueMemberS{Value: owner}},
	})
	return err
}

// setTarget records the fold's target before it writes any state item.
func (s *Store) setTarget(ctx context.Context, owner string, folded, target int64) error {
	_, refused, err := s.update(ctx, "start a visit fold", &ddb.UpdateItemInput{
		Key:                       key(keyFold),
		UpdateExpression:          aws.String("SET #g = :t"),
		ConditionExpression:       aws.String("#o = :me AND (attribute_not_exists(#n) OR #n = :f)"),
		ExpressionAttributeNames:  map[string]string{"#g": attrTarget, "#o": attrOwner, "#n": attrN},
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": number(target), ":me": &types.AttributeValueMemberS{Value: owner}, ":f": number(folded)},
	})
	if refused {
		return errors.New("start a visit fold: the lease was lost")
	}
	return err
}

// finishFold advances the fold item past target, records its month
// table, and releases the lease.
func (s *Store) finishFold(ctx context.Context, owner string, folded, target, bytes int64, months map[int32]monthMeta, now time.Time) error {
	_, refused, err := s.update(ctx, "finish a visit fold", &ddb.UpdateItemInput{
		Key:                 key(keyFold),
		UpdateExpression:    aws.String("SET #n = :t, #b = :b, #m = :m, #a = :a REMOVE #g, #o, #l"),
		ConditionExpression: aws.String("#o = :me AND (attribute_not_exists(#n) OR #n = :f)"),
		ExpressionAttributeNames: map[string]string{"#n": attrN, "#b": attrBytes, "#m": attrMonths, "#a": attrFoldedA,
			"#g": attrTarget, "#o": attrOwner, "#l": attrLease},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t": number(target), ":b": number(bytes), ":m": &types.AttributeValueMemberB{Value: encodeMonths(months)},
			":a": number(now.Unix()), ":me": &types.AttributeValueMemberS{Value: owner}, ":f": number(folded),
		},
	})
	if refused {
		return errors.New("finish a visit fold: the lease was lost")
	}
	return err
}

// batchGet reads items, 100 per BatchGetItem, up to callsInFlight calls
// at once, retrying unprocessed keys. Missing items are absent from the
// map.
func (s *Store) batchGet(ctx context.Context, keys []string, consistent bool) (map[string]map[string]types.AttributeValue, error) {
	out := make(map[string]map[string]types.AttributeValue, len(keys))
	var mu sync.Mutex
	seen := map[string]bool{}
	var unique []string
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			unique = append(unique, k)
		}
	}
	err := inParallel((len(unique)+99)/100, func(i int) error {
		var pending []map[string]types.AttributeValue
		for _, k := range unique[i*100 : min(len(unique), (i+1)*100)] {
			pending = append(pending, key(k))
		}
		for attempt := 0; len(pending) > 0; attempt++ {
			if attempt > 0 {
				select {
				case <-ctx.Done():
					return s.fail("read visit statistics", ctx.Err())
				case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
				}
			}
			cctx, cancel := context.WithTimeout(ctx, s.timeout)
			res, err := s.client.BatchGetItem(cctx, &ddb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				s.table: {Keys: pending, ConsistentRead: &consistent},
			}})
			cancel()
			if err != nil {
				return s.fail("read visit statistics", err)
			}
			mu.Lock()
			for _, item := range res.Responses[s.table] {
				if k, ok := item[AttrID].(*types.AttributeValueMemberS); ok {
					out[k.Value] = item
				}
			}
			mu.Unlock()
			pending = res.UnprocessedKeys[s.table].Keys
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
