// Package bolt reads the embedded store of the linkgate releases before the
// pebble store — a bbolt file (links.db) with its create log
// (links.db-wal.0 and links.db-wal.1) — so that it can be migrated. It is
// read-only: it never writes these files, and nothing serves from them.
//
// What a store of those releases holds, and what Read gives back:
//
//   - links: the links bucket (id → value), plus the create log's records
//     that were not applied to the file yet (sequence number above the
//     meta bucket's walApplied): a crash leaves those behind;
//   - visit statistics, the sum of: the link's record in the visits
//     bucket (links with a visit limit), its entry in the folded runs
//     (visitruns, chunks of sorted entries) unless the id has a tomb
//     (visittombs: deleted since), and its entries in the visit log
//     records (visitlog) not yet folded for it — those after the fold
//     state's folded number, and after target for ids from next on while
//     a fold was under way, and after its tomb.
//
// Formats are those of shortener/bolt at 096063f, documented there; the
// statistics records are shortener/internal/statsrec's.
package bolt

import (
	"bytes"
	"cmp"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/internal/statsrec"
)

// Info tells what Read found.
type Info struct {
	Links      int // links read, the unapplied ones included
	Unapplied  int // links only in the create log (not applied to the file)
	LogRecords int // visit log records not fully folded
}

