package bolt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"runtime"

	"github.com/linkgate/linkgate/shortener"
)

// The visit log: each batch of visits of links without a visit limit is
// one record of the visitlog bucket, under an 8-byte big-endian sequence
// number — one sequential Put per flush, whatever the number of links. The
// fold (fold.go) later merges the records into per-link statistics in the
// visitruns bucket.
//
// A record:
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
//	u32 ×    offset of every logRestart-th link (the link index)
//
// Offsets are from the start of the record; integers little-endian.
const (
	logVersion = 1
	logHeader  = 17
	logRestart = 16
	// logYieldEvery is how many links appendLogRecord encodes between
	// yields to the scheduler.
	logYieldEvery = 4096
)

var errCorruptLog = errors.New("corrupt visit log record")

// appendLogRecord appends the record of b's links that have no visit
// limit to dst, but for those skip lists, and reports how many links it
// holds.
func appendLogRecord(dst []byte, b *shortener.VisitBatch, skip map[int]bool) ([]byte, int) {
	start := len(dst)
	dst = append(dst, make([]byte, logHeader)...)
	dst[start] = logVersion
	// Only the keys these links use, renumbered.
	used := make([]uint32, len(b.Keys)) // new number + 1
	var keys []uint32
	for i := range b.Links {
		if b.Links[i].Limited || skip[i] {
			continue
		}
		for _, c := range b.Links[i].Counts {
			if used[c.Key] == 0 {
				keys = append(keys, c.Key)
				used[c.Key] = uint32(len(keys))
			}
		}
	}
	keyOffsets := make([]uint32, 0, len(keys))
	for _, k := range keys {
		keyOffsets = append(keyOffsets, uint32(len(dst)-start))
		dst = append(dst, byte(b.Keys[k].Kind))
		dst = binary.AppendUvarint(dst, uint64(len(b.Keys[k].Name)))
		dst = append(dst, b.Keys[k].Name...)
	}
	var restarts []uint32
	n := 0
	for i := range b.Links {
		l := &b.Links[i]
		if l.Limited || skip[i] {
			continue
		}
		if n%logRestart == 0 {
			restarts = append(restarts, uint32(len(dst)-start))
		}
		if n%logYieldEvery == logYieldEvery-1 {
			runtime.Gosched() // as addLimited does
		}
		n++
		dst = binary.AppendUvarint(dst, uint64(len(l.ID)))
		dst = append(dst, l.ID...)
		dst = binary.AppendUvarint(dst, uint64(l.Total))
		dst = binary.AppendUvarint(dst, uint64(l.Bots))
		dst = binary.AppendUvarint(dst, uint64(len(l.Counts)))
		for _, c := range l.Counts {
			dst = binary.AppendUvarint(dst, uint64(used[c.Key]-1))
			dst = binary.AppendUvarint(dst, uint64(c.N))
		}
	}
	keyIndex := len(dst) - start
	for _, o := range keyOffsets {
		dst = binary.LittleEndian.AppendUint32(dst, o)
	}
	linkIndex := len(dst) - start
	for _, o := range restarts {
		dst = binary.LittleEndian.AppendUint32(dst, o)
	}
	h := dst[start:]
	binary.LittleEndian.PutUint32(h[1:], uint32(len(keys)))
	binary.LittleEndian.PutUint32(h[5:], uint32(n))
	binary.LittleEndian.PutUint32(h[9:], uint32(keyIndex))
	binary.LittleEndian.PutUint32(h[13:], uint32(linkIndex))
	return dst, n
}

// logRecord reads a record (which may live in the memory map).
type logRecord struct {
	b         []byte
	keys      []byte // the key index
	restarts  []byte // the link index
	nKeys     int
	nLinks    int
	linksFrom int // offset of the first link
	linksTo   int // end of the links
}

