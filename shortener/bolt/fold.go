package bolt

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// The fold merges the log records not folded yet into the runs, in link id
// order, in a series of short write transactions (a step each), in the
// background. Its progress is kept in the meta bucket (visitfold):
//
//	u64    folded: every log record up to this sequence number is in the runs
//	u64    target: while a fold runs, it folds the records up to this one
//	bytes  next: while a fold runs, links with ids below next are folded
//	       up to target, the others up to folded
//
// Readers use it to count each logged visit once (foldState.folds); a
// fold interrupted by a crash resumes from next when the store opens
// again. The records up to target are deleted by the step that finishes.
//
// When: once the log holds at least as many bytes as the runs (and at
// least foldMinBytes), or more than foldMaxRecords records — so each
// visit is rewritten a few times at most, and a statistics read looks at
// a bounded number of log records.
var foldKey = []byte("visitfold")

const (
	foldMinBytes   = 4 << 20
	foldMaxRecords = 512
	// foldStepBytes bounds what one step writes (and holds in memory),
	// about 5,000 links' statistics.
	foldStepBytes = 256 << 10
	// foldYieldEvery is how many links a step folds between yields to
	// the scheduler: on a server with one core (GOMAXPROCS=1) request
	// handlers then wait for the fold by a fraction of a millisecond,
	// not by a whole step.
	foldYieldEvery = 512
	// foldIdle is how many times as long as a step the background fold
	// pauses after it (unless the log is far behind).
	foldIdle = 9
)

type foldState struct {
	folded, target uint64
	next           []byte
}

func readFoldState(tx *bbolt.Tx) foldState {
	v := tx.Bucket(metaBucket).Get(foldKey)
	if len(v) < 16 {
		return foldState{}
	}
	return foldState{binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:]), v[16:]}
}

func writeFoldState(tx *bbolt.Tx, fs foldState) error {
	v := binary.BigEndian.AppendUint64(nil, fs.folded)
	v = binary.BigEndian.AppendUint64(v, fs.target)
	return tx.Bucket(metaBucket).Put(foldKey, append(v, fs.next...))
}