// Exists reports whether a store of the old format is at path.
func Exists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// Read calls fn with every link of the store at path (links.db) and its
// statistics (without the Visits the link was created with, which stay in
// Link.Visits), in id order, and returns what it found. The store must not
// be open in a running server (bbolt's lock says so after a second).
func Read(path string, fn func(shortener.LinkRecord) error) (Info, error) {
	var info Info
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if errors.Is(err, berrors.ErrTimeout) {
		return info, fmt.Errorf("read bolt store %s: the file is locked by another process (a linkgate of an earlier release still serving it?)", path)
	}
	if err != nil {
		return info, fmt.Errorf("read bolt store %s: %w", path, err)
	}
	defer db.Close()
	err = db.View(func(tx *bbolt.Tx) error {
		meta := tx.Bucket([]byte("meta"))
		links := tx.Bucket([]byte("links"))
		if meta == nil || links == nil {
			return errors.New("not a linkgate bolt store (no links or meta bucket)")
		}
		if v := meta.Get([]byte("format")); len(v) != 1 || v[0] != 1 {
			return fmt.Errorf("unsupported bolt store format %v", v)
		}
		var applied uint64
		if v := meta.Get([]byte("walApplied")); len(v) == 8 {
			applied = binary.BigEndian.Uint64(v)
		}
		pending, err := unapplied(path, applied)
		if err != nil {
			return err
		}
		info.Unapplied = len(pending)
		st, err := newStatsReader(tx)
		if err != nil {
			return err
		}
		info.LogRecords = len(st.logs)
		// The links bucket and the unapplied links, merged in id order
		// (an unapplied record is newer than the file).
		c := links.Cursor()
		k, v := c.First()
		for k != nil || len(pending) > 0 {
			var id string
			var val []byte
			switch {
			case len(pending) > 0 && (k == nil || pending[0].id <= string(k)):
				id, val = pending[0].id, pending[0].val
				if k != nil && pending[0].id == string(k) {
					k, v = c.Next()
				}
				pending = pending[1:]
			default:
				id, val = string(k), v
				k, v = c.Next()
			}
			l, err := decodeLink(id, val)
			if err != nil {
				return fmt.Errorf("link %q: %w", id, err)
			}
			stats, err := st.of([]byte(id))
			if err != nil {
				return fmt.Errorf("statistics of %q: %w", id, err)
			}
			info.Links++
			if err := fn(shortener.LinkRecord{Link: l, Stats: stats}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return info, fmt.Errorf("read bolt store %s: %w", path, err)
	}
	return info, nil
}

// A link's value in the links bucket and the create log:
//
//	byte    version (1)
//	byte    flags: 1 = has CreatedAt, 2 = has ExpiresAt
//	varint  CreatedAt, Unix seconds (if flag 1)
//	varint  ExpiresAt, Unix seconds (if flag 2)
//	varint  MaxVisits
//	varint  Visits
//	bytes   URL (the rest)
func decodeLink(id string, v []byte) (shortener.Link, error) {
	if len(v) < 2 || v[0] != 1 {
		return shortener.Link{}, errCorrupt
	}
	l := shortener.Link{ID: id}
	flags, rest := v[1], v[2:]
	ok := true
	next := func() int64 {
		x, n := binary.Varint(rest)
		if n <= 0 {
			ok = false
			return 0
		}
		rest = rest[n:]
		return x
	}
	if flags&1 != 0 {
		l.CreatedAt = time.Unix(next(), 0).UTC()
	}
	if flags&2 != 0 {
		l.ExpiresAt = time.Unix(next(), 0).UTC()
	}
	l.MaxVisits = next()
	l.Visits = next()
	if !ok {
		return shortener.Link{}, errCorrupt
	}
	l.URL = string(rest)
	return l, nil
}

var errCorrupt = errors.New("corrupt record")

// The create log: two files, path-wal.0 and path-wal.1, each a header
// followed by records
//
//	uint32  length of the payload (little endian)
//	uint32  CRC-32C of the payload
//	payload: byte kind (1), uvarint sequence number, uvarint id length,
//	         id, the link's value (the rest)
//
// read up to the first torn or corrupt record (a crash's torn tail).
const walMagic = "lgwal\x00\x00\x01"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type walRecord struct {
	seq uint64
	id  string
	val []byte
}

// unapplied returns the create log's records above applied, the newest
// of each id, in id order.
func unapplied(path string, applied uint64) ([]walRecord, error) {
	var recs []walRecord
	for _, p := range []string{path + "-wal.0", path + "-wal.1"} {
		r, err := readLog(p)
		if err != nil {
			return nil, err
		}
		for _, rec := range r {
			if rec.seq > applied {
				recs = append(recs, rec)
			}
		}
	}
	slices.SortFunc(recs, func(a, b walRecord) int {
		return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(b.seq, a.seq))
	})
	return slices.CompactFunc(recs, func(a, b walRecord) bool { return a.id == b.id }), nil
}

func readLog(path string) ([]walRecord, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) || err == nil && len(b) < len(walMagic) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read create log: %w", err)
	}
	if string(b[:len(walMagic)]) != walMagic {
		return nil, fmt.Errorf("%s is not a linkgate create log", path)
	}
	var recs []walRecord
	for b = b[len(walMagic):]; len(b) >= 8; {
		size := binary.LittleEndian.Uint32(b)
		if size == 0 || uint64(size) > uint64(len(b)-8) {
			break
		}
		payload := b[8 : 8+size]
		if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(b[4:]) || payload[0] != 1 {
			break
		}
		seq, k := binary.Uvarint(payload[1:])
		if k <= 0 {
			break
		}
		rest := payload[1+k:]
		idLen, k := binary.Uvarint(rest)
		if k <= 0 || idLen == 0 || idLen > uint64(len(rest)-k) {
			break
		}
		recs = append(recs, walRecord{seq, string(rest[k : k+int(idLen)]), rest[k+int(idLen):]})
		b = b[8+size:]
	}
	return recs, nil
}

// statsReader gives the statistics of links asked in increasing id order,
// walking the runs and the log records along.
type statsReader struct {
	visits, tombs *bbolt.Bucket
	folded        uint64 // log records up to this one are in the runs
	target        uint64 // while a fold ran: records up to this one are in the runs for ids below next
	next          []byte
	runs          *bbolt.Cursor
	chunk         []byte // entries left in the current run chunk
	runsDone      bool
	logs          logHeap
}

