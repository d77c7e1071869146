package dynamodb

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/linkgate/linkgate/shortener"
)

// A deltaSet is visit statistics of many links, per link and calendar
// month (UTC): what a log record (or one part of it) carries, and what a
// state item keeps. Its breakdown keys (days, referrer hosts, browsers…)
// are numbered once per set, and each row holds a link's counts by key
// number, so a set of tens of thousands of links costs little memory and
// no map per link.
//
// A row's CreatedAt is the link's CreatedAt in Unix seconds (0: unknown):
// readers count only the rows of the link they read, so the visits of a
// deleted link never reach a new link under the same id.
type deltaSet struct {
	keys  []shortener.VisitKey
	index map[shortener.VisitKey]uint32
	rows  []row
	pos   map[rowKey]int // index of each row in rows
	size  int            // about the encoded size, in bytes
}

type row struct {
	rowKey
	Total, Bots int64
	Counts      []shortener.KeyCount // sorted by key number, each once
}

type rowKey struct {
	ID        string
	CreatedAt int64
	Month     int32 // months since January 1970
}

func newDeltaSet() *deltaSet {
	return &deltaSet{index: map[shortener.VisitKey]uint32{}, pos: map[rowKey]int{}}
}

func (s *deltaSet) len() int { return len(s.rows) }

// key returns the number of k, adding it.
func (s *deltaSet) key(k shortener.VisitKey) uint32 {
	i, ok := s.index[k]
	if !ok {
		i = uint32(len(s.keys))
		s.keys = append(s.keys, k)
		s.index[k] = i
		s.size += len(k.Name) + 2
	}
	return i
}

// row returns the row of k, adding an empty one. The pointer is good until
// the next row is added.
func (s *deltaSet) row(k rowKey) *row {
	i, ok := s.pos[k]
	if !ok {
		i = len(s.rows)
		s.rows = append(s.rows, row{rowKey: k})
		s.pos[k] = i
		s.size += len(k.ID) + 12
	}
	return &s.rows[i]
}

// count adds n visits under key number k to r.
func (s *deltaSet) count(r *row, k uint32, n int64) {
	if n <= 0 {
		return
	}
	i, found := slices.BinarySearchFunc(r.Counts, k, func(c shortener.KeyCount, k uint32) int { return cmp.Compare(c.Key, k) })
	if found {
		r.Counts[i].N += n
		return
	}
	r.Counts = slices.Insert(r.Counts, i, shortener.KeyCount{Key: k, N: n})
	s.size += 3
}

// addRow adds row r of set src to s.
func (s *deltaSet) addRow(src *deltaSet, r *row) {
	d := s.row(r.rowKey)
	d.Total += r.Total
	d.Bots += r.Bots
	for _, c := range r.Counts {
		s.count(d, s.key(src.keys[c.Key]), c.N)
	}
}

// addAll adds every row of src to s.
func (s *deltaSet) addAll(src *deltaSet) {
	for i := range src.rows {
		s.addRow(src, &src.rows[i])
	}
}

// addVisits adds a link's visits of one batch: counts of the hourly form
// (the aggregator's) to the months of their hours, day counts of the
// lifetime form to their months; the total and bots to the month of the
// latest hour or day, or of now without either. A batch covers a few
// seconds, so only one across a month's end splits.
func (s *deltaSet) addVisits(b *shortener.VisitBatch, l *shortener.LinkVisits, total int64, now time.Time) {
	latest := int32(-1)
	for _, c := range l.Counts {
		if m, ok := keyMonth(b.Keys[c.Key]); ok && m > latest {
			latest = m
		}
	}
	if latest < 0 {
		latest = monthOfTime(now)
	}
	main := rowKey{l.ID, l.CreatedAt, latest}
	r := s.row(main)
	r.Total += total
	r.Bots += l.Bots
	for _, c := range l.Counts {
		k := b.Keys[c.Key]
		rk := main
		if m, ok := keyMonth(k); ok {
			rk.Month = m
		}
		// row may grow s.rows: a row's address holds until the next one.
		s.count(s.row(rk), s.key(k), c.N)
	}
}

