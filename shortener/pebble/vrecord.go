package pebble

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/linkgate/linkgate/shortener"
)

// Visit statistics, store format 3 (docs/visits.md, "Storage"). Counts are
// kept per time bucket, keyed by time first:
//
//	'v' res bucket subject        a bucket record (below)
//	    res      'h' (hours, kept HourRetention) or 'd' (days, kept DayRetention)
//	    bucket   u32 big-endian: hours or days since 1970-01-01 UTC
//	    subject  'l' link key | 'a' (all links) | 'd' domain | 't' tag
//	'v' 's' span 'l' link key     a span record (below)
//	    span     u32 big-endian: days since 1970-01-01 UTC / spanDays
//	's' link key                  the link's lifetime totals (below)
//
// so a flush writes into the current hour's and day's keys only, which
// sit together at the end of their ranges: compactions rewrite those, not
// every link's record as the lifetime records of format 1 made them do
// (one merge per link per flush into keys spread over the whole range).
// Dropping what is older than the retention is one range deletion.
//
// A bucket record:
//
//	byte    version (1)
//	uvarint people, uvarint bots     (the series)
//	then entries sorted by kind, bot, name:
//	byte kind (shortener.VisitKind), byte bot (0, 1), uvarint name length,
//	name, uvarint count
//
// Two records add in one pass over both (the merge operator).
//
// A span record is a link's series (no dimensions) over the days of an
// aligned span of spanDays days, for the top links of an all-links query:
// a 30-day range reads at most two per link rather than 31 day records
// with their dimensions (format 3; format 2 had the day records only):
//
//	byte version (1), then per day with visits, by day:
//	byte day within the span, uvarint people, uvarint bots
//
// Lifetime totals ('s'), format 4 (docs/store.md):
//
//	byte version · uvarint total · uvarint bots · uvarint first · uvarint last
//
// Version 2, a complete record: the link's lifetime totals, merged by
// every flush; the record of a link with a visit limit, which every
// redirect of it reads (the format-3 record of every link). Version 3, a
// base record: what the link's span records do not hold (visits of days
// folded in when their span left the retention, of imports beyond it,
// minus the span records of an earlier link under the id), merged by no
// flush: the link's totals are its base plus its span records', its days
// theirs from first on (an earlier link's before; 0: all). A link without
// a record has a base (or, with a visit limit, totals) of 0.
//
// Format 1 kept a statsrec record there (shortener/internal/statsrec),
// version 1; migrate turns it into the above.
const (
	kindVisits      = 'v'
	resHour         = 'h'
	resDay          = 'd'
	subjectLink     = 'l'
	subjectAll      = 'a'
	subjectDomain   = 'd'
	subjectTag      = 't'
	resSpan         = 's'
	spanDays        = 32
	brecVersion     = 1
	spanVersion     = 1
	totalsVersion   = 2
	baseVersion     = 3
	visitsKeyPrefix = 1 + 1 + 4
)

var errCorruptVisits = errors.New("corrupt visit statistics record")

// bucketKey appends the key of a bucket record.
func bucketKey[T string | []byte](dst []byte, res byte, bucket uint32, subject byte, name T) []byte {
	dst = append(dst, kindVisits, res)
	dst = binary.BigEndian.AppendUint32(dst, bucket)
	dst = append(dst, subject)
	return append(dst, name...)
}

// ventry is one entry of a bucket record.
type ventry struct {
	kind shortener.VisitKind
	bot  bool
	name []byte
	n    int64
}

func ventryCmp(a, b *ventry) int {
	if c := cmp.Compare(a.kind, b.kind); c != 0 {
		return c
	}
	if a.bot != b.bot {
		if a.bot {
			return 1
		}
		return -1
	}
	return bytes.Compare(a.name, b.name)
}

// sortEntries sorts es and adds up those of the same key.
func sortEntries(es []ventry) []ventry {
	slices.SortFunc(es, func(a, b ventry) int { return ventryCmp(&a, &b) })
	out := es[:0]
	for _, e := range es {
		if n := len(out); n > 0 && ventryCmp(&out[n-1], &e) == 0 {
			out[n-1].n += e.n
			continue
		}
		out = append(out, e)
	}
	return out
}

// mergeEntries appends to dst the entries of a and b, both sorted, in
// order, those of the same key added up.
func mergeEntries(dst, a, b []ventry) []ventry {
	for len(a) > 0 && len(b) > 0 {
		switch c := ventryCmp(&a[0], &b[0]); {
		case c < 0:
			dst, a = append(dst, a[0]), a[1:]
		case c > 0:
			dst, b = append(dst, b[0]), b[1:]
		default:
			e := a[0]
			e.n += b[0].n
			dst, a, b = append(dst, e), a[1:], b[1:]
		}
	}
	return append(append(dst, a...), b...)
}

