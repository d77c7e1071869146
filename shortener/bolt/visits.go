package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"strings"

	bbolt "go.etcd.io/bbolt"

	"github.com/linkgate/linkgate/shortener"
)

var _ shortener.VisitStore = (*Store)(nil)

// Visit statistics live apart from the links bucket, so that counting
// visits never rewrites the pages redirects read:
//
//   - visits: per link with a visit limit (and per link counted by
//     earlier versions), its statistics record under its id, updated in
//     place by every batch, so Get and AppendURL see the live count;
//   - visitlog (vlog.go): every batch's visits of the other links, one
//     record per batch, appended;
//   - visitruns (vrun.go): the log folded into per-link records, in
//     chunks, by the background fold (fold.go);
//   - visittombs: per deleted link, the last log record its visits may be
//     in, so that a new link under the same id starts from zero.
//
// A link's statistics are the sum of its record in visits, its record in
// visitruns and its entries in the log records not folded into visitruns
// yet.
var (
	visitsBucket = []byte("visits")
	logBucket    = []byte("visitlog")
	runsBucket   = []byte("visitruns")
	tombsBucket  = []byte("visittombs")
)

// yieldEvery is how many limited links AddVisits updates between yields.
const yieldEvery = 64

// AddVisits adds a batch in one transaction (one fsync): the visits of
// links without a visit limit as one log record, those of limited links
// into their records in place (in id order, so neighbouring records share
// page writes; links that no longer exist are skipped). Visits in the log
// of links that no longer exist are dropped by the fold; those of a link
// deleted since its visits were counted (it has a tomb) are dropped here.
func (s *Store) AddVisits(ctx context.Context, batch *shortener.VisitBatch) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("add visits: %w", err)
	}
	s.vlog.encMu.Lock()
	defer s.vlog.encMu.Unlock()
	var size int
	err := s.update(func(tx *bbolt.Tx) error { // applies created links first
		skip := buried(tx, batch)
		rec, n := appendLogRecord(s.vlog.enc[:0], batch, skip)
		s.vlog.enc, size = rec, 0
		if n > 0 {
			seq, err := nextLogSeq(tx)
			if err != nil {
				return err
			}
			if err := tx.Bucket(logBucket).Put(seqKey(seq), rec); err != nil {
				return err
			}
			size = len(rec)
		}
		return addLimited(tx, batch)
	})
	if err != nil {
		return fmt.Errorf("add visits: %w: %w", shortener.ErrUnavailable, err)
	}
	for i := range batch.Links {
		batch.Links[i].Applied = true
	}
	if size > 0 {
		s.vlog.appended(size)
	}
	return nil
}

// buried returns the indexes in batch of the links that have a tomb and
// no link (deleted, not created again), nil when there are none. The
// batch's links are sorted by id, as the tombs are: a merge walk that
// leaps over runs of either side (Seek, binary search) costs about the
// smaller of the two, and nothing when there are no tombs.
func buried(tx *bbolt.Tx, batch *shortener.VisitBatch) map[int]bool {
	var skip map[int]bool
	links := tx.Bucket(linksBucket)
	c := tx.Bucket(tombsBucket).Cursor()
	k, _ := c.First()
	for i := 0; k != nil && i < len(batch.Links); {
		switch id := batch.Links[i].ID; strings.Compare(string(k), id) {
		case -1:
			k, _ = c.Seek([]byte(id))
		case 1:
			j, _ := slices.BinarySearchFunc(batch.Links[i:], k, func(l shortener.LinkVisits, k []byte) int {
				return strings.Compare(l.ID, string(k))
			})
			i += j
		default:
			if links.Get(k) == nil {
				if skip == nil {
					skip = map[int]bool{}
				}
				skip[i] = true
			}
			i++
		}
	}
	return skip
}

// addLimited merges the visits of the batch's limited links into their
// records in the visits bucket.
func addLimited(tx *bbolt.Tx, batch *shortener.VisitBatch) error {
	links, visits := tx.Bucket(linksBucket), tx.Bucket(visitsBucket)
	// Values must stay valid until the commit: they are cut from arenas,
	// a new one when the last is full.
	var arena []byte
	var d delta
	done := 0
	for i := range batch.Links {
		l := &batch.Links[i]
		if !l.Limited {
			continue
		}
		if done++; done%yieldEvery == 0 {
			// Let request handlers run: on a server with one core
			// (GOMAXPROCS=1) a long batch would otherwise hold it for a
			// whole scheduler slice (10 ms) at a time.
			runtime.Gosched()
		}
		key := []byte(l.ID)
		v := visits.Get(key)
		// A record exists only while its link does (Delete removes
		// both), so the links bucket need not be searched for one.
		if v == nil && links.Get(key) == nil {
			continue // deleted meanwhile
		}
		d.reset()
		d.total, d.bots = l.Total, l.Bots
		for _, c := range l.Counts {
			k := batch.Keys[c.Key]
			d.counts = append(d.counts, keyCount{k.Kind, []byte(k.Name), c.N})
		}
		d.normalize()
		if cap(arena)-len(arena) < len(v)+512 {
			arena = make([]byte, 0, max(64<<10, 2*len(v)+512))
		}
		start := len(arena)
		var err error
		if arena, err = merge(arena, v, &d); err != nil {
			return fmt.Errorf("link %q: %w", l.ID, err)
		}
		if err := visits.Put(key, arena[start:len(arena):len(arena)]); err != nil {
			return err
		}
	}
	return nil
}

