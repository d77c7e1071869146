package dynamodb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The visit log: how visits reach the table (docs/dynamodb.md, "Visit
// statistics"). AddVisits keeps the visits of links without a visit limit
// in memory, in one deltaSet; every VisitInterval (or sooner, when the set
// is large) the set becomes one log record: a sequence number from the
// counter item, the set cut into parts by the hash of the id (so a reader
// of one link reads one part), the parts written, then the record's
// header, written only if absent — the header is the commit. A record
// costs its size in write units, whatever the number of links in it,
// instead of a write per link.
//
// A writer that dies between taking a number and committing leaves a gap;
// the fold (vfold.go) voids a number that stays uncommitted for
// recordGrace by writing a void header in its place. A writer that comes
// back after that finds the void header, takes a new number and writes the
// record again: nothing is lost or counted twice.

// Keys of the visit log and statistics items: under the reserved prefix,
// never a link id (':' is not an id character), and skipped by List.
const (
	reservedPrefix = "linkgate:"
	keySeq         = reservedPrefix + "v:seq"  // the record counter
	keyFold        = reservedPrefix + "v:fold" // what the fold has done
)

func recordKey(n int64) string      { return reservedPrefix + "v:r:" + strconv.FormatInt(n, 10) }
func partKey(n int64, p int) string { return recordKey(n) + ":" + strconv.Itoa(p) }

// Attribute names of those items: short, since every byte is billed.
const (
	attrData    = "d" // B: an encoded deltaSet
	attrN       = "n" // N: records numbered (counter), folded through (fold)
	attrBytes   = "b" // N: bytes of records numbered (counter), folded (fold), in a record (header)
	attrParts   = "p" // N: the record's parts; 1: its data is in the header
	attrTime    = "t" // N: when the record was committed, Unix seconds
	attrVoid    = "x" // BOOL: a number the fold voided
	attrWriter  = "w" // S: who wrote the record
	attrUpto    = "u" // N: a state item holds every record through this number
	attrChunks  = "c" // N: a state item's chunks beyond the first
	attrOwner   = "o" // S: the fold's lease holder
	attrLease   = "l" // N: its lease runs until this time, Unix milliseconds
	attrTarget  = "g" // N: the fold in progress folds through this record
	attrMonths  = "m" // B: the fold's month table (vfold.go)
	attrFoldedA = "a" // N: when the last fold ended, Unix seconds
)

// Defaults of the visit log.
const (
	DefaultVisitInterval = 30 * time.Second
	// recordTTL is how long records stay (DynamoDB's TTL deletes them, for
	// free): far longer than any fold takes to reach them.
	recordTTL = 30 * 24 * time.Hour
	// recordGrace is how long a number may stay uncommitted before the
	// fold voids it: longer than any write of a record takes.
	recordGrace = 2 * time.Minute
	// partBytes is the size a record's parts aim at: a reader of one
	// link reads one part of each record.
	partBytes = 16 << 10
	maxParts  = 256
	// flushBytes and maxBufferedLinks start a record early, and bound the
	// memory of the buffer.
	flushBytes       = 4 << 20
	maxBufferedLinks = 400_000
	// migrationsPerTick bounds the items of the old layout migrated a
	// second (each a read and a transaction per 50 attributes).
	migrationsPerTick = 50
)

// visitLog is a Store's visit buffer, its record writer and its fold.
type visitLog struct {
	s        *Store
	now      func() time.Time
	interval time.Duration
	writer   string // this process, in headers and fold leases
	log      *slog.Logger

	mu       sync.Mutex
	buf      *deltaSet
	since    time.Time // when the oldest visit in buf arrived
	inflight *record   // taken from buf, not known to be committed

	flushMu sync.Mutex // one record written at a time

	foldMu   sync.Mutex
	missing  map[int64]time.Time // numbers seen uncommitted, since when
	checked  time.Time           // the last fold check
	foldHook func(r int) error   // tests: called after each fold range

	migrations chan string // ids whose items hold statistics of the old layout

	stop, done chan struct{}
	start      sync.Once
	closeOnce  sync.Once

	records, recordBytes, flushErrors, folds, foldErrors, migrated atomic.Int64
}

// record is a set on its way to the log.
type record struct {
	set     *deltaSet
	n       int64    // its number; 0 until taken
	blobs   [][]byte // encoded parts, by part number
	bytes   int
	written bool // the parts are in the table
}

func newVisitLog(s *Store, opts Options) *visitLog {
	v := &visitLog{
		s: s, now: opts.Clock, interval: opts.VisitInterval, log: opts.Logger,
		buf: newDeltaSet(), missing: map[int64]time.Time{},
		migrations: make(chan string, 1024),
		stop:       make(chan struct{}), done: make(chan struct{}),
	}
	if v.now == nil {
		v.now = time.Now
	}
	if v.interval <= 0 {
		v.interval = DefaultVisitInterval
	}
	if v.log == nil {
		v.log = slog.New(slog.DiscardHandler)
	}
	var id [8]byte
	rand.Read(id[:])
	v.writer = hex.EncodeToString(id[:])
	if opts.ManualVisits {
		v.start.Do(func() { close(v.done) })
	}
	return v
}

// run starts the background loop once (unless ManualVisits): every second
// it writes the buffer when due, checks whether the log needs folding, and
// migrates items of the old layout.
func (v *visitLog) run() {
	v.start.Do(func() {
		go func() {
			defer close(v.done)
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-v.stop:
					return
				case <-t.C:
					v.tick(context.Background())
				}
			}
		}()
	})
}