func newStatsReader(tx *bbolt.Tx) (*statsReader, error) {
	r := &statsReader{visits: tx.Bucket([]byte("visits")), tombs: tx.Bucket([]byte("visittombs"))}
	if v := tx.Bucket([]byte("meta")).Get([]byte("visitfold")); len(v) >= 16 {
		r.folded, r.target, r.next = binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:]), v[16:]
	}
	if b := tx.Bucket([]byte("visitruns")); b != nil {
		r.runs = b.Cursor()
		_, v := r.runs.First()
		r.loadChunk(v)
	} else {
		r.runsDone = true
	}
	if b := tx.Bucket([]byte("visitlog")); b != nil {
		c := b.Cursor()
		for k, v := c.Seek(binary.BigEndian.AppendUint64(nil, r.folded+1)); k != nil; k, v = c.Next() {
			rec, err := parseLogRecord(v)
			if err != nil {
				return nil, fmt.Errorf("visit log record %x: %w", k, err)
			}
			it := &logIter{seq: binary.BigEndian.Uint64(k), r: rec, off: rec.linksFrom}
			if err := it.load(); err != nil {
				return nil, err
			}
			if it.ok {
				r.logs = append(r.logs, it)
			}
		}
		heap.Init(&r.logs)
	}
	return r, nil
}

func (r *statsReader) loadChunk(v []byte) {
	if v == nil {
		r.runsDone = true
		return
	}
	if len(v) < 1 || v[0] != 1 {
		r.chunk = nil // corrupt: of() reports it
		r.runsDone = true
		return
	}
	r.chunk = v[1:]
}

// run returns id's entry of the runs, or nil, moving past smaller ids.
func (r *statsReader) run(id []byte) ([]byte, error) {
	for !r.runsDone {
		if len(r.chunk) == 0 {
			_, v := r.runs.Next()
			r.loadChunk(v)
			continue
		}
		l, n := binary.Uvarint(r.chunk)
		if n <= 0 || l > uint64(len(r.chunk)-n) {
			return nil, errCorrupt
		}
		eid, rest := r.chunk[n:n+int(l)], r.chunk[n+int(l):]
		l, n = binary.Uvarint(rest)
		if n <= 0 || l > uint64(len(rest)-n) {
			return nil, errCorrupt
		}
		rec := rest[n : n+int(l)]
		switch bytes.Compare(eid, id) {
		case 1:
			return nil, nil
		case 0:
			r.chunk = rest[n+int(l):]
			return rec, nil
		}
		r.chunk = rest[n+int(l):]
	}
	return nil, nil
}

// of returns the statistics of the link id; ids come in increasing order.
func (r *statsReader) of(id []byte) (shortener.VisitStats, error) {
	var d statsrec.Delta
	if r.visits != nil {
		if v := r.visits.Get(id); v != nil {
			if err := d.AddRecord(v); err != nil {
				return shortener.VisitStats{}, err
			}
		}
	}
	var tomb uint64
	if r.tombs != nil {
		if v := r.tombs.Get(id); len(v) == 8 {
			tomb = binary.BigEndian.Uint64(v)
		}
	}
	rec, err := r.run(id)
	if err != nil {
		return shortener.VisitStats{}, err
	}
	if rec != nil && tomb == 0 {
		if err := d.AddRecord(rec); err != nil {
			return shortener.VisitStats{}, err
		}
	}
	for len(r.logs) > 0 {
		it := r.logs[0]
		c := bytes.Compare(it.cur.id, id)
		if c > 0 {
			break
		}
		folded := it.seq <= r.folded || it.seq <= r.target && bytes.Compare(it.cur.id, r.next) < 0
		if c == 0 && !folded && it.seq > tomb {
			if err := it.r.addTo(&d, &it.cur); err != nil {
				return shortener.VisitStats{}, err
			}
		}
		if err := it.load(); err != nil {
			return shortener.VisitStats{}, err
		}
		if it.ok {
			heap.Fix(&r.logs, 0)
		} else {
			heap.Pop(&r.logs)
		}
	}
	st := d.Stats()
	st.Bound()
	return st, nil
}

// A visit log record:
//
//	byte     version (1)
//	u32      number of keys
//	u32      number of links
//	u32      offset of the key index
//	u32      offset of the link index
//	keys     byte kind (shortener.VisitKind), uvarint length, name
//	links    sorted by id: uvarint id length, id, uvarint total,
//	         uvarint bots, uvarint number of counts, then each count:
//	         uvarint key number, uvarint count
//	u32 ×    offset of each key (the key index)
//	u32 ×    offset of every 16th link (the link index)
//
// Offsets are from the start of the record; integers little-endian.
const logHeader = 17

