// Package statsrec is the binary record of one link's lifetime visit
// statistics of the embedded stores' older formats: pebble store format 1
// kept one per link, which the pebble store reads only to migrate it (and
// to add it up should one still be a merge operand); the read-only reader
// of the old bolt format decodes them.
//
// A record:
//
//	byte    version (1)
//	varint  Total
//	varint  Bots
//	then Days, Referrers, Browsers, BotAgents, Countries, each:
//	uvarint number of entries, then per entry, sorted by key:
//	uvarint key length, key, varint count
//
// Each section is sorted by key, so two records (or a record and a Delta)
// are added in one pass without decoding either into maps (Merge).
package statsrec

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/linkgate/linkgate/shortener"
)

const version = 1

// ErrCorrupt is returned for a record that does not parse.
var ErrCorrupt = errors.New("corrupt visit statistics record")

// Encode returns the record of st (canonical: keys sorted).
func Encode(st shortener.VisitStats) []byte {
	b := []byte{version}
	b = binary.AppendVarint(b, st.Total)
	b = binary.AppendVarint(b, st.Bots)
	for kind := range shortener.NumVisitKinds {
		m := *st.Breakdown(kind)
		b = binary.AppendUvarint(b, uint64(len(m)))
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b = appendEntry(b, k, m[k])
		}
	}
	return b
}

// Decode parses a record; v may be reused by the caller afterwards (keys
// are copied).
func Decode(v []byte) (shortener.VisitStats, error) {
	if len(v) < 1 || v[0] != version {
		return shortener.VisitStats{}, ErrCorrupt
	}
	r := bytes.NewReader(v[1:])
	var st shortener.VisitStats
	var err error
	if st.Total, err = binary.ReadVarint(r); err != nil {
		return shortener.VisitStats{}, ErrCorrupt
	}
	if st.Bots, err = binary.ReadVarint(r); err != nil {
		return shortener.VisitStats{}, ErrCorrupt
	}
	for kind := range shortener.NumVisitKinds {
		m := st.Breakdown(kind)
		n, err := binary.ReadUvarint(r)
		if err != nil || n > uint64(r.Len()) {
			return shortener.VisitStats{}, ErrCorrupt
		}
		if n > 0 {
			*m = make(shortener.Breakdown, n)
		}
		for range n {
			kl, err := binary.ReadUvarint(r)
			if err != nil || kl > uint64(r.Len()) {
				return shortener.VisitStats{}, ErrCorrupt
			}
			k := make([]byte, kl)
			r.Read(k)
			c, err := binary.ReadVarint(r)
			if err != nil {
				return shortener.VisitStats{}, ErrCorrupt
			}
			(*m)[string(k)] = c
		}
	}
	if r.Len() != 0 {
		return shortener.VisitStats{}, ErrCorrupt
	}
	return st, nil
}

// Total returns the Total of a record without decoding the rest.
func Total(v []byte) (int64, error) {
	if len(v) < 2 || v[0] != version {
		return 0, ErrCorrupt
	}
	n, k := binary.Varint(v[1:])
	if k <= 0 {
		return 0, ErrCorrupt
	}
	return n, nil
}

// KeyCount is a count to add under one key of a record.
type KeyCount struct {
	Kind shortener.VisitKind
	Key  []byte
	N    int64
}

// Delta is what to add to a record.
type Delta struct {
	Total, Bots int64
	Counts      []KeyCount // sorted by kind, then key, each key once (see Normalize)
}

// Reset empties d, keeping its memory.
func (d *Delta) Reset() {
	d.Total, d.Bots = 0, 0
	clear(d.Counts)
	d.Counts = d.Counts[:0]
}

// Empty reports whether d adds nothing.
func (d *Delta) Empty() bool { return d.Total == 0 && d.Bots == 0 && len(d.Counts) == 0 }