// addStats adds statistics kept in the map form (the item attributes of
// the old layout), split by month as addVisits does.
func (s *deltaSet) addStats(id string, createdAt int64, st shortener.VisitStats, now time.Time) {
	b := shortener.NewVisitBatch(shortener.VisitDelta{ID: id, Stats: st, CreatedAt: createdAt})
	if len(b.Links) == 1 {
		s.addVisits(b, &b.Links[0], st.Total, now)
	}
}

// rangeCounts adds the counts of row r within q's range to c. Counts of
// the lifetime form (rows written before the hourly form) count as
// shortener.VisitBatch.HourlyFrom places them: a day's as people's visits
// in its first hour, the breakdowns in the first hour of the row's latest
// day (of its month's first day without days). It returns what it added
// to the series.
func (s *deltaSet) rangeCounts(r *row, q *shortener.StatsQuery, c *shortener.VisitCounts) shortener.PeopleBots {
	var series shortener.PeopleBots
	latest := int32(-1)
	for _, kc := range r.Counts {
		if k := &s.keys[kc.Key]; k.Hour == 0 && k.Kind == shortener.KindDay {
			if t, err := time.Parse(shortener.DayFormat, k.Name); err == nil && t.Unix() > 0 {
				latest = max(latest, int32(t.Unix()/3600))
			}
		}
	}
	if latest < 0 {
		latest = int32(time.Date(1970+int(r.Month)/12, time.Month(r.Month%12+1), 1, 0, 0, 0, 0, time.UTC).Unix() / 3600)
	}
	for _, kc := range r.Counts {
		k := s.keys[kc.Key]
		if k.Hour == 0 {
			if k.Kind != shortener.KindDay {
				k = shortener.VisitKey{Kind: k.Kind, Name: k.Name, Hour: latest, Bot: k.Kind == shortener.KindBot}
			} else if t, err := time.Parse(shortener.DayFormat, k.Name); err == nil && t.Unix() > 0 {
				k = shortener.VisitKey{Kind: shortener.KindHour, Hour: int32(t.Unix() / 3600)}
			} else {
				continue
			}
		}
		series.Add(c.AddKey(q, k, kc.N))
	}
	return series
}

// keyMonth returns the month a key counts in: its hour's (hourly form),
// its day's (a day of the lifetime form); false for the lifetime form's
// other keys.
func keyMonth(k shortener.VisitKey) (int32, bool) {
	switch {
	case k.Hour != 0:
		return monthOfTime(time.Unix(int64(k.Hour)*3600, 0)), true
	case k.Kind == shortener.KindDay:
		return monthOf(k.Name)
	}
	return 0, false
}

// lifetimeKey returns the key of the lifetime form (VisitStats) that a
// key counts under: an hourly key's day or breakdown; false for the
// dimensions VisitStats does not keep.
func lifetimeKey(k shortener.VisitKey) (shortener.VisitKey, bool) {
	switch {
	case k.Hour == 0:
		return k, true
	case k.Kind == shortener.KindHour:
		return shortener.VisitKey{Kind: shortener.KindDay, Name: time.Unix(int64(k.Hour)*3600, 0).UTC().Format(shortener.DayFormat)}, true
	case k.Kind < shortener.NumVisitKinds:
		return shortener.VisitKey{Kind: k.Kind, Name: k.Name}, true
	}
	return k, false
}

// stats returns the statistics of row r, in the lifetime form.
func (s *deltaSet) stats(r *row) shortener.VisitStats {
	st := shortener.VisitStats{Total: r.Total, Bots: r.Bots}
	for _, c := range r.Counts {
		k, ok := lifetimeKey(s.keys[c.Key])
		if !ok {
			continue
		}
		bd := st.Breakdown(k.Kind)
		if *bd == nil {
			*bd = shortener.Breakdown{}
		}
		(*bd)[k.Name] += c.N
	}
	return st
}