// appendBrec appends a bucket record; es must be sorted (sortEntries).
func appendBrec(dst []byte, people, bots int64, es []ventry) []byte {
	dst = append(dst, brecVersion)
	dst = binary.AppendUvarint(dst, uint64(people))
	dst = binary.AppendUvarint(dst, uint64(bots))
	for i := range es {
		dst = appendEntry(dst, &es[i])
	}
	return dst
}

func appendEntry(dst []byte, e *ventry) []byte {
	b := byte(0)
	if e.bot {
		b = 1
	}
	dst = append(dst, byte(e.kind), b)
	dst = binary.AppendUvarint(dst, uint64(len(e.name)))
	dst = append(dst, e.name...)
	return binary.AppendUvarint(dst, uint64(e.n))
}

// brecHeader returns a record's series counts and its entries.
func brecHeader(v []byte) (people, bots int64, entries []byte, err error) {
	if len(v) < 1 || v[0] != brecVersion {
		return 0, 0, nil, errCorruptVisits
	}
	p, k := binary.Uvarint(v[1:])
	if k <= 0 {
		return 0, 0, nil, errCorruptVisits
	}
	b, m := binary.Uvarint(v[1+k:])
	if m <= 0 {
		return 0, 0, nil, errCorruptVisits
	}
	return int64(p), int64(b), v[1+k+m:], nil
}

// nextEntry reads the entry at the start of b into e (its name aliases
// b) and returns the rest.
func nextEntry(b []byte, e *ventry) ([]byte, error) {
	if len(b) < 3 || b[1] > 1 || b[0] >= byte(shortener.NumKinds) {
		return nil, errCorruptVisits
	}
	e.kind, e.bot = shortener.VisitKind(b[0]), b[1] == 1
	l, k := binary.Uvarint(b[2:])
	if k <= 0 || l > uint64(len(b)-2-k) {
		return nil, errCorruptVisits
	}
	p := 2 + k
	e.name = b[p : p+int(l)]
	p += int(l)
	n, k := binary.Uvarint(b[p:])
	if k <= 0 {
		return nil, errCorruptVisits
	}
	e.n = int64(n)
	return b[p+k:], nil
}