func parseLogRecord(b []byte) (logRecord, error) {
	if len(b) < logHeader || b[0] != logVersion {
		return logRecord{}, errCorruptLog
	}
	r := logRecord{b: b,
		nKeys:  int(binary.LittleEndian.Uint32(b[1:])),
		nLinks: int(binary.LittleEndian.Uint32(b[5:])),
	}
	keyIndex := int(binary.LittleEndian.Uint32(b[9:]))
	linkIndex := int(binary.LittleEndian.Uint32(b[13:]))
	nRestarts := (r.nLinks + logRestart - 1) / logRestart
	if keyIndex < logHeader || keyIndex > len(b) || linkIndex != keyIndex+4*r.nKeys ||
		r.nKeys > len(b) || r.nLinks > len(b) || linkIndex+4*nRestarts != len(b) {
		return logRecord{}, errCorruptLog
	}
	r.keys, r.restarts, r.linksTo = b[keyIndex:linkIndex], b[linkIndex:], keyIndex
	r.linksFrom = r.linksTo
	if nRestarts > 0 {
		r.linksFrom = int(binary.LittleEndian.Uint32(r.restarts))
		if r.linksFrom < logHeader || r.linksFrom > r.linksTo {
			return logRecord{}, errCorruptLog
		}
	}
	return r, nil
}

// key returns key number i.
func (r *logRecord) key(i uint64) (shortener.VisitKind, []byte, error) {
	if i >= uint64(r.nKeys) {
		return 0, nil, errCorruptLog
	}
	o := int(binary.LittleEndian.Uint32(r.keys[4*i:]))
	if o < logHeader || o >= r.linksFrom {
		return 0, nil, errCorruptLog
	}
	kind := shortener.VisitKind(r.b[o])
	l, n := binary.Uvarint(r.b[o+1 : r.linksFrom])
	if n <= 0 || l > uint64(r.linksFrom-o-1-n) || kind >= shortener.NumVisitKinds {
		return 0, nil, errCorruptLog
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
		return logLink{}, 0, errCorruptLog
	}
	l.id = b[off : off+int(idLen)]
	off += int(idLen)
	total, bots := uv(), uv()
	l.nCounts = uv()
	if off < 0 || total > math.MaxInt64 || bots > math.MaxInt64 || l.nCounts > uint64(len(b)-off) {
		return logLink{}, 0, errCorruptLog
	}
	l.total, l.bots = int64(total), int64(bots)
	from := off
	for range l.nCounts {
		uv()
		uv()
	}
	if off < 0 {
		return logLink{}, 0, errCorruptLog
	}
	l.counts = b[from:off]
	return l, off, nil
}

// seek returns the offset of the first link whose id is not less than id
// (linksTo if there is none).
func (r *logRecord) seek(id []byte) (int, error) {
	n := len(r.restarts) / 4
	// The last restart whose id is <= id (binary search), then a scan.
	lo, hi := 0, n // restarts [0, lo) are <= id
	for lo < hi {
		m := int(uint(lo+hi) / 2)
		off := int(binary.LittleEndian.Uint32(r.restarts[4*m:]))
		if off < r.linksFrom || off >= r.linksTo {
			return 0, errCorruptLog
		}
		l, _, err := r.readLink(off)
		if err != nil {
			return 0, err
		}
		if bytes.Compare(l.id, id) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	off := r.linksFrom
	if lo > 0 {
		off = int(binary.LittleEndian.Uint32(r.restarts[4*(lo-1):]))
	}
	for off < r.linksTo {
		l, next, err := r.readLink(off)
		if err != nil {
			return 0, err
		}
		if bytes.Compare(l.id, id) >= 0 {
			return off, nil
		}
		off = next
	}
	return r.linksTo, nil
}

// find returns the entry of id, if the record has one.
func (r *logRecord) find(id []byte) (logLink, bool, error) {
	off, err := r.seek(id)
	if err != nil || off >= r.linksTo {
		return logLink{}, false, err
	}
	l, _, err := r.readLink(off)
	if err != nil || !bytes.Equal(l.id, id) {
		return logLink{}, false, err
	}
	return l, true, nil
}

// addTo adds the counts of l to d (not normalized).
func (r *logRecord) addTo(d *delta, l *logLink) error {
	d.total += l.total
	d.bots += l.bots
	b := l.counts
	for range l.nCounts {
		k, n := binary.Uvarint(b)
		c, m := binary.Uvarint(b[n:])
		b = b[n+m:]
		kind, name, err := r.key(k)
		if err != nil || c > math.MaxInt64 {
			return errCorruptLog
		}
		d.counts = append(d.counts, keyCount{kind, name, int64(c)})
	}
	return nil
}