// bound trims row r to the stored bounds. Counts of the lifetime form
// (rows written before the hourly form) as shortener.VisitStats.Bound
// does: a link's referrers, browsers, bots and countries beyond them are
// counted under shortener.OtherKey. Counts of the hourly form by name:
// of each dimension, the MaxDimValues names with the most visits in the
// row's month keep theirs, the others' visits are counted under
// shortener.OtherKey in their hours; and hours older than dayAfter (0:
// none) are counted in the first hour of their day, since only days are
// asked for beyond shortener.HourRetention.
func (s *deltaSet) bound(r *row, dayAfter int32) {
	var perKind [shortener.NumKinds]int
	hourly, lifetime := false, false
	for _, c := range r.Counts {
		k := &s.keys[c.Key]
		if k.Hour == 0 {
			perKind[k.Kind]++
			lifetime = true
			continue
		}
		hourly = true
	}
	if lifetime && (perKind[shortener.KindReferrer] > shortener.MaxStatReferrers || perKind[shortener.KindBrowser] > shortener.MaxStatKeys ||
		perKind[shortener.KindBot] > shortener.MaxStatKeys || perKind[shortener.KindCountry] > shortener.MaxStatKeys ||
		perKind[shortener.KindDay] > shortener.MaxStatDays) {
		old := shortener.VisitStats{}
		counts := r.Counts[:0:0]
		for _, c := range r.Counts {
			k := s.keys[c.Key]
			if k.Hour != 0 {
				counts = append(counts, c)
				continue
			}
			bd := old.Breakdown(k.Kind)
			if *bd == nil {
				*bd = shortener.Breakdown{}
			}
			(*bd)[k.Name] += c.N
		}
		old.Bound()
		r.Counts = counts
		for kind := range shortener.NumVisitKinds {
			for name, n := range *old.Breakdown(kind) {
				s.count(r, s.key(shortener.VisitKey{Kind: kind, Name: name}), n)
			}
		}
	}
	if hourly {
		s.boundHourly(r, dayAfter)
	}
}

// MaxDimValues is how many names of each dimension a link keeps per
// month on DynamoDB; the rest of its visits count under
// shortener.OtherKey (docs/dynamodb.md, "Statistics by range").
const MaxDimValues = 1000

// boundHourly bounds the hourly counts of row r (see bound).
func (s *deltaSet) boundHourly(r *row, dayAfter int32) {
	var names [shortener.NumKinds]map[string]int64
	over := false
	for _, c := range r.Counts {
		k := &s.keys[c.Key]
		if k.Hour == 0 || k.Kind == shortener.KindHour {
			over = over || k.Hour >= 24 && k.Hour < dayAfter && k.Hour%24 != 0
			continue
		}
		if names[k.Kind] == nil {
			names[k.Kind] = map[string]int64{}
		}
		names[k.Kind][k.Name] += c.N
		over = over || len(names[k.Kind]) > MaxDimValues || k.Hour >= 24 && k.Hour < dayAfter && k.Hour%24 != 0
	}
	if !over {
		return
	}
	var kept [shortener.NumKinds]map[string]bool
	for kind, m := range names {
		if len(m) <= MaxDimValues {
			continue
		}
		kept[kind] = map[string]bool{}
		for _, c := range shortener.Breakdown(m).Sorted()[:MaxDimValues-1] {
			kept[kind][c.Key] = true
		}
	}
	counts := r.Counts
	r.Counts = nil
	for _, c := range counts {
		k := s.keys[c.Key]
		if k.Hour != 0 {
			if kept[k.Kind] != nil && !kept[k.Kind][k.Name] {
				k.Name = shortener.OtherKey
			}
			if k.Hour < dayAfter && k.Hour >= 24 {
				k.Hour -= k.Hour % 24
			}
		}
		s.count(r, s.key(k), c.N)
	}
}

// monthOf returns the month of a "2006-01-02" day key, and false for a
// key that is not a day.
func monthOf(day string) (int32, bool) {
	t, err := time.Parse(shortener.DayFormat, day)
	if err != nil {
		return 0, false
	}
	return monthOfTime(t), true
}

