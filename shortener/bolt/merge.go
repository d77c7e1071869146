package bolt

import (
	"encoding/binary"
	"slices"

	"github.com/linkgate/linkgate/shortener"
)

// mergeStats appends to dst the statistics record old (nil: none) plus d,
// without decoding old into maps: each section's entries are sorted by key
// on disk, so the delta's few keys are merged in one pass. It returns
// ok=false, and dst unchanged, when the result would exceed a bound (or
// old is malformed): the caller then takes the slow path (decode, Add,
// Bound, encode).
func mergeStats(dst, old []byte, d *shortener.VisitStats) (_ []byte, ok bool) {
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
	dst = binary.AppendVarint(dst, total+d.Total)
	dst = binary.AppendVarint(dst, bots+d.Bots)
	bounds := [...]int{shortener.MaxStatDays, shortener.MaxStatReferrers, shortener.MaxStatKeys, shortener.MaxStatKeys, shortener.MaxStatKeys}
	for i, m := range [...]shortener.Breakdown{d.Days, d.Referrers, d.Browsers, d.BotAgents, d.Countries} {
		var sec []byte
		if old != nil {
			var n int
			if sec, n = section(rest); n < 0 {
				return dst[:start], false
			}
			rest = rest[n:]
		}
		var ok bool
		if dst, ok = mergeSection(dst, sec, m, bounds[i]); !ok {
			return dst[:start], false
		}
	}
	if len(rest) != 0 {
		return dst[:start], false
	}
	return dst, true
}

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

// next reads one entry of a section.
func next(b []byte) (key []byte, n int64, rest []byte) {
	kl, k := binary.Uvarint(b)
	key = b[k : k+int(kl)]
	n, m := binary.Varint(b[k+int(kl):])
	return key, n, b[k+int(kl)+m:]
}

// mergeSection appends the count and the merged entries of one section:
// old's (validated by section) plus m's, in key order.
func mergeSection(dst, old []byte, m shortener.Breakdown, bound int) ([]byte, bool) {
	var keyBuf [16]string
	keys := keyBuf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// Count the union: a merge walk of two sorted lists.
	count, i := 0, 0
	for b := old; len(b) > 0; {
		var k []byte
		k, _, b = next(b)
		for i < len(keys) && keys[i] < string(k) {
			i, count = i+1, count+1
		}
		if i < len(keys) && keys[i] == string(k) {
			i++
		}
		count++
	}
	count += len(keys) - i
	if count > bound {
		return dst, false
	}
	dst = binary.AppendUvarint(dst, uint64(count))
	b := old
	for _, k := range keys {
		n := m[k]
		for len(b) > 0 {
			ok, on, rest := next(b)
			if string(ok) > k {
				break
			}
			b = rest
			if string(ok) == k {
				n += on
				break
			}
			dst = appendEntry(dst, ok, on)
		}
		dst = appendEntry(dst, []byte(k), n)
	}
	return append(dst, b...), true // the rest of old, as it is
}

func appendEntry[K string | []byte](dst []byte, k K, n int64) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(k)))
	dst = append(dst, k...)
	return binary.AppendVarint(dst, n)
}