// folds reports whether the log record seq is in the runs for link id.
func (fs foldState) folds(seq uint64, id []byte) bool {
	return seq <= fs.folded || seq <= fs.target && bytes.Compare(id, fs.next) < 0
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// lastLogSeq returns the sequence number of the last log record written.
func lastLogSeq(tx *bbolt.Tx) uint64 {
	last := readFoldState(tx).folded
	if k, _ := tx.Bucket(logBucket).Cursor().Last(); len(k) == 8 {
		last = max(last, binary.BigEndian.Uint64(k))
	}
	return last
}

func nextLogSeq(tx *bbolt.Tx) (uint64, error) {
	seq := lastLogSeq(tx) + 1
	if seq == 0 {
		return 0, errors.New("visit log sequence exhausted")
	}
	return seq, nil
}

// tombOf returns the tomb of id: the last log record that may hold visits
// of a deleted link under this id, 0 for none.
func tombOf(tx *bbolt.Tx, id []byte) uint64 {
	if v := tx.Bucket(tombsBucket).Get(id); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// buryVisits forgets the logged and folded visits of the link id, which
// is being deleted in tx. The tomb also tells AddVisits to drop visits of
// the id while no link has it (the aggregator may flush some after the
// delete), so that a link created later under the id starts from zero.
func buryVisits(tx *bbolt.Tx, id []byte) error {
	return tx.Bucket(tombsBucket).Put(id, seqKey(lastLogSeq(tx)))
}

// visitLog is the Store's state of the log: the encoding buffer, sizes
// for the fold policy, the folder goroutine.
type visitLog struct {
	encMu sync.Mutex
	enc   []byte

	logBytes, logRecords, runBytes atomic.Int64

	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	err      atomic.Pointer[error] // the last fold error, for tests
	folds    atomic.Int64          // completed folds
	stopOnce sync.Once

	// chunkSize and stepBytes are runChunkSize and foldStepBytes (tests
	// make them small).
	chunkSize, stepBytes int
}

func newVisitLog() *visitLog {
	return &visitLog{chunkSize: runChunkSize, stepBytes: foldStepBytes}
}

// initVisits creates the visit buckets and reads the sizes the fold
// policy needs.
func (s *Store) initVisits(tx *bbolt.Tx) error {
	for _, b := range [][]byte{visitsBucket, logBucket, runsBucket, tombsBucket} {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	var logBytes, logRecords, runBytes int64
	c := tx.Bucket(logBucket).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		logBytes += int64(len(v))
		logRecords++
	}
	c = tx.Bucket(runsBucket).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		runBytes += int64(len(v))
	}
	s.vlog.logBytes.Store(logBytes)
	s.vlog.logRecords.Store(logRecords)
	s.vlog.runBytes.Store(runBytes)
	return nil
}

// startFolder starts the background fold; it runs at once if a fold was
// interrupted or is due.
func (s *Store) startFolder() {
	v := s.vlog
	v.kick, v.stop, v.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go s.folder()
	v.kick <- struct{}{}
}

// stopFolder stops the background fold (if started), between two steps.
func (s *Store) stopFolder() {
	v := s.vlog
	if v.done == nil {
		return
	}
	v.stopOnce.Do(func() { close(v.stop) })
	<-v.done
}

func (v *visitLog) appended(n int) {
	v.logBytes.Add(int64(n))
	v.logRecords.Add(1)
	if v.due() {
		select {
		case v.kick <- struct{}{}:
		default:
		}
	}
}

// behind reports whether the log has grown well past the point where a
// fold starts: then the fold runs without pauses until it has caught up.
func (v *visitLog) behind() bool {
	lb, lr := v.logBytes.Load(), v.logRecords.Load()
	return lb >= 4*max(foldMinBytes, v.runBytes.Load()) || lr > 4*foldMaxRecords
}

// due reports whether the log should be folded.
func (v *visitLog) due() bool {
	lb, lr := v.logBytes.Load(), v.logRecords.Load()
	return lr > 0 && (lb >= max(foldMinBytes, v.runBytes.Load()) || lr > foldMaxRecords)
}

func (s *Store) folder() {
	v := s.vlog
	defer close(v.done)
	for {
		select {
		case <-v.stop:
			return
		case <-v.kick:
		}
		if err := s.fold(v.stop, false); err != nil {
			v.err.Store(&err)
		}
	}
}

// Fold folds the whole log into the runs now (tools and tests; the store
// folds by itself in the background).
func (s *Store) Fold() error { return s.fold(nil, true) }

// fold runs steps until the fold in progress (if any) is done and, if
// force (then until the log is empty) or the policy says so, new ones;
// it returns early, with the fold resumable, when stop is closed.
func (s *Store) fold(stop chan struct{}, force bool) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		var fs foldState
		var last uint64
		err := s.db.View(func(tx *bbolt.Tx) error {
			fs, last = readFoldState(tx), lastLogSeq(tx)
			return nil
		})
		if err != nil {
			return err
		}
		if fs.target == 0 && (last == fs.folded || !force && !s.vlog.due()) {
			return nil
		}
		start := time.Now()
		done, err := s.foldStep(s.vlog.stepBytes)
		if err != nil {
			return fmt.Errorf("fold visit log: %w", err)
		}
		if done {
			s.vlog.folds.Add(1)
		}
		if stop == nil || s.vlog.behind() {
			runtime.Gosched() // let request handlers run between steps
			continue
		}
		// In the background, pause foldIdle times as long as the step
		// took: the fold then takes at most a tenth of a core, spread
		// over the time the next log fills, instead of taking a third
		// of a busy core for seconds (the request rate a server can
		// take would drop by as much while it folds).
		t := time.NewTimer(foldIdle * time.Since(start))
		select {
		case <-stop:
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// foldStep runs one step of the fold in progress, starting one if none
// is; it reports whether the fold finished (or there was nothing to
// fold).
func (s *Store) foldStep(budget int) (done bool, err error) {
	var logFreed, logRecs, runDelta int64
	err = s.db.Update(func(tx *bbolt.Tx) error {
		fs := readFoldState(tx)
		if fs.target == 0 {
			last := lastLogSeq(tx)
			if last == fs.folded {
				done = true
				return nil
			}
			fs.target, fs.next = last, nil
		}
		st, err := newFoldStep(tx, fs, s.vlog.chunkSize)
		if err != nil {
			return err
		}
		finished, err := st.run(budget)
		if err != nil {
			return err
		}
		if runDelta, err = st.apply(); err != nil {
			return err
		}
		if finished {
			// Drop the folded records.
			lb := tx.Bucket(logBucket)
			c := lb.Cursor()
			var keys [][]byte
			for k, v := c.Seek(seqKey(fs.folded + 1)); k != nil && binary.BigEndian.Uint64(k) <= fs.target; k, v = c.Next() {
				keys = append(keys, k)
				logFreed += int64(len(v))
				logRecs++
			}
			for _, k := range keys {
				if err := lb.Delete(k); err != nil {
					return err
				}
			}
			fs = foldState{folded: fs.target}
			done = true
		} else {
			fs.next = st.resume
		}
		return writeFoldState(tx, fs)
	})
	if err != nil {
		return false, err
	}
	s.vlog.logBytes.Add(-logFreed)
	s.vlog.logRecords.Add(-logRecs)
	s.vlog.runBytes.Add(runDelta)
	return done, nil
}

// foldRun is one step's work: the merge of the old runs with the log
// records being folded and the tombs, from fs.next on.
type foldRun struct {
	tx     *bbolt.Tx
	fs     foldState
	links  linkCursor
	runs   *bbolt.Cursor
	tombs  *bbolt.Cursor
	tombK  []byte // the next tomb, nil: none
	tombV  []byte
	logs   logHeap
	out    chunkWriter
	d      delta
	recBuf []byte

	// the old chunk being consumed: its key and the entries left
	chunkKey  []byte
	chunkRest []byte
	loaded    bool
	// the next old chunk (nil: none), and the key of the one after it
	// (nil: none), where runs stands
	nextKey, nextVal   []byte
	afterKey, afterVal []byte
	idBuf              []byte

	deletes  [][]byte // old chunks consumed
	oldBytes int64    // their size
	tombDels [][]byte
	resume   []byte // where the next step starts
}

func newFoldStep(tx *bbolt.Tx, fs foldState, chunkSize int) (*foldRun, error) {
	f := &foldRun{tx: tx, fs: fs, links: linkCursor{c: tx.Bucket(linksBucket).Cursor()},
		runs: tx.Bucket(runsBucket).Cursor(), tombs: tx.Bucket(tombsBucket).Cursor(),
		out: chunkWriter{max: chunkSize}}
	c := tx.Bucket(logBucket).Cursor()
	for k, v := c.Seek(seqKey(fs.folded + 1)); k != nil && binary.BigEndian.Uint64(k) <= fs.target; k, v = c.Next() {
		r, err := parseLogRecord(v)
		if err != nil {
			return nil, fmt.Errorf("log record %d: %w", binary.BigEndian.Uint64(k), err)
		}
		it := &logIter{seq: binary.BigEndian.Uint64(k), r: r}
		if it.off, err = r.seek(fs.next); err != nil {
			return nil, err
		}
		if err := it.load(); err != nil {
			return nil, err
		}
		if it.ok {
			f.logs = append(f.logs, it)
		}
	}
	heap.Init(&f.logs)
	if len(fs.next) == 0 {
		f.tombK, f.tombV = f.tombs.First()
	} else {
		f.tombK, f.tombV = f.tombs.Seek(fs.next)
	}
	// Old entries from fs.next on are in the chunks with keys from fs.next
	// on (a step that stops inside a chunk writes its rest as a chunk).
	if len(fs.next) == 0 {
		f.nextKey, f.nextVal = f.runs.First()
	} else {
		f.nextKey, f.nextVal = f.runs.Seek(fs.next)
	}
	if f.nextKey != nil {
		f.afterKey, f.afterVal = f.runs.Next()
	}
	return f, nil
}

// minInput returns the smallest id among the log entries and tombs left,
// nil when none is left.
func (f *foldRun) minInput() []byte {
	var m []byte
	if len(f.logs) > 0 {
		m = f.logs[0].cur.id
	}
	if f.tombK != nil && (m == nil || bytes.Compare(f.tombK, m) < 0) {
		m = f.tombK
	}
	return m
}

// load makes the next old chunk the current one, to be consumed.
func (f *foldRun) load() error {
	b, err := runEntries(f.nextVal)
	if err != nil {
		return err
	}
	f.chunkKey, f.chunkRest, f.loaded = f.nextKey, b, true
	f.deletes = append(f.deletes, f.nextKey)
	f.oldBytes += int64(len(f.nextVal))
	f.skip()
	return nil
}

// skip moves on to the old chunk after the next one.
func (f *foldRun) skip() {
	f.nextKey, f.nextVal = f.afterKey, f.afterVal
	if f.afterKey != nil {
		f.afterKey, f.afterVal = f.runs.Next()
	}
}

// run merges until the budget is spent (at a link boundary) or everything
// is folded; it reports whether everything is.
func (f *foldRun) run(budget int) (bool, error) {
	for {
		in := f.minInput()
		if f.loaded && len(f.chunkRest) == 0 {
			f.loaded = false
		}
		if in == nil && !f.loaded {
			f.out.cut() // the old chunks left stay as they are
			return true, nil
		}
		if f.out.size >= budget {
			return false, f.stop()
		}
		if !f.loaded {
			switch {
			case f.nextKey == nil || bytes.Compare(in, f.nextKey) < 0:
				// A link before the next old chunk: no old record.
				if err := f.fold(f.ownID(in), nil); err != nil {
					return false, err
				}
			case f.afterKey != nil && bytes.Compare(in, f.afterKey) >= 0:
				// Nothing to fold in the next old chunk's range: it stays.
				f.out.cut() // what was written is below it
				f.skip()
			default:
				if err := f.load(); err != nil {
					return false, err
				}
			}
			continue
		}
		old, rec, rest, err := runEntry(f.chunkRest)
		if err != nil {
			return false, err
		}
		if in != nil && bytes.Compare(in, old) < 0 {
			if err := f.fold(f.ownID(in), nil); err != nil {
				return false, err
			}
			continue
		}
		f.chunkRest = rest
		if err := f.fold(f.ownID(old), rec); err != nil {
			return false, err
		}
	}
}

// ownID copies id, which may point into a log record or a chunk.
func (f *foldRun) ownID(id []byte) []byte {
	f.idBuf = append(f.idBuf[:0], id...)
	return f.idBuf
}

// fold writes the folded record of one link: rec (its old one, nil: none)
// plus its log entries.
func (f *foldRun) fold(id, rec []byte) error {
	if f.links.n++; f.links.n%foldYieldEvery == 0 {
		runtime.Gosched()
	}
	var tomb uint64
	if f.tombK != nil && bytes.Equal(f.tombK, id) {
		if len(f.tombV) == 8 {
			tomb = binary.BigEndian.Uint64(f.tombV)
		}
		// The tomb goes once the fold has passed it and the id has a
		// link again; while it has none, the tomb keeps AddVisits from
		// logging visits that a link created later would count.
		if tomb <= f.fs.target && f.links.exists(id) {
			f.tombDels = append(f.tombDels, append([]byte(nil), id...))
		}
		f.tombK, f.tombV = f.tombs.Next()
		rec = nil // the visits of the deleted link
	}
	f.d.reset()
	for len(f.logs) > 0 && bytes.Equal(f.logs[0].cur.id, id) {
		it := f.logs[0]
		if it.seq > tomb {
			if err := it.r.addTo(&f.d, &it.cur); err != nil {
				return err
			}
		}
		if err := it.advance(); err != nil {
			return err
		}
		if it.ok {
			heap.Fix(&f.logs, 0)
		} else {
			heap.Pop(&f.logs)
		}
	}
	if f.d.empty() {
		if rec != nil {
			f.out.add(id, rec)
		}
		return nil
	}
	if rec == nil && !f.links.exists(id) {
		return nil // visits of a link deleted since
	}
	f.d.normalize()
	var err error
	if f.recBuf, err = merge(f.recBuf[:0], rec, &f.d); err != nil {
		return fmt.Errorf("link %q: %w", id, err)
	}
	f.out.add(id, f.recBuf)
	return nil
}

// stop ends the step at a link boundary: the rest of a chunk being
// consumed is written as a chunk of its own, and the next step resumes at
// the smallest id left.
func (f *foldRun) stop() error {
	f.out.cut()
	var next []byte
	if f.loaded && len(f.chunkRest) > 0 {
		id, _, _, err := runEntry(f.chunkRest)
		if err != nil {
			return err
		}
		next = id
		if err := f.out.addEntries(f.chunkRest); err != nil {
			return err
		}
		f.out.cut()
	} else {
		next = f.nextKey
	}
	if in := f.minInput(); in != nil && (next == nil || bytes.Compare(in, next) < 0) {
		next = in
	}
	if next == nil {
		return errors.New("fold step stopped with nothing left")
	}
	f.resume = append([]byte(nil), next...)
	return nil
}

// apply writes the step's changes and returns how much the runs grew.
func (f *foldRun) apply() (int64, error) {
	runs, tombs := f.tx.Bucket(runsBucket), f.tx.Bucket(tombsBucket)
	for _, k := range f.deletes {
		if err := runs.Delete(k); err != nil {
			return 0, err
		}
	}
	var written int64
	for _, c := range f.out.chunks {
		if err := runs.Put(c.k, c.v); err != nil {
			return 0, err
		}
		written += int64(len(c.v))
	}
	for _, k := range f.tombDels {
		if err := tombs.Delete(k); err != nil {
			return 0, err
		}
	}
	return written - f.oldBytes, nil
}

// linkCursor tells whether links exist, asked in increasing id order, as
// the fold does: it steps through the links bucket when the next id is
// near (a leaf page already in the cache) and seeks when it is far, so
// a fold touching most links costs a walk of the bucket, not a search
// from the root per link.
type linkCursor struct {
	c   *bbolt.Cursor
	k   []byte // the cursor's key, nil at the end
	pos bool   // the cursor was positioned
	n   int    // links folded (for yields)
}

// linkStepMax is how many keys exists steps over before it seeks.
const linkStepMax = 8

func (lc *linkCursor) exists(id []byte) bool {
	if !lc.pos {
		lc.k, _ = lc.c.Seek(id)
		lc.pos = true
	}
	for i := 0; lc.k != nil && bytes.Compare(lc.k, id) < 0; i++ {
		if i == linkStepMax {
			lc.k, _ = lc.c.Seek(id)
			break
		}
		lc.k, _ = lc.c.Next()
	}
	return lc.k != nil && bytes.Equal(lc.k, id)
}

// logIter walks the entries of one log record from a link on.
type logIter struct {
	seq uint64
	r   logRecord
	off int
	cur logLink
	ok  bool
}

func (it *logIter) load() error {
	if it.off >= it.r.linksTo {
		it.ok = false
		return nil
	}
	var err error
	it.cur, it.off, err = it.r.readLink(it.off)
	it.ok = err == nil
	return err
}

func (it *logIter) advance() error { return it.load() }

// logHeap orders log iterators by their current id, then sequence.
type logHeap []*logIter

func (h logHeap) Len() int { return len(h) }
func (h logHeap) Less(i, j int) bool {
	if c := bytes.Compare(h[i].cur.id, h[j].cur.id); c != 0 {
		return c < 0
	}
	return h[i].seq < h[j].seq
}
func (h logHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *logHeap) Push(x any)   { *h = append(*h, x.(*logIter)) }
func (h *logHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