func monthOfTime(t time.Time) int32 {
	t = t.UTC()
	return int32((t.Year()-1970)*12 + int(t.Month()) - 1)
}

// monthName returns "2006-01" for month m.
func monthName(m int32) string {
	return time.Date(1970+int(m)/12, time.Month(m%12+1), 1, 0, 0, 0, 0, time.UTC).Format("2006-01")
}

// keyHash is the hash that places a link in log parts and state shards:
// FNV-1a, 64 bits, of its id. It is part of the table format: never change
// it.
func keyHash(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()
}

// The encoding of a deltaSet:
//
//	byte    version (2)
//	uvarint number of keys; per key: byte kind, byte bot (0, 1),
//	        uvarint hour (hours since 1970; 0: the lifetime form),
//	        uvarint length, name
//	uvarint number of rows; per row, sorted by id, month, CreatedAt:
//	        uvarint id length, id; varint CreatedAt; uvarint month;
//	        uvarint total; uvarint bots;
//	        uvarint number of counts; per count, by key number:
//	        uvarint key number << 1 | (n == 1), then uvarint n unless
//	        n is 1 (most rows of a record are one visit of a link)
//
// Keys are sorted by kind, bot, hour and name, so equal sets encode
// alike. Version 1, written before the hourly form, had no bot and hour
// (keys of the lifetime form) and wrote every count's n; it is still
// read. What is
// stored is that encoding compressed with zstd (github.com/klauspost/
// compress), when that is smaller: ids, counts and names compress to about
// half, and write units are billed per byte stored.
const (
	deltaVersion   = 2
	deltaVersionV1 = 1
)

var (
	zstdEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	zstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxDecoded))
)

// maxDecoded bounds what one stored set may decompress to.
const maxDecoded = 64 << 20

// zstdMagic starts every zstd frame (little-endian).
const zstdMagic = 0xFD2FB528

var errCorrupt = errors.New("corrupt visit statistics")

// encode returns what is stored of the rows for which keep is true (nil:
// all): their encoding, compressed.
func (s *deltaSet) encode(keep func(*row) bool) []byte {
	raw := s.encodeRaw(keep)
	if z := zstdEncoder.EncodeAll(raw, nil); len(z) < len(raw) {
		return z
	}
	return raw
}

// encodeRaw returns the encoding of the rows for which keep is true.
func (s *deltaSet) encodeRaw(keep func(*row) bool) []byte {
	var rows []*row
	used := make([]bool, len(s.keys))
	for i := range s.rows {
		r := &s.rows[i]
		if keep != nil && !keep(r) {
			continue
		}
		rows = append(rows, r)
		for _, c := range r.Counts {
			used[c.Key] = true
		}
	}
	slices.SortFunc(rows, func(a, b *row) int {
		return cmp.Or(strings.Compare(a.ID, b.ID), cmp.Compare(a.Month, b.Month), cmp.Compare(a.CreatedAt, b.CreatedAt))
	})
	var order []uint32
	for k, u := range used {
		if u {
			order = append(order, uint32(k))
		}
	}
	slices.SortFunc(order, func(a, b uint32) int {
		ka, kb := s.keys[a], s.keys[b]
		return cmp.Or(cmp.Compare(ka.Kind, kb.Kind), boolCmp(ka.Bot, kb.Bot), cmp.Compare(ka.Hour, kb.Hour), strings.Compare(ka.Name, kb.Name))
	})
	renum := make([]uint32, len(s.keys))
	b := []byte{deltaVersion}
	b = binary.AppendUvarint(b, uint64(len(order)))
	for i, k := range order {
		renum[k] = uint32(i)
		b = append(b, byte(s.keys[k].Kind), boolByte(s.keys[k].Bot))
		b = binary.AppendUvarint(b, uint64(max(s.keys[k].Hour, 0)))
		b = binary.AppendUvarint(b, uint64(len(s.keys[k].Name)))
		b = append(b, s.keys[k].Name...)
	}
	b = binary.AppendUvarint(b, uint64(len(rows)))
	counts := make([]shortener.KeyCount, 0, 8)
	for _, r := range rows {
		b = binary.AppendUvarint(b, uint64(len(r.ID)))
		b = append(b, r.ID...)
		b = binary.AppendVarint(b, r.CreatedAt)
		b = binary.AppendUvarint(b, uint64(r.Month))
		b = binary.AppendUvarint(b, uint64(max(r.Total, 0)))
		b = binary.AppendUvarint(b, uint64(max(r.Bots, 0)))
		counts = counts[:0]
		for _, c := range r.Counts {
			counts = append(counts, shortener.KeyCount{Key: renum[c.Key], N: c.N})
		}
		slices.SortFunc(counts, func(a, b shortener.KeyCount) int { return cmp.Compare(a.Key, b.Key) })
		b = binary.AppendUvarint(b, uint64(len(counts)))
		for _, c := range counts {
			one := uint64(0)
			if c.N == 1 {
				one = 1
			}
			b = binary.AppendUvarint(b, uint64(c.Key)<<1|one)
			if one == 0 {
				b = binary.AppendUvarint(b, uint64(c.N))
			}
		}
	}
	return b
}