// tick does the background work that is due at the clock's time.
func (v *visitLog) tick(ctx context.Context) {
	now := v.now()
	if v.due(now) {
		ctx, cancel := context.WithTimeout(ctx, 5*v.s.timeout)
		if err := v.flush(ctx); err != nil {
			v.log.Warn("visit log: write failed; retrying", "error", err)
		}
		cancel()
	}
	if now.Sub(v.checked) >= foldCheckInterval {
		v.checked = now
		if _, err := v.foldIfDue(ctx, now); err != nil {
			v.foldErrors.Add(1)
			v.log.Warn("visit log: fold failed; retrying later", "error", err)
		}
	}
	for range migrationsPerTick {
		select {
		case id := <-v.migrations:
			mctx, cancel := context.WithTimeout(ctx, 5*v.s.timeout)
			if err := v.s.migrateLegacy(mctx, id); err != nil {
				v.log.Warn("visit log: migrating visit counters off a link item failed; retrying on a later read", "id", id, "error", err)
			}
			cancel()
		default:
			return
		}
	}
}

// due reports whether the buffer should become a record at now.
func (v *visitLog) due(now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.inflight != nil || v.buf.len() > 0 && (now.Sub(v.since) >= v.interval || v.buf.size >= flushBytes)
}

// add buffers visits; it reports false when the buffer is full, unless
// force.
func (v *visitLog) add(force bool, fn func(*deltaSet)) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !force && v.buf.len() >= maxBufferedLinks {
		return false
	}
	if v.buf.len() == 0 {
		v.since = v.now()
	}
	fn(v.buf)
	return true
}

// flush writes what is buffered as one record (after a record that could
// not be written before).
func (v *visitLog) flush(ctx context.Context) error {
	v.flushMu.Lock()
	defer v.flushMu.Unlock()
	v.mu.Lock()
	if v.inflight == nil {
		if v.buf.len() == 0 {
			v.mu.Unlock()
			return nil
		}
		v.inflight = &record{set: v.buf}
		v.buf = newDeltaSet()
	}
	rec := v.inflight
	v.mu.Unlock()
	err := v.write(ctx, rec)
	if err != nil {
		v.flushErrors.Add(1)
		return err
	}
	v.mu.Lock()
	v.inflight = nil
	v.mu.Unlock()
	v.records.Add(1)
	v.recordBytes.Add(int64(rec.bytes))
	return nil
}

// parts returns how many parts a set of size bytes is cut into: a power
// of two, so that part p holds the ids whose hash starts with p's bits.
func parts(size int) int {
	p := 1
	for p < maxParts && size/p > partBytes {
		p *= 2
	}
	return p
}

// partOf returns the part of an id's hash among p parts.
func partOf(h uint64, p int) int {
	if p <= 1 {
		return 0
	}
	return int(h >> (64 - bits.TrailingZeros(uint(p))))
}