// mergeBrec appends the sum of records a and b to dst.
func mergeBrec(dst, a, b []byte) ([]byte, error) {
	pa, ba, ea, err := brecHeader(a)
	if err != nil {
		return dst, err
	}
	pb, bb, eb, err := brecHeader(b)
	if err != nil {
		return dst, err
	}
	dst = append(dst, brecVersion)
	dst = binary.AppendUvarint(dst, uint64(pa+pb))
	dst = binary.AppendUvarint(dst, uint64(ba+bb))
	var x, y ventry
	var okx, oky bool
	advance := func(rest []byte, e *ventry) ([]byte, bool, error) {
		if len(rest) == 0 {
			return nil, false, nil
		}
		r, err := nextEntry(rest, e)
		return r, err == nil, err
	}
	if ea, okx, err = advance(ea, &x); err != nil {
		return dst, err
	}
	if eb, oky, err = advance(eb, &y); err != nil {
		return dst, err
	}
	for okx || oky {
		var c int
		switch {
		case !oky:
			c = -1
		case !okx:
			c = 1
		default:
			c = ventryCmp(&x, &y)
		}
		switch {
		case c < 0:
			dst = appendEntry(dst, &x)
			ea, okx, err = advance(ea, &x)
		case c > 0:
			dst = appendEntry(dst, &y)
			eb, oky, err = advance(eb, &y)
		default:
			x.n += y.n
			dst = appendEntry(dst, &x)
			if ea, okx, err = advance(ea, &x); err == nil {
				eb, oky, err = advance(eb, &y)
			}
		}
		if err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// addBrec adds record v, a bucket's, to series point i of c and to its
// dimensions.
func addBrec(c *shortener.VisitCounts, i int, v []byte) error {
	people, bots, rest, err := brecHeader(v)
	if err != nil {
		return err
	}
	c.Series[i].Add(shortener.PeopleBots{People: people, Bots: bots})
	var e ventry
	for len(rest) > 0 {
		if rest, err = nextEntry(rest, &e); err != nil {
			return err
		}
		d, ok := shortener.KindDimension(e.kind)
		if !ok {
			continue
		}
		m := c.Dims[d]
		pb := m[string(e.name)]
		if e.bot {
			pb.Bots += e.n
		} else {
			pb.People += e.n
		}
		m[string(e.name)] = pb
	}
	return nil
}

// appendSpanDay appends to dst, a span record (its version first), the
// entry of day (the span's day) counting people and bots; entries are
// appended by day.
func appendSpanDay(dst []byte, day byte, people, bots int64) []byte {
	dst = append(dst, day)
	dst = binary.AppendUvarint(dst, uint64(people))
	return binary.AppendUvarint(dst, uint64(bots))
}

// nextSpanDay reads the entry at the start of b, a span record's entries,
// and returns the rest.
func nextSpanDay(b []byte) (day byte, pb shortener.PeopleBots, rest []byte, err error) {
	if len(b) < 3 || b[0] >= spanDays {
		return 0, pb, nil, errCorruptVisits
	}
	p, k := binary.Uvarint(b[1:])
	if k <= 0 {
		return 0, pb, nil, errCorruptVisits
	}
	n, m := binary.Uvarint(b[1+k:])
	if m <= 0 {
		return 0, pb, nil, errCorruptVisits
	}
	return b[0], shortener.PeopleBots{People: int64(p), Bots: int64(n)}, b[1+k+m:], nil
}

// spanEntries returns a span record's entries.
func spanEntries(v []byte) ([]byte, error) {
	if len(v) < 1 || v[0] != spanVersion {
		return nil, errCorruptVisits
	}
	return v[1:], nil
}

// spanSum returns the visits of span record v on its days lo to hi.
func spanSum(v []byte, lo, hi byte) (shortener.PeopleBots, error) {
	var sum shortener.PeopleBots
	rest, err := spanEntries(v)
	for err == nil && len(rest) > 0 {
		var day byte
		var pb shortener.PeopleBots
		if day, pb, rest, err = nextSpanDay(rest); err == nil && day >= lo && day <= hi {
			sum.Add(pb)
		}
	}
	return sum, err
}

// mergeSpan appends the sum of span records a and b to dst.
func mergeSpan(dst, a, b []byte) ([]byte, error) {
	ea, err := spanEntries(a)
	if err != nil {
		return dst, err
	}
	eb, err := spanEntries(b)
	if err != nil {
		return dst, err
	}
	dst = append(dst, spanVersion)
	var da, db byte
	var pa, pb shortener.PeopleBots
	oka, okb := len(ea) > 0, len(eb) > 0
	if oka {
		if da, pa, ea, err = nextSpanDay(ea); err != nil {
			return dst, err
		}
	}
	if okb {
		if db, pb, eb, err = nextSpanDay(eb); err != nil {
			return dst, err
		}
	}
	for oka || okb {
		switch {
		case oka && (!okb || da < db):
			dst = appendSpanDay(dst, da, pa.People, pa.Bots)
			oka = len(ea) > 0
			if oka {
				da, pa, ea, err = nextSpanDay(ea)
			}
		case okb && (!oka || db < da):
			dst = appendSpanDay(dst, db, pb.People, pb.Bots)
			okb = len(eb) > 0
			if okb {
				db, pb, eb, err = nextSpanDay(eb)
			}
		default: // the same day in both
			pa.Add(pb)
			dst = appendSpanDay(dst, da, pa.People, pa.Bots)
			oka, okb = len(ea) > 0, len(eb) > 0
			if oka {
				da, pa, ea, err = nextSpanDay(ea)
			}
			if okb && err == nil {
				db, pb, eb, err = nextSpanDay(eb)
			}
		}
		if err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// totals is a link's lifetime totals record: its visits, and the first
// and last day it has day records for (days since 1970 + 1; 0: none or,
// from a format-1 record, unknown), so a lifetime read (VisitStats)
// reads the days between only.
type totals struct {
	total, bots int64
	first, last uint32
	base        bool // a base record (version 3)
}

// add adds o to t.
func (t *totals) add(o totals) {
	t.total += o.total
	t.bots += o.bots
	if o.first != 0 && (t.first == 0 || o.first < t.first) {
		t.first = o.first
	}
	t.last = max(t.last, o.last)
}

// appendTotals appends a lifetime totals record.
func appendTotals(dst []byte, t totals) []byte {
	dst = append(dst, totalsVersion)
	if t.base {
		dst[len(dst)-1] = baseVersion
	}
	dst = binary.AppendUvarint(dst, uint64(t.total))
	dst = binary.AppendUvarint(dst, uint64(t.bots))
	dst = binary.AppendUvarint(dst, uint64(t.first))
	return binary.AppendUvarint(dst, uint64(t.last))
}

// decodeTotals reads a lifetime totals or base record, or (before
// migration) a format-1 record.
func decodeTotals(v []byte) (totals, error) {
	if len(v) > 0 && v[0] == 1 {
		st, err := decodeStatsV1(v)
		return totals{total: st.Total, bots: st.Bots}, err
	}
	if len(v) < 5 || v[0] != totalsVersion && v[0] != baseVersion {
		return totals{}, errCorruptVisits
	}
	var f [4]uint64
	p := 1
	for i := range f {
		x, k := binary.Uvarint(v[p:])
		if k <= 0 {
			return totals{}, errCorruptVisits
		}
		f[i], p = x, p+k
	}
	if p != len(v) || f[2] > f[3] || f[3] > 1<<32-1 {
		return totals{}, errCorruptVisits
	}
	return totals{int64(f[0]), int64(f[1]), uint32(f[2]), uint32(f[3]), v[0] == baseVersion}, nil
}