// KeyNames appends to dst the names of b's keys, as AddBatch takes them:
// converted once per batch rather than once per link.
func KeyNames(dst [][]byte, b *shortener.VisitBatch) [][]byte {
	for _, k := range b.Keys {
		dst = append(dst, []byte(k.Name))
	}
	return dst
}

// AddBatch adds what batch adds to its link i; names is KeyNames of b
// (the counts' keys alias it).
func (d *Delta) AddBatch(b *shortener.VisitBatch, i int, names [][]byte) {
	l := &b.Links[i]
	d.Total += l.Total
	d.Bots += l.Bots
	for _, c := range l.Counts {
		d.Counts = append(d.Counts, KeyCount{b.Keys[c.Key].Kind, names[c.Key], c.N})
	}
}

// AddRecord adds the counts of record v to d (not normalized); the keys
// alias v.
func (d *Delta) AddRecord(v []byte) error {
	if len(v) < 1 || v[0] != version {
		return ErrCorrupt
	}
	rest := v[1:]
	total, n := binary.Varint(rest)
	if n <= 0 {
		return ErrCorrupt
	}
	rest = rest[n:]
	bots, n := binary.Varint(rest)
	if n <= 0 {
		return ErrCorrupt
	}
	rest = rest[n:]
	d.Total += total
	d.Bots += bots
	for kind := range shortener.NumVisitKinds {
		sec, n := section(rest)
		if n < 0 {
			return ErrCorrupt
		}
		rest = rest[n:]
		for len(sec) > 0 {
			var k []byte
			var c int64
			k, c, sec = next(sec)
			d.Counts = append(d.Counts, KeyCount{kind, k, c})
		}
	}
	if len(rest) != 0 {
		return ErrCorrupt
	}
	return nil
}

// Normalize sorts d's counts and adds up those of the same key.
func (d *Delta) Normalize() {
	if c := d.Counts; len(c) <= 12 {
		// A link's counts of one batch or a few: an insertion sort,
		// without the generic sort's indirect calls.
		for i := 1; i < len(c); i++ {
			for j := i; j > 0 && keyLess(&c[j], &c[j-1]); j-- {
				c[j], c[j-1] = c[j-1], c[j]
			}
		}
	} else {
		slices.SortFunc(c, func(a, b KeyCount) int {
			if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
				return c
			}
			return bytes.Compare(a.Key, b.Key)
		})
	}
	out := d.Counts[:0]
	for _, c := range d.Counts {
		if n := len(out); n > 0 && out[n-1].Kind == c.Kind && string(out[n-1].Key) == string(c.Key) {
			out[n-1].N += c.N
			continue
		}
		out = append(out, c)
	}
	d.Counts = out
}

func keyLess(a, b *KeyCount) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	return string(a.Key) < string(b.Key)
}

// FromStats returns the normalized delta of statistics in map form.
func FromStats(st *shortener.VisitStats) Delta {
	d := Delta{Total: st.Total, Bots: st.Bots}
	for kind := range shortener.NumVisitKinds {
		for k, n := range *st.Breakdown(kind) {
			d.Counts = append(d.Counts, KeyCount{kind, []byte(k), n})
		}
	}
	d.Normalize()
	return d
}

// Stats returns d in map form.
func (d *Delta) Stats() shortener.VisitStats {
	st := shortener.VisitStats{Total: d.Total, Bots: d.Bots}
	for _, c := range d.Counts {
		bd := st.Breakdown(c.Kind)
		if *bd == nil {
			*bd = shortener.Breakdown{}
		}
		(*bd)[string(c.Key)] += c.N
	}
	return st
}

// Merge appends to dst the record old (nil: none) plus d (normalized),
// bounded as shortener.VisitStats.Bound bounds: in one pass when the
// result is within the bounds, else by decoding, adding and bounding.
func Merge(dst, old []byte, d *Delta) ([]byte, error) {
	if out, ok := mergeRecord(dst, old, d); ok {
		return out, nil
	}
	var st shortener.VisitStats
	if old != nil {
		var err error
		if st, err = Decode(old); err != nil {
			return dst, err
		}
	}
	st.Add(d.Stats())
	st.Bound()
	return append(dst, Encode(st)...), nil
}