// write commits rec to the log. It can be called again after an error:
// it resumes where it was, and a header it wrote before is recognised.
func (v *visitLog) write(ctx context.Context, rec *record) error {
	for {
		if rec.n == 0 {
			full := rec.set.encode(nil)
			p := parts(len(full))
			rec.blobs, rec.bytes = [][]byte{full}, len(full)
			if p > 1 {
				rec.blobs, rec.bytes = make([][]byte, p), 0
				for i := range p {
					rec.blobs[i] = rec.set.encode(func(r *row) bool { return partOf(keyHash(r.ID), p) == i })
					rec.bytes += len(rec.blobs[i])
				}
			}
			n, err := v.s.number(ctx, rec.bytes)
			if err != nil {
				return err
			}
			rec.n, rec.written = n, false
		}
		if !rec.written && len(rec.blobs) > 1 {
			if err := v.s.writeParts(ctx, rec, v.now()); err != nil {
				return err
			}
			rec.written = true
		}
		committed, err := v.s.commit(ctx, rec, v.writer, v.now())
		if err != nil || committed {
			return err
		}
		rec.n = 0 // voided by the fold meanwhile: take a new number
	}
}

// number takes the next record number, counting bytes.
func (s *Store) number(ctx context.Context, bytes int) (int64, error) {
	attrs, _, err := s.update(ctx, "number a visit record", &ddb.UpdateItemInput{
		Key:                       key(keySeq),
		UpdateExpression:          aws.String("ADD #n :one, #b :b"),
		ExpressionAttributeNames:  map[string]string{"#n": attrN, "#b": attrBytes},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": number(1), ":b": number(int64(bytes))},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		return 0, err
	}
	n, err := integer(attrs, attrN)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("number a visit record: counter answered %v (%v)", attrs[attrN], err)
	}
	return n, nil
}

// writeParts writes the parts of a record that have rows, 25 a call.
func (s *Store) writeParts(ctx context.Context, rec *record, now time.Time) error {
	var reqs []types.WriteRequest
	for p, b := range rec.blobs {
		if len(b) <= emptySet {
			continue
		}
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
			AttrID:        &types.AttributeValueMemberS{Value: partKey(rec.n, p)},
			attrData:      &types.AttributeValueMemberB{Value: b},
			AttrExpiresAt: number(now.Add(recordTTL).Unix()),
		}}})
	}
	return s.batchWrite(ctx, reqs, "write visit record parts")
}

// emptySet is the size of the encoding of a set without rows.
var emptySet = len(newDeltaSet().encode(nil))

// batchWrite writes reqs, 25 per BatchWriteItem, up to callsInFlight
// calls at once, retrying unprocessed items.
func (s *Store) batchWrite(ctx context.Context, reqs []types.WriteRequest, op string) error {
	return inParallel((len(reqs)+24)/25, func(i int) error {
		pending := reqs[i*25 : min(len(reqs), (i+1)*25)]
		for attempt := 0; len(pending) > 0; attempt++ {
			if attempt > 0 {
				select {
				case <-ctx.Done():
					return s.fail(op, ctx.Err())
				case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
				}
			}
			cctx, cancel := context.WithTimeout(ctx, s.timeout)
			out, err := s.client.BatchWriteItem(cctx, &ddb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{s.table: pending}})
			cancel()
			if err != nil {
				return s.fail(op, err)
			}
			pending = out.UnprocessedItems[s.table]
		}
		return nil
	})
}

// callsInFlight bounds the DynamoDB calls one batch read or write, or one
// fold, makes at once.
const callsInFlight = 16

// inParallel calls fn(0) … fn(n-1), up to callsInFlight at once, and
// returns the first error.
func inParallel(n int, fn func(i int) error) error {
	if n == 1 {
		return fn(0)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sem   = make(chan struct{}, callsInFlight)
	)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

// commit writes rec's header unless the number has one. It reports false
// when the fold voided the number first, and true when the header there is
// this writer's own (an earlier attempt that seemed to fail did commit).
func (s *Store) commit(ctx context.Context, rec *record, writer string, now time.Time) (bool, error) {
	refused, err := s.put(ctx, "commit visit record", &ddb.PutItemInput{
		Item:                headerItem(rec, writer, now),
		ConditionExpression: aws.String("attribute_not_exists(" + AttrID + ")"),
	})
	if err != nil || !refused {
		return err == nil, err
	}
	h, err := s.getItem(ctx, recordKey(rec.n), true)
	if err != nil {
		return false, err
	}
	w, _ := str(h, attrWriter)
	_, void := h[attrVoid]
	return w == writer && !void, nil
}

// headerItem is the header of record rec, numbered, committed by writer
// at now; a record of one part has its data in it.
func headerItem(rec *record, writer string, now time.Time) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		AttrID:        &types.AttributeValueMemberS{Value: recordKey(rec.n)},
		attrParts:     number(int64(len(rec.blobs))),
		attrBytes:     number(int64(rec.bytes)),
		attrTime:      number(now.Unix()),
		attrWriter:    &types.AttributeValueMemberS{Value: writer},
		AttrExpiresAt: number(now.Add(recordTTL).Unix()),
	}
	if len(rec.blobs) == 1 {
		item[attrData] = &types.AttributeValueMemberB{Value: rec.blobs[0]}
	}
	return item
}

