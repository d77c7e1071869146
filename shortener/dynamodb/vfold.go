package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The fold merges log records into state items: per state shard (the top
// bits of the id's hash) and month, one item holding the statistics of
// its links for that month, so a reader of one link reads a few state
// items and the records not folded yet. It runs in whichever process holds
// the lease in the fold item, when the unfolded records add up to the
// size of the current month's state (so each byte of log costs about one
// byte of state rewritten), or number more than maxUnfolded, or are older
// than maxFoldAge.
//
// A fold first writes its target (the last record it folds) into the fold
// item, then rewrites the state items it touches, each stamped with the
// target (attribute u), then advances the fold item. A fold that stops
// half-way is resumed with the same target; items already stamped are
// skipped, so nothing is counted twice, and readers use each item's stamp
// to know which records it holds.
const (
	stateShards       = 1024 // state items per month; part of the table format
	foldRanges        = 16   // a fold works through the shards in this many steps
	foldCheckInterval = time.Minute
	minFoldBytes      = 1 << 20
	maxUnfolded       = 512
	maxFoldAge        = time.Hour
	maxFoldRecords    = 1024 // records one fold takes at most
	foldLease         = time.Minute
	// chunkBytes bounds one state item's data (DynamoDB's limit is 400 KB
	// an item); a shard-month with more is cut into chunks.
	chunkBytes = 350 << 10
)

func shardOf(h uint64) int { return int(h >> 54) } // the top 10 bits: stateShards

func stateKey(shard int, m int32) string {
	return fmt.Sprintf("%sv:s:%04d:%s", reservedPrefix, shard, monthName(m))
}

// chunkKey names chunk c (≥ 1) of a state item written by the fold of
// target upto; the item's first chunk is the item itself.
func chunkKey(k string, upto int64, c int) string {
	return k + "#" + strconv.FormatInt(upto, 10) + "#" + strconv.Itoa(c)
}

// foldState is the fold item.
type foldState struct {
	folded, bytes, target, stateBytes, foldedAt int64
	first                                       int32 // earliest month with state; -1: none
	owner                                       string
	lease                                       int64
}

func decodeFold(item map[string]types.AttributeValue) foldState {
	var f foldState
	f.folded, _ = integer(item, attrN)
	f.bytes, _ = integer(item, attrBytes)
	f.target, _ = integer(item, attrTarget)
	f.stateBytes, _ = integer(item, attrState)
	f.foldedAt, _ = integer(item, attrFoldedA)
	first, _ := integer(item, attrFirst)
	f.first = int32(first) - 1
	f.owner, _ = str(item, attrOwner)
	f.lease, _ = integer(item, attrLease)
	return f
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
	f := decodeFold(items[keyFold])
	unfolded, unfoldedBytes := numbered-f.folded, numberedBytes-f.bytes
	due := unfolded > 0 && (unfoldedBytes >= max(f.stateBytes, minFoldBytes) || unfolded >= maxUnfolded ||
		now.Sub(time.Unix(f.foldedAt, 0)) >= maxFoldAge || f.target > f.folded)
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
	// Parts of small records span several ranges: read them once.
	small := map[int64]*deltaSet{}
	stateBytes, first := f.stateBytes, f.first
	current := monthOfTime(now)
	if f.foldedAt > 0 && monthOfTime(time.Unix(f.foldedAt, 0)) != current {
		stateBytes = 0 // a new month: its state starts empty
	}
	for r := range foldRanges {
		if r > 0 {
			if _, ok, err := v.s.lease(ctx, v.writer, v.now()); err != nil || !ok {
				return res, errors.Join(errors.New("fold lease lost"), err)
			}
		}
		set, err := v.s.rangeDeltas(ctx, headers, r, small)
		if err != nil {
			return res, err
		}
		written, err := v.s.foldRange(ctx, set, f.folded, target)
		if err != nil {
			return res, err
		}
		if v.foldHook != nil {
			if err := v.foldHook(r); err != nil {
				return res, err
			}
		}
		for _, w := range written {
			res.Items++
			res.StateBytes += int64(w.bytes)
			if w.month == current {
				stateBytes += int64(w.bytes - w.oldBytes)
			}
			if first < 0 || w.month < first {
				first = w.month
			}
		}
	}
	if err := v.s.finishFold(ctx, v.writer, f.folded, target, f.bytes+logBytes, stateBytes, first, v.now()); err != nil {
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
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.client.PutItem(ctx, &ddb.PutItemInput{
		TableName: &s.table,
		Item: map[string]types.AttributeValue{
			AttrID:        &types.AttributeValueMemberS{Value: recordKey(n)},
			attrVoid:      &types.AttributeValueMemberBOOL{Value: true},
			AttrExpiresAt: number(now.Add(recordTTL).Unix()),
		},
		ConditionExpression: aws.String("attribute_not_exists(" + AttrID + ")"),
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return s.fail("void visit record", err)
	}
	return nil
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
		if row := &set.rows[i]; shardOf(keyHash(row.ID))*foldRanges/stateShards == r {
			out.addRow(set, row)
		}
	}
}

// written is one state item a fold wrote.
type written struct {
	month           int32
	bytes, oldBytes int
}

// foldRange merges the rows of one fold range (the records after folded,
// through target) into their state items, stamped with target.
func (s *Store) foldRange(ctx context.Context, rows *deltaSet, folded, target int64) ([]written, error) {
	type item struct {
		shard int
		month int32
		rows  []int
	}
	byKey := map[string]*item{}
	var order []string
	for i := range rows.rows {
		row := &rows.rows[i]
		k := stateKey(shardOf(keyHash(row.ID)), row.Month)
		it := byKey[k]
		if it == nil {
			it = &item{shard: shardOf(keyHash(row.ID)), month: row.Month}
			byKey[k] = it
			order = append(order, k)
		}
		it.rows = append(it.rows, i)
	}
	old, err := s.readState(ctx, order)
	if err != nil {
		return nil, err
	}
	var out []written
	for _, k := range order {
		it, st := byKey[k], old[k]
		switch {
		case st.upto >= target:
			continue // done by an earlier attempt at this fold
		case st.upto > folded:
			return out, fmt.Errorf("visit state %s holds records through %d, between the fold's start %d and target %d", k, st.upto, folded, target)
		}
		set := st.set
		for _, i := range it.rows {
			set.addRow(rows, &rows.rows[i])
		}
		set = compact(set)
		n, err := s.writeState(ctx, k, set, st, target)
		if err != nil {
			return out, err
		}
		out = append(out, written{month: it.month, bytes: n, oldBytes: st.bytes})
	}
	return out, nil
}

// compact returns set with each link's rows of earlier links under its id
// dropped (a link deleted and created again starts from zero), and every
// row bounded.
func compact(set *deltaSet) *deltaSet {
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
		out.bound(&out.rows[i])
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
	in := &ddb.PutItemInput{
		TableName: &s.table, Item: item, ConditionExpression: aws.String(cond),
	}
	if old.exists {
		in.ExpressionAttributeNames = map[string]string{"#u": attrUpto}
		in.ExpressionAttributeValues = values
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	_, err := s.client.PutItem(cctx, in)
	cancel()
	if err != nil {
		return 0, s.fail("write visit state", err) // a condition that failed: another fold got there; retried later
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
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.client.UpdateItem(ctx, &ddb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       key(keyFold),
		UpdateExpression:          aws.String("SET #o = :me, #l = :until"),
		ConditionExpression:       aws.String("attribute_not_exists(#o) OR #o = :me OR #l < :now"),
		ExpressionAttributeNames:  map[string]string{"#o": attrOwner, "#l": attrLease},
		ExpressionAttributeValues: map[string]types.AttributeValue{":me": &types.AttributeValueMemberS{Value: owner}, ":until": number(now.Add(foldLease).UnixMilli()), ":now": number(now.UnixMilli())},
		ReturnValues:              types.ReturnValueAllNew,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return foldState{}, false, nil
	}
	if err != nil {
		return foldState{}, false, s.fail("take the visit fold lease", err)
	}
	return decodeFold(out.Attributes), true, nil
}

func (s *Store) releaseLease(ctx context.Context, owner string) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.client.UpdateItem(ctx, &ddb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       key(keyFold),
		UpdateExpression:          aws.String("REMOVE #o, #l"),
		ConditionExpression:       aws.String("#o = :me"),
		ExpressionAttributeNames:  map[string]string{"#o": attrOwner, "#l": attrLease},
		ExpressionAttributeValues: map[string]types.AttributeValue{":me": &types.AttributeValueMemberS{Value: owner}},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return s.fail("release the visit fold lease", err)
	}
	return nil
}

// setTarget records the fold's target before it writes any state item.
func (s *Store) setTarget(ctx context.Context, owner string, folded, target int64) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.client.UpdateItem(ctx, &ddb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       key(keyFold),
		UpdateExpression:          aws.String("SET #g = :t"),
		ConditionExpression:       aws.String("#o = :me AND (attribute_not_exists(#n) OR #n = :f)"),
		ExpressionAttributeNames:  map[string]string{"#g": attrTarget, "#o": attrOwner, "#n": attrN},
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": number(target), ":me": &types.AttributeValueMemberS{Value: owner}, ":f": number(folded)},
	})
	if err != nil {
		return s.fail("start a visit fold", err)
	}
	return nil
}

// finishFold advances the fold item past target and releases the lease.
func (s *Store) finishFold(ctx context.Context, owner string, folded, target, bytes, stateBytes int64, first int32, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	names := map[string]string{"#n": attrN, "#b": attrBytes, "#s": attrState, "#a": attrFoldedA, "#g": attrTarget, "#o": attrOwner, "#l": attrLease}
	values := map[string]types.AttributeValue{
		":t": number(target), ":b": number(bytes), ":s": number(max(stateBytes, 0)), ":a": number(now.Unix()),
		":me": &types.AttributeValueMemberS{Value: owner}, ":f": number(folded),
	}
	expr := "SET #n = :t, #b = :b, #s = :s, #a = :a"
	if first >= 0 {
		names["#f"] = attrFirst
		values[":first"] = number(int64(first) + 1)
		expr += ", #f = :first"
	}
	_, err := s.client.UpdateItem(ctx, &ddb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       key(keyFold),
		UpdateExpression:          aws.String(expr + " REMOVE #g, #o, #l"),
		ConditionExpression:       aws.String("#o = :me AND (attribute_not_exists(#n) OR #n = :f)"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	if err != nil {
		return s.fail("finish a visit fold", err)
	}
	return nil
}

// batchGet reads items, 100 per BatchGetItem, retrying unprocessed keys.
// Missing items are absent from the map.
func (s *Store) batchGet(ctx context.Context, keys []string, consistent bool) (map[string]map[string]types.AttributeValue, error) {
	out := make(map[string]map[string]types.AttributeValue, len(keys))
	seen := map[string]bool{}
	for len(keys) > 0 {
		n := min(len(keys), 100)
		var pending []map[string]types.AttributeValue
		for _, k := range keys[:n] {
			if !seen[k] {
				seen[k] = true
				pending = append(pending, key(k))
			}
		}
		keys = keys[n:]
		for attempt := 0; len(pending) > 0; attempt++ {
			if attempt > 0 {
				select {
				case <-ctx.Done():
					return nil, s.fail("read visit statistics", ctx.Err())
				case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
				}
			}
			cctx, cancel := context.WithTimeout(ctx, s.timeout)
			res, err := s.client.BatchGetItem(cctx, &ddb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				s.table: {Keys: pending, ConsistentRead: &consistent},
			}})
			cancel()
			if err != nil {
				return nil, s.fail("read visit statistics", err)
			}
			for _, item := range res.Responses[s.table] {
				if k, ok := item[AttrID].(*types.AttributeValueMemberS); ok {
					out[k.Value] = item
				}
			}
			pending = res.UnprocessedKeys[s.table].Keys
		}
	}
	return out, nil
}