// VisitStats returns the stored statistics of a link: its record in the
// visits bucket, in the folded runs, and its entries in the log records
// not folded yet.
func (s *Store) VisitStats(ctx context.Context, id string) (shortener.VisitStats, error) {
	var st shortener.VisitStats
	key := []byte(id)
	pv := s.pendingValue(key) // created, not yet applied (looked up first, as in Get)
	err := s.db.View(func(tx *bbolt.Tx) error {
		lv := tx.Bucket(linksBucket).Get(key)
		if lv == nil {
			lv = pv
		}
		if lv == nil {
			return shortener.ErrNotFound
		}
		l, _, err := decodeMeta(lv)
		if err != nil {
			return err
		}
		if v := tx.Bucket(visitsBucket).Get(key); v != nil {
			if st, err = decodeStats(v); err != nil {
				return err
			}
		}
		st.Total += l.Visits // counted before statistics were kept (imports)
		logged, err := loggedStats(tx, key)
		if err != nil {
			return err
		}
		st.Add(logged)
		return nil
	})
	if err != nil {
		return shortener.VisitStats{}, fmt.Errorf("visit stats %q: %w", id, err)
	}
	st.Bound()
	return st, nil
}

// loggedStats returns the statistics of id kept in the log and the runs.
func loggedStats(tx *bbolt.Tx, id []byte) (shortener.VisitStats, error) {
	var st shortener.VisitStats
	fs := readFoldState(tx)
	tomb := tombOf(tx, id)
	if tomb == 0 {
		rec, err := findRun(tx.Bucket(runsBucket), id)
		if err != nil {
			return st, err
		}
		if rec != nil {
			if st, err = decodeStats(rec); err != nil {
				return st, err
			}
		}
	}
	var d delta
	c := tx.Bucket(logBucket).Cursor()
	for k, v := c.Seek(seqKey(max(fs.folded, tomb) + 1)); k != nil; k, v = c.Next() {
		if seq := binary.BigEndian.Uint64(k); fs.folds(seq, id) {
			continue
		}
		r, err := parseLogRecord(v)
		if err != nil {
			return st, err
		}
		e, ok, err := r.find(id)
		if err != nil {
			return st, err
		}
		if ok {
			if err := r.addTo(&d, &e); err != nil {
				return st, err
			}
		}
	}
	st.Add(d.stats())
	return st, nil
}

// storedVisits returns the total under key in a visits bucket (nil: none).
func storedVisits(b *bbolt.Bucket, key []byte) int64 {
	if b == nil {
		return 0
	}
	v := b.Get(key)
	if len(v) < 2 || v[0] != statsVersion {
		return 0
	}
	n, _ := binary.Varint(v[1:])
	return n
}

// A statistics record:
//
//	byte    version (1)
//	varint  Total
//	varint  Bots
//	then Days, Referrers, Browsers, BotAgents, Countries, each:
//	uvarint number of entries, then per entry: uvarint key length, key, varint count
const statsVersion = 1

func encodeStats(st shortener.VisitStats) []byte {
	b := []byte{statsVersion}
	b = binary.AppendVarint(b, st.Total)
	b = binary.AppendVarint(b, st.Bots)
	for _, m := range []shortener.Breakdown{st.Days, st.Referrers, st.Browsers, st.BotAgents, st.Countries} {
		b = binary.AppendUvarint(b, uint64(len(m)))
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys) // deterministic records
		for _, k := range keys {
			b = binary.AppendUvarint(b, uint64(len(k)))
			b = append(b, k...)
			b = binary.AppendVarint(b, m[k])
		}
	}
	return b
}

var errCorruptStats = fmt.Errorf("corrupt visit statistics record")

// decodeStats parses a record; v may live in the memory map, so keys are
// copied.
func decodeStats(v []byte) (shortener.VisitStats, error) {
	if len(v) < 1 || v[0] != statsVersion {
		return shortener.VisitStats{}, errCorruptStats
	}
	r := bytes.NewReader(v[1:])
	var st shortener.VisitStats
	var err error
	if st.Total, err = binary.ReadVarint(r); err != nil {
		return shortener.VisitStats{}, errCorruptStats
	}
	if st.Bots, err = binary.ReadVarint(r); err != nil {
		return shortener.VisitStats{}, errCorruptStats
	}
	for _, m := range []*shortener.Breakdown{&st.Days, &st.Referrers, &st.Browsers, &st.BotAgents, &st.Countries} {
		n, err := binary.ReadUvarint(r)
		if err != nil || n > uint64(r.Len()) {
			return shortener.VisitStats{}, errCorruptStats
		}
		if n > 0 {
			*m = make(shortener.Breakdown, n)
		}
		for range n {
			kl, err := binary.ReadUvarint(r)
			if err != nil || kl > uint64(r.Len()) {
				return shortener.VisitStats{}, errCorruptStats
			}
			k := make([]byte, kl)
			r.Read(k)
			c, err := binary.ReadVarint(r)
			if err != nil {
				return shortener.VisitStats{}, errCorruptStats
			}
			(*m)[string(k)] = c
		}
	}
	if r.Len() != 0 {
		return shortener.VisitStats{}, errCorruptStats
	}
	return st, nil
}