type logRecord struct {
	b         []byte
	keys      []byte // the key index
	nKeys     int
	linksFrom int // offset of the first link
	linksTo   int // end of the links
}

func parseLogRecord(b []byte) (logRecord, error) {
	if len(b) < logHeader || b[0] != 1 {
		return logRecord{}, errCorrupt
	}
	r := logRecord{b: b, nKeys: int(binary.LittleEndian.Uint32(b[1:]))}
	nLinks := int(binary.LittleEndian.Uint32(b[5:]))
	keyIndex := int(binary.LittleEndian.Uint32(b[9:]))
	linkIndex := int(binary.LittleEndian.Uint32(b[13:]))
	nRestarts := (nLinks + 15) / 16
	if keyIndex < logHeader || keyIndex > len(b) || r.nKeys > len(b) || nLinks > len(b) ||
		linkIndex != keyIndex+4*r.nKeys || linkIndex+4*nRestarts != len(b) {
		return logRecord{}, errCorrupt
	}
	r.keys, r.linksTo, r.linksFrom = b[keyIndex:linkIndex], keyIndex, keyIndex
	if nRestarts > 0 {
		r.linksFrom = int(binary.LittleEndian.Uint32(b[linkIndex:]))
		if r.linksFrom < logHeader || r.linksFrom > r.linksTo {
			return logRecord{}, errCorrupt
		}
	}
	return r, nil
}

// key returns key number i.
func (r *logRecord) key(i uint64) (shortener.VisitKind, []byte, error) {
	if i >= uint64(r.nKeys) {
		return 0, nil, errCorrupt
	}
	o := int(binary.LittleEndian.Uint32(r.keys[4*i:]))
	if o < logHeader || o >= r.linksFrom {
		return 0, nil, errCorrupt
	}
	kind := shortener.VisitKind(r.b[o])
	l, n := binary.Uvarint(r.b[o+1 : r.linksFrom])
	if n <= 0 || l > uint64(r.linksFrom-o-1-n) || kind >= shortener.NumVisitKinds {
		return 0, nil, errCorrupt
	}
	return kind, r.b[o+1+n : o+1+n+int(l)], nil
}

// logLink is one link's entry of a record.
type logLink struct {
	id          []byte
	total, bots int64
	counts      []byte // nCounts pairs of uvarints
	nCounts     uint64
}

// readLink reads the link at offset off and returns the offset of the
// next.
func (r *logRecord) readLink(off int) (logLink, int, error) {
	b := r.b[:r.linksTo]
	var l logLink
	uv := func() uint64 {
		if off < 0 || off >= len(b) {
			off = -1
			return 0
		}
		x, n := binary.Uvarint(b[off:])
		if n <= 0 {
			off = -1
			return 0
		}
		off += n
		return x
	}
	idLen := uv()
	if off < 0 || idLen > uint64(len(b)-off) {
		return logLink{}, 0, errCorrupt
	}
	l.id = b[off : off+int(idLen)]
	off += int(idLen)
	total, bots := uv(), uv()
	l.nCounts = uv()
	if off < 0 || total > math.MaxInt64 || bots > math.MaxInt64 || l.nCounts > uint64(len(b)-off) {
		return logLink{}, 0, errCorrupt
	}
	l.total, l.bots = int64(total), int64(bots)
	from := off
	for range l.nCounts {
		uv()
		uv()
	}
	if off < 0 {
		return logLink{}, 0, errCorrupt
	}
	l.counts = b[from:off]
	return l, off, nil
}

// addTo adds the counts of l to d.
func (r *logRecord) addTo(d *statsrec.Delta, l *logLink) error {
	d.Total += l.total
	d.Bots += l.bots
	b := l.counts
	for range l.nCounts {
		k, n := binary.Uvarint(b)
		c, m := binary.Uvarint(b[n:])
		b = b[n+m:]
		kind, name, err := r.key(k)
		if err != nil || c > math.MaxInt64 {
			return errCorrupt
		}
		d.Counts = append(d.Counts, statsrec.KeyCount{Kind: kind, Key: name, N: int64(c)})
	}
	return nil
}

// logIter walks the entries of one log record.
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
