package bolt

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/linkgate/linkgate/shortener"
)

// keyCount is a count to add under one key of a statistics record.
type keyCount struct {
	kind shortener.VisitKind
	key  []byte
	n    int64
}

// delta is what to add to one link's statistics record.
type delta struct {
	total, bots int64
	counts      []keyCount // sorted by kind, then key; each key once (see normalize)
}

func (d *delta) reset() {
	d.total, d.bots = 0, 0
	d.counts = d.counts[:0]
}

func (d *delta) empty() bool { return d.total == 0 && d.bots == 0 && len(d.counts) == 0 }

// normalize sorts d's counts and adds up those of the same key.
func (d *delta) normalize() {
	if c := d.counts; len(c) <= 12 {
		// A link's counts of one batch or a few: an insertion sort,
		// without the generic sort's indirect calls.
		for i := 1; i < len(c); i++ {
			for j := i; j > 0 && keyLess(&c[j], &c[j-1]); j-- {
				c[j], c[j-1] = c[j-1], c[j]
			}
		}
	} else {
		slices.SortFunc(c, func(a, b keyCount) int {
			if c := cmp.Compare(a.kind, b.kind); c != 0 {
				return c
			}
			return bytes.Compare(a.key, b.key)
		})
	}
	out := d.counts[:0]
	for _, c := range d.counts {
		if n := len(out); n > 0 && out[n-1].kind == c.kind && string(out[n-1].key) == string(c.key) {
			out[n-1].n += c.n
			continue
		}
		out = append(out, c)
	}
	d.counts = out
}

func keyLess(a, b *keyCount) bool {
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return string(a.key) < string(b.key)
}

// deltaOf returns the delta of statistics in map form.
func deltaOf(st *shortener.VisitStats) delta {
	d := delta{total: st.Total, bots: st.Bots}
	for kind := range shortener.NumVisitKinds {
		for k, n := range *st.Breakdown(kind) {
			d.counts = append(d.counts, keyCount{kind, []byte(k), n})
		}
	}
	d.normalize()
	return d
}

// mergeStats appends to dst the statistics record old (nil: none) plus d.
func mergeStats(dst, old []byte, d *shortener.VisitStats) (_ []byte, ok bool) {
	dd := deltaOf(d)
	return mergeRecord(dst, old, &dd)
}

// mergeRecord appends to dst the statistics record old (nil: none) plus d,
// without decoding old into maps: each section's entries are sorted by key
// on disk, as d's are, so they are merged in one pass. It returns
// ok=false, and dst unchanged, when the result would exceed a bound (or
// old is malformed): the caller then takes the slow path (addSlow).
func mergeRecord(dst, old []byte, d *delta) (_ []byte, ok bool) {
	start := len(dst)
	var total, bots int64
	rest := []byte(nil)
	if old != nil {
		if len(old) < 1 || old[0] != statsVersion {
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
	dst = append(dst, statsVersion)
	dst = binary.AppendVarint(dst, total+d.total)
	dst = binary.AppendVarint(dst, bots+d.bots)
	counts := d.counts
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
		for j < len(counts) && counts[j].kind == kind {
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
func mergeSection(dst, old []byte, add []keyCount, bound int) ([]byte, bool) {
	// Count the union: a merge walk of two sorted lists.
	count, i := 0, 0
	for b := old; len(b) > 0; {
		var k []byte
		k, _, b = next(b)
		for i < len(add) && string(add[i].key) < string(k) {
			i, count = i+1, count+1
		}
		if i < len(add) && string(add[i].key) == string(k) {
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
		n := a.n
		for len(b) > 0 {
			ok, on, rest := next(b)
			if string(ok) > string(a.key) {
				break
			}
			b = rest
			if string(ok) == string(a.key) {
				n += on
				break
			}
			dst = appendEntry(dst, ok, on)
		}
		dst = appendEntry(dst, a.key, n)
	}
	return append(dst, b...), true // the rest of old, as it is
}

func appendEntry[K string | []byte](dst []byte, k K, n int64) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(k)))
	dst = append(dst, k...)
	return binary.AppendVarint(dst, n)
}

// addSlow appends to dst old (nil: none) plus d the slow way, bounding the
// result: decode, add, bound, encode.
func addSlow(dst, old []byte, d *delta) ([]byte, error) {
	var st shortener.VisitStats
	if old != nil {
		var err error
		if st, err = decodeStats(old); err != nil {
			return dst, err
		}
	}
	st.Add(d.stats())
	st.Bound()
	return append(dst, encodeStats(st)...), nil
}

// stats returns d in map form.
func (d *delta) stats() shortener.VisitStats {
	st := shortener.VisitStats{Total: d.total, Bots: d.bots}
	for _, c := range d.counts {
		bd := st.Breakdown(c.kind)
		if *bd == nil {
			*bd = shortener.Breakdown{}
		}
		(*bd)[string(c.key)] += c.n
	}
	return st
}

// merge appends old plus d to dst, bounded: in one pass when it can,
// else the slow way.
func merge(dst, old []byte, d *delta) ([]byte, error) {
	if out, ok := mergeRecord(dst, old, d); ok {
		return out, nil
	}
	return addSlow(dst, old, d)
}