// mergeRecord is Merge's one pass; ok=false (dst unchanged) when the
// result would exceed a bound or old is malformed.
func mergeRecord(dst, old []byte, d *Delta) (_ []byte, ok bool) {
	start := len(dst)
	var total, bots int64
	var rest []byte
	if old != nil {
		if len(old) < 1 || old[0] != version {
			return dst, false
		}
		rest = old[1:]
		var n int
		if total, n = binary.Varint(rest); n <= 0 {
			return dst, false
		}
		rest = rest[n:]
		if bots, n = binary.Varint(rest); n <= 0 {
			return dst, false
		}
		rest = rest[n:]
	}
	dst = append(dst, version)
	dst = binary.AppendVarint(dst, total+d.Total)
	dst = binary.AppendVarint(dst, bots+d.Bots)
	counts := d.Counts
	for kind := range shortener.NumVisitKinds {
		var sec []byte
		if old != nil {
			var n int
			if sec, n = section(rest); n < 0 {
				return dst[:start], false
			}
			rest = rest[n:]
		}
		j := 0
		for j < len(counts) && counts[j].Kind == kind {
			j++
		}
		var ok bool
		if dst, ok = mergeSection(dst, sec, counts[:j], bounds[kind]); !ok {
			return dst[:start], false
		}
		counts = counts[j:]
	}
	if len(rest) != 0 || len(counts) != 0 {
		return dst[:start], false
	}
	return dst, true
}

// bounds of each section, by kind.
var bounds = [shortener.NumVisitKinds]int{shortener.MaxStatDays, shortener.MaxStatReferrers, shortener.MaxStatKeys, shortener.MaxStatKeys, shortener.MaxStatKeys}

// section returns the entries of the section at the start of b (after its
// count) and the section's whole length, or -1 if it is malformed.
func section(b []byte) (entries []byte, n int) {
	count, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, -1
	}
	p := k
	for range count {
		kl, k := binary.Uvarint(b[p:])
		if k <= 0 || kl > uint64(len(b)-p-k) {
			return nil, -1
		}
		p += k + int(kl)
		if _, k = binary.Varint(b[p:]); k <= 0 {
			return nil, -1
		}
		p += k
	}
	return b[k:p], p
}

// next reads one entry of a section validated by section.
func next(b []byte) (key []byte, n int64, rest []byte) {
	kl, k := binary.Uvarint(b)
	key = b[k : k+int(kl)]
	n, m := binary.Varint(b[k+int(kl):])
	return key, n, b[k+int(kl)+m:]
}

// mergeSection appends the count and the merged entries of one section:
// old's (validated by section) plus add's (sorted by key, each once).
func mergeSection(dst, old []byte, add []KeyCount, bound int) ([]byte, bool) {
	// Count the union: a merge walk of two sorted lists.
	count, i := 0, 0
	for b := old; len(b) > 0; {
		var k []byte
		k, _, b = next(b)
		for i < len(add) && string(add[i].Key) < string(k) {
			i, count = i+1, count+1
		}
		if i < len(add) && string(add[i].Key) == string(k) {
			i++
		}
		count++
	}
	count += len(add) - i
	if count > bound {
		return dst, false
	}
	dst = binary.AppendUvarint(dst, uint64(count))
	b := old
	for _, a := range add {
		n := a.N
		for len(b) > 0 {
			ok, on, rest := next(b)
			if string(ok) > string(a.Key) {
				break
			}
			b = rest
			if string(ok) == string(a.Key) {
				n += on
				break
			}
			dst = appendEntry(dst, ok, on)
		}
		dst = appendEntry(dst, a.Key, n)
	}
	return append(dst, b...), true // the rest of old, as it is
}

func appendEntry[K string | []byte](dst []byte, k K, n int64) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(k)))
	dst = append(dst, k...)
	return binary.AppendVarint(dst, n)
}