// decodeInto adds the rows of a stored set (encoding, compressed or not)
// to s.
func (s *deltaSet) decodeInto(b []byte) error {
	if len(b) >= 4 && binary.LittleEndian.Uint32(b) == zstdMagic {
		raw, err := zstdDecoder.DecodeAll(b, nil)
		if err != nil {
			return fmt.Errorf("%w: %v", errCorrupt, err)
		}
		b = raw
	}
	r := reader{b: b}
	version := r.byte()
	if version != deltaVersion && version != deltaVersionV1 {
		return errCorrupt
	}
	nkeys := r.uvarint()
	if nkeys > uint64(len(b)) {
		return errCorrupt
	}
	keys := make([]uint32, nkeys)
	for i := range keys {
		k := shortener.VisitKey{Kind: shortener.VisitKind(r.byte())}
		if version == deltaVersion {
			bot, hour := r.byte(), r.uvarint()
			if bot > 1 || hour > math.MaxInt32 {
				return errCorrupt
			}
			k.Bot, k.Hour = bot == 1, int32(hour)
		}
		k.Name = r.string()
		if r.err != nil || k.Kind >= shortener.NumKinds || k.Hour == 0 && (k.Kind >= shortener.NumVisitKinds || k.Bot) ||
			k.Hour != 0 && k.Kind == shortener.KindDay {
			return errCorrupt
		}
		keys[i] = s.key(k)
	}
	n := r.uvarint()
	if n > uint64(len(b)) {
		return errCorrupt
	}
	for range n {
		k := rowKey{ID: r.string(), CreatedAt: r.varint()}
		m := r.uvarint()
		total, bots := r.count(), r.count()
		nc := r.uvarint()
		if r.err != nil || m > 1<<20 || nc > uint64(len(b)) {
			return errCorrupt
		}
		k.Month = int32(m)
		d := s.row(k)
		d.Total += total
		d.Bots += bots
		for range nc {
			var key uint64
			var c int64
			if version == deltaVersionV1 {
				key, c = r.uvarint(), r.count()
			} else {
				x := r.uvarint()
				key, c = x>>1, 1
				if x&1 == 0 {
					c = r.count()
				}
			}
			if r.err != nil || key >= nkeys {
				return errCorrupt
			}
			s.count(d, keys[key], c)
		}
	}
	if r.err != nil || len(r.b) != 0 {
		return errCorrupt
	}
	return nil
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func boolCmp(a, b bool) int { return cmp.Compare(boolByte(a), boolByte(b)) }

// reader reads an encoding; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.err = errCorrupt
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a count, which must fit an int64.
func (r *reader) count() int64 {
	v := r.uvarint()
	if v > 1<<62 {
		r.err = errCorrupt
		return 0
	}
	return int64(v)
}

func (r *reader) string() string {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errCorrupt
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}