// update makes one UpdateItem call on the store's table under its
// deadline: the attributes asked for, and refused when the condition
// failed. op names the call in errors.
func (s *Store) update(ctx context.Context, op string, in *ddb.UpdateItemInput) (attrs map[string]types.AttributeValue, refused bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	in.TableName = &s.table
	out, err := s.client.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return nil, true, nil
	case err != nil:
		return nil, false, s.fail(op, err)
	}
	return out.Attributes, false, nil
}

// put makes one PutItem call on the store's table under its deadline;
// refused when its condition failed.
func (s *Store) put(ctx context.Context, op string, in *ddb.PutItemInput) (refused bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	in.TableName = &s.table
	_, err = s.client.PutItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return true, nil
	case err != nil:
		return false, s.fail(op, err)
	}
	return false, nil
}

// getItem reads one item; nil when there is none.
func (s *Store) getItem(ctx context.Context, k string, consistent bool) (map[string]types.AttributeValue, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.client.GetItem(ctx, &ddb.GetItemInput{TableName: &s.table, Key: key(k), ConsistentRead: &consistent})
	if err != nil {
		return nil, s.fail("read "+quote(k), err)
	}
	return out.Item, nil
}

// flushVisits writes everything buffered now, within ctx.
func (v *visitLog) flushAll(ctx context.Context) error {
	for {
		if err := v.flush(ctx); err != nil {
			return err
		}
		v.mu.Lock()
		empty := v.inflight == nil && v.buf.len() == 0
		v.mu.Unlock()
		if empty {
			return nil
		}
	}
}

// close stops the background loop and writes what is buffered.
func (v *visitLog) close(ctx context.Context) error {
	v.closeOnce.Do(func() {
		v.start.Do(func() { close(v.done) }) // never started
		close(v.stop)
	})
	<-v.done
	return v.flushAll(ctx)
}

// local calls add for each row of id that this process holds and has
// not committed (localRows).
func (v *visitLog) local(id string, createdAt int64, add func(*deltaSet, *row), committed func(n int64) bool) {
	v.localRows(func(r *row) bool { return r.ID == id && sameLink(r.CreatedAt, createdAt) }, committed, add)
}

// localRows calls add for each row for which want is true that this
// process holds and has not committed: the buffer, and the record being
// written unless committed is true of its number.
func (v *visitLog) localRows(want func(*row) bool, committed func(n int64) bool, add func(*deltaSet, *row)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	sets := []*deltaSet{v.buf}
	if rec := v.inflight; rec != nil && (rec.n == 0 || !committed(rec.n)) {
		sets = append(sets, rec.set)
	}
	for _, set := range sets {
		for i := range set.rows {
			if r := &set.rows[i]; want(r) {
				add(set, r)
			}
		}
	}
}

// sameLink reports whether a row with CreatedAt rowCreated counts for a
// link created at linkCreated (either 0: unknown, counted).
func sameLink(rowCreated, linkCreated int64) bool {
	return rowCreated == 0 || linkCreated == 0 || rowCreated == linkCreated
}

// VisitLogStats are the visit log's counters since the store opened.
type VisitLogStats struct {
	Records       int64 // records written
	RecordBytes   int64 // their bytes
	WriteErrors   int64 // record writes that failed (retried)
	Folds         int64 // folds done by this process
	FoldErrors    int64 // folds that failed (retried)
	Migrated      int64 // items of the old layout migrated (in chunks)
	BufferedLinks int   // links with visits buffered, not written yet
}

// VisitLogStats returns the visit log's counters.
func (s *Store) VisitLogStats() VisitLogStats {
	v := s.visits
	v.mu.Lock()
	buffered := v.buf.len()
	if v.inflight != nil {
		buffered += v.inflight.set.len()
	}
	v.mu.Unlock()
	return VisitLogStats{
		Records: v.records.Load(), RecordBytes: v.recordBytes.Load(), WriteErrors: v.flushErrors.Load(),
		Folds: v.folds.Load(), FoldErrors: v.foldErrors.Load(), Migrated: v.migrated.Load(), BufferedLinks: buffered,
	}
}
