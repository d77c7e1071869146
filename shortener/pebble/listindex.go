package pebble

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	pebbledb "github.com/cockroachdb/pebble/v2"

	"github.com/linkgate/linkgate/shortener"
)

// The list's index: Find answers a page of a filtered listing (the
// dashboard's list, GET /api/v1/links with a filter) from it, reading
// about as many links as the page holds instead of every link of the
// store (shortener.Service.Find's scan: ~1.5 s a page at 1M links).
//
// Records 'x' (kindListIndex), in the same batches as the links they
// describe, with empty values:
//
//	'x' 'c' order                      every link
//	'x' 't' tag 0x00 order             a link with that tag
//	'x' 'd' domain 0x00 order          a link of that domain ("" the default)
//	'x' 'e' order → expiry             a link that can expire (an expiry or a visit limit)
//	'x' 'g' trigram order              a link whose id or URL holds the trigram
//	'x' 'm' "built4"                   the index covers every link
//
// where order is the creation time (8 bytes, big-endian: 0 for links
// without one, else Unix seconds with the sign bit flipped), the id,
// 0x00 and the domain. Key order is then exactly oldest first
// (shortener.Newer reversed): Find iterates forwards for oldest first and
// backwards for newest first, seeks to the cursor, narrows a creation-time
// range to its keys, and checks each candidate link against the whole
// filter. A tag filter walks that tag's records, a domain filter its
// domain's, a search its trigrams' too (below), any other filter every
// link's: a filter that few links pass (a state, a tag with a domain)
// still reads links until the page is full. Tags and domains never
// contain 0x00, ids are shortener.ValidID.
//
// The state "expired" walks the links that can expire ('e'): most links
// never do, and the newest seldom have yet. Their records' value (the
// expiry, Unix seconds with the sign bit flipped, 0 for none; then 1 if
// the link has a visit limit) lets Find pass over a link whose expiry is
// still ahead without reading it; one with a visit limit is read (its
// visits are counted elsewhere).
//
// A search (f.Query) is a substring of the id or the URL, compared as
// strings.EqualFold does (shortener's hasSubstringFold): ſ is s, the
// Kelvin sign is k, É is é. Every three bytes of the folded form
// (appendFolded: each rune as one member of its case-folding orbit) of a
// link's id and of its URL are a trigram ('g'), one record per distinct
// trigram (about 50 a link: BenchmarkListPage's store of 1M links with
// 45-byte URLs grew from 89 to 774 MB). A link holding the query holds
// each of the query's trigrams (queryGrams), so Find walks the lists of
// (up to maxQueryGrams of) the query's trigrams, and the tag's, domain's
// or expiry's list if the filter names one, in step (a leapfrog join:
// join): the smallest (pebble's estimate) leads, each other list catches
// up with it, a few steps and then a seek, or moves it on; only the links
// in all of them are read, and f.Match checks the substring. A query that
// matches nothing is answered once one of its lists runs out; what a page
// costs is about the size of the smallest list (from the cursor), not of
// the store. A query with no trigram (shorter than three bytes) walks
// without them: it reads links until the page is full, every link if
// none matches.
//
// A store written before the index, or before its latest records (its
// marker is an older one: "built" lacks 'e', "built2" 'g'), gets it when
// it is opened (buildListIndex), once: its index records are dropped and
// written again. "built3" (043328d) has the trigrams of ASCII bytes only:
// the same as now for a link whose id and URL are ASCII, fewer for the
// others, which alone are indexed again. A binary of before 'g' that
// opens such a store rebuilds its own records and marks "built2" without
// 'g' for the links it then writes; the next newer binary sees "built2"
// and rebuilds again (and "built3" binaries "built3").
const kindListIndex = 'x'

var (
	listIndexBuilt = []byte{kindListIndex, 'm', 'b', 'u', 'i', 'l', 't', '4'}
	// listIndexOlder marks the indexes of older binaries: "built" (02908ad)
	// has no 'e' records, "built2" (a410a59) no 'g' records, "built3"
	// (043328d) no 'g' records of bytes that are not ASCII.
	listIndexOlder = [][]byte{
		{kindListIndex, 'm', 'b', 'u', 'i', 'l', 't'},
		{kindListIndex, 'm', 'b', 'u', 'i', 'l', 't', '2'},
		{kindListIndex, 'm', 'b', 'u', 'i', 'l', 't', '3'},
	}
)

// FindReads is the budget of a page of Find: it reads at most this many
// links (about 1.5 ms of CPU a thousand), so that a filter few links pass
// (a search of one or two bytes, which has no trigram, a state) costs a
// bounded time a page. A page that reaches it is cut short
// (shortener.Page.Scanned): its cursor goes on from the last link read.
const FindReads = 5_000

// maxQueryGrams bounds the trigram lists a search walks in step: more
// narrow the candidates further, each costs a seek per step.
const maxQueryGrams = 8

// trigrams appends to dst the distinct trigrams of the strings (see
// above), sorted: every three bytes of each string's folded form.
func trigrams(dst [][3]byte, ss ...string) [][3]byte {
	var buf [2 * shortener.MaxKeyLength]byte
	for _, s := range ss {
		folded := appendFolded(buf[:0], s)
		for i := 0; i+3 <= len(folded); i++ {
			dst = append(dst, [3]byte{folded[i], folded[i+1], folded[i+2]})
		}
	}
	slices.SortFunc(dst, func(a, b [3]byte) int { return bytes.Compare(a[:], b[:]) })
	return slices.Compact(dst)
}

// appendFolded appends to dst s's folded form: each of its runes (a byte
// that is not UTF-8 is utf8.RuneError) as foldCanon's, in UTF-8. Runes
// that strings.EqualFold finds equal have the same one.
func appendFolded(dst []byte, s string) []byte {
	for _, r := range s {
		if r < utf8.RuneSelf {
			dst = append(dst, lowerASCII(byte(r)))
		} else {
			dst = utf8.AppendRune(dst, foldCanon(r))
		}
	}
	return dst
}

// foldCanon returns one member of r's case-folding orbit (the runes
// unicode.SimpleFold goes round, which strings.EqualFold finds equal) for
// every member: the smallest, an ASCII letter in lower case (K, k and
// the Kelvin sign are k; S, s and ſ are s).
func foldCanon(r rune) rune {
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		m = min(m, f)
	}
	if 'A' <= m && m <= 'Z' {
		m += 'a' - 'A'
	}
	return m
}

// queryGrams returns the prefixes of the trigram lists a search for q
// walks: up to maxQueryGrams, spread over q; none if q has none (below).
//
// A window of a string that q matches (shortener's hasSubstringFold: as
// many bytes as q, strings.EqualFold) decodes to runes that fold like
// q's, but its first runes may be the tail of a rune of the string and
// its last the head of one, each decoded alone as utf8.RuneError: only
// the runs of q's runes between its RuneErrors (a byte that is not
// UTF-8, or U+FFFD) are sure to be in the string's folded form. Their
// trigrams are the query's.
func queryGrams(q string) [][]byte {
	var grams [][3]byte
	for run := range strings.SplitSeq(strings.ToValidUTF8(q, string(utf8.RuneError)), string(utf8.RuneError)) {
		grams = append(grams, trigrams(nil, run)...)
	}
	slices.SortFunc(grams, func(a, b [3]byte) int { return bytes.Compare(a[:], b[:]) })
	grams = slices.Compact(grams)
	if len(grams) > maxQueryGrams {
		spread := make([][3]byte, maxQueryGrams)
		for i := range spread {
			spread[i] = grams[i*(len(grams)-1)/(maxQueryGrams-1)]
		}
		grams = spread
	}
	prefixes := make([][]byte, len(grams))
	for i, g := range grams {
		prefixes[i] = []byte{kindListIndex, 'g', g[0], g[1], g[2]}
	}
	return prefixes
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// expiryValue is the value of a link's 'e' record.
func expiryValue(dst []byte, l *shortener.Link) []byte {
	var t uint64
	if !l.ExpiresAt.IsZero() {
		t = uint64(l.ExpiresAt.Unix()) ^ 1<<63
	}
	dst = binary.BigEndian.AppendUint64(dst, t)
	if l.MaxVisits > 0 {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// unexpired reports whether an 'e' record's value shows its link cannot
// have expired at now: an expiry after now (Unix seconds, rounded down:
// never later than the link's), and no visit limit.
func unexpired(v []byte, now time.Time) bool {
	if len(v) != 9 || v[8] != 0 {
		return false
	}
	t := binary.BigEndian.Uint64(v)
	return t != 0 && now.Unix() < int64(t^1<<63)
}

var _ shortener.Finder = (*Store)(nil)

// appendOrder appends a link's order suffix: its creation time, id,
// 0x00, domain.
func appendOrder(dst []byte, key string, created time.Time) []byte {
	var t uint64
	if !created.IsZero() {
		t = uint64(created.Unix()) ^ 1<<63
	}
	dst = binary.BigEndian.AppendUint64(dst, t)
	domain, id := shortener.SplitKey(key)
	dst = append(dst, id...)
	dst = append(dst, 0)
	return append(dst, domain...)
}

// orderLink reads the position of a link (its CreatedAt, in seconds,
// Domain and ID) back from an order suffix.
func orderLink(order []byte) (shortener.Link, bool) {
	key, ok := orderKey(order)
	if !ok {
		return shortener.Link{}, false
	}
	var l shortener.Link
	l.Domain, l.ID = shortener.SplitKey(key)
	if t := binary.BigEndian.Uint64(order); t != 0 {
		l.CreatedAt = time.Unix(int64(t^1<<63), 0).UTC()
	}
	return l, true
}

// orderKey reads the link key back from an order suffix.
func orderKey(order []byte) (string, bool) {
	if len(order) < 9 {
		return "", false
	}
	id, domain, ok := bytes.Cut(order[8:], []byte{0})
	if !ok {
		return "", false
	}
	return shortener.LinkKey(string(domain), string(id)), true
}

// writeIndex sets (or, with del, deletes) in a batch the index records
// of the link stored under key with l's fields. The keys are built in a
// buffer on the stack: the batch copies them.
func writeIndex(b *pebbledb.Batch, key string, l *shortener.Link, del bool) error {
	var scratch [2 + shortener.MaxKeyLength + 8 + 64 + 1]byte
	var value [9]byte
	domain, id := shortener.SplitKey(key)
	put := func(k []byte) error {
		if del {
			return b.Delete(k, nil)
		}
		return b.Set(k, nil, nil)
	}
	if err := put(appendOrder(append(scratch[:0], kindListIndex, 'c'), key, l.CreatedAt)); err != nil {
		return err
	}
	if !l.ExpiresAt.IsZero() || l.MaxVisits > 0 {
		k := appendOrder(append(scratch[:0], kindListIndex, 'e'), key, l.CreatedAt)
		var err error
		if del {
			err = b.Delete(k, nil)
		} else {
			err = b.Set(k, expiryValue(value[:0], l), nil)
		}
		if err != nil {
			return err
		}
	}
	k := append(append(append(scratch[:0], kindListIndex, 'd'), domain...), 0)
	if err := put(appendOrder(k, key, l.CreatedAt)); err != nil {
		return err
	}
	for _, tag := range l.Tags {
		k := append(append(append(scratch[:0], kindListIndex, 't'), tag...), 0)
		if err := put(appendOrder(k, key, l.CreatedAt)); err != nil {
			return err
		}
	}
	for _, g := range trigrams(nil, id, l.URL) {
		if err := put(appendOrder(append(scratch[:0], kindListIndex, 'g', g[0], g[1], g[2]), key, l.CreatedAt)); err != nil {
			return err
		}
	}
	return nil
}

// indexLink adds the index records of a link to a batch; old, if not
// nil, is the link as it was (an edit), whose records go.
func indexLink(b *pebbledb.Batch, key string, old, l *shortener.Link) error {
	if old != nil {
		if err := writeIndex(b, key, old, true); err != nil {
			return err
		}
	}
	return writeIndex(b, key, l, false)
}

// unindexLink removes the index records of a link from a batch.
func unindexLink(b *pebbledb.Batch, key string, l *shortener.Link) error {
	return writeIndex(b, key, l, true)
}

// buildListIndex indexes every link of a store that has no index yet, or
// an older one (see above), in batches, then marks the index built.
// Creates, edits and deletes are not running yet (Open calls it).
func (s *Store) buildListIndex(ctx context.Context) error {
	found := make([]bool, 1+len(listIndexOlder))
	for i, m := range append([][]byte{listIndexBuilt}, listIndexOlder...) {
		_, closer, ok, err := s.get(m)
		if err != nil {
			return err
		}
		if ok {
			closer.Close()
		}
		found[i] = ok
	}
	// found: the current marker, then listIndexOlder's
	switch {
	case found[1] || found[2]: // an older binary wrote links since
	case found[3]:
		return s.reindexListIndex(ctx, func(l *shortener.Link) bool { return !ascii(l.ID) || !ascii(l.URL) })
	case found[0]:
		return nil
	}
	// The records of an older index go, markers too: a crash before the
	// new marker starts this again.
	if err := s.db.DeleteRange([]byte{kindListIndex}, []byte{kindListIndex + 1}, pebbledb.Sync); err != nil {
		return err
	}
	return s.reindexListIndex(ctx, func(*shortener.Link) bool { return true })
}

// reindexListIndex writes the index records of every link that redo
// selects, committing and looking at ctx every openBatch links read, then
// marks the index built (and no longer "built3").
func (s *Store) reindexListIndex(ctx context.Context, redo func(*shortener.Link) bool) error {
	it, err := s.db.NewIter(&pebbledb.IterOptions{LowerBound: linksLower, UpperBound: linksUpper})
	if err != nil {
		return err
	}
	defer it.Close()
	b := s.db.NewBatch()
	n, read := 0, 0
	for ok := it.First(); ok; ok = it.Next() {
		key := linkKey(it.Key())
		v, err := it.ValueAndErr()
		if err != nil {
			b.Close()
			return err
		}
		l, err := decodeLink(key, v)
		if err != nil {
			b.Close()
			return fmt.Errorf("index link %q: %w", key, err)
		}
		if redo(&l) {
			if err := indexLink(b, key, nil, &l); err != nil {
				b.Close()
				return err
			}
			n++
		}
		if read++; read%s.openBatch == 0 {
			if err := b.Commit(pebbledb.NoSync); err != nil {
				b.Close()
				return err
			}
			b.Close()
			b = s.db.NewBatch()
			if err := s.openStep(ctx); err != nil {
				b.Close()
				return fmt.Errorf("index the links for listing: %w", err)
			}
		}
	}
	if err := it.Error(); err != nil {
		b.Close()
		return err
	}
	defer b.Close()
	if err := b.Delete(listIndexOlder[2], nil); err != nil {
		return err
	}
	if err := b.Set(listIndexBuilt, nil, nil); err != nil {
		return err
	}
	if n > 0 && s.logger != nil {
		s.logger.Info("store: indexed the links for listing", "links", n)
	}
	return b.Commit(pebbledb.Sync)
}

// ascii reports whether s is all ASCII.
func ascii(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// Find returns a page of the links that pass f, in f's order, after the
// position after (nil: from the start); see the comment above.
func (s *Store) Find(ctx context.Context, after *shortener.Link, limit int, f shortener.ListFilter) (shortener.Page, error) {
	if s.closed.Load() {
		return shortener.Page{}, unavailable("find links", errClosed)
	}
	var prefix []byte
	switch {
	case f.Tag != "":
		prefix = append(append([]byte{kindListIndex, 't'}, f.Tag...), 0)
	case f.State == shortener.StateExpired:
		prefix = []byte{kindListIndex, 'e'}
	case f.Domain != nil:
		prefix = append(append([]byte{kindListIndex, 'd'}, *f.Domain...), 0)
	default:
		prefix = []byte{kindListIndex, 'c'}
	}
	lists := [][]byte{prefix}
	if grams := queryGrams(f.Query); len(grams) > 0 && prefix[1] == 'c' {
		lists = grams // every link is in 'c': the trigrams' lists alone
	} else {
		lists = append(lists, grams...)
	}
	j := join{oldest: f.Oldest, expiry: -1}
	defer j.close()
	for _, p := range lists {
		if err := j.add(s.db, p, f, after); err != nil {
			return shortener.Page{}, unavailable("find links", err)
		}
	}
	j.smallestFirst()
	var p shortener.Page
	reads := 0
	var last []byte // the order of the last link read
	ok, err := j.align(ctx)
	for ; ok && err == nil; ok, err = j.next(ctx) {
		main := j.lists[0]
		if reads == s.findReads { // the budget: a partial page
			l, valid := orderLink(last)
			if !valid {
				return shortener.Page{}, fmt.Errorf("find links: index record %q", last)
			}
			p.Next, p.Scanned = shortener.FindCursor(&l, f.Oldest), reads
			return p, nil
		}
		read := true
		if j.expiry >= 0 {
			v, err := j.lists[j.expiry].it.ValueAndErr()
			if err != nil {
				return shortener.Page{}, unavailable("find links", err)
			}
			read = !unexpired(v, f.Now) // an expiry still ahead: not read
		}
		if !read {
			continue
		}
		key, valid := orderKey(main.order())
		if !valid {
			return shortener.Page{}, fmt.Errorf("find links: index record %q", main.it.Key())
		}
		l, err := s.Get(ctx, key)
		reads++
		last = append(last[:0], main.order()...)
		switch {
		case errors.Is(err, shortener.ErrNotFound): // deleted since the iterator's snapshot
		case err != nil:
			return shortener.Page{}, err
		default:
			m := l
			m.Domain, m.ID = shortener.SplitKey(l.ID)
			if f.Match(&m) {
				if len(p.Links) == limit {
					last := p.Links[limit-1]
					last.Domain, last.ID = shortener.SplitKey(last.ID)
					p.Next = shortener.FindCursor(&last, f.Oldest)
					return p, nil
				}
				p.Links = append(p.Links, l)
			}
		}
	}
	if err != nil {
		return shortener.Page{}, unavailable("find links", err)
	}
	return p, nil
}

// join walks index record lists in step, in f's order: at each position
// every list holds the same order suffix, the candidate (a leapfrog join;
// lists[0], the smallest, leads).
type join struct {
	lists  []list
	oldest bool
	expiry int // the index of the 'e' list, or -1
	steps  int
	seek   []byte
}

// list is one index record list being walked: its records are prefix,
// then an order suffix.
type list struct {
	it     *pebbledb.Iterator
	prefix []byte
	size   uint64 // pebble's estimate of its tables' bytes in the walk's bounds
}

func (l *list) order() []byte { return l.it.Key()[len(l.prefix):] }

// add opens the list of prefix, bounded by f's creation-time range
// (whole seconds, which is what is stored; f.Match checks exactly), and
// puts it at the first record of the walk: the start, or just past the
// cursor after.
func (j *join) add(db *pebbledb.DB, prefix []byte, f shortener.ListFilter, after *shortener.Link) error {
	lower, upper := prefix, prefixEnd(prefix)
	if !f.CreatedAfter.IsZero() {
		lower = binary.BigEndian.AppendUint64(bytes.Clone(prefix), uint64(f.CreatedAfter.Unix())^1<<63)
	}
	if !f.CreatedBefore.IsZero() {
		upper = binary.BigEndian.AppendUint64(bytes.Clone(prefix), (uint64(f.CreatedBefore.Unix())^1<<63)+1)
	}
	size, err := db.EstimateDiskUsage(lower, upper)
	if err != nil {
		return err
	}
	it, err := db.NewIter(&pebbledb.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	j.lists = append(j.lists, list{it: it, prefix: prefix, size: size})
	switch {
	case after == nil && j.oldest:
		it.First()
	case after == nil:
		it.Last()
	case j.oldest: // just after the cursor's key
		it.SeekGE(append(appendOrder(bytes.Clone(prefix), after.Key(), after.CreatedAt), 0))
	default: // just before it
		it.SeekLT(appendOrder(bytes.Clone(prefix), after.Key(), after.CreatedAt))
	}
	return nil
}

// smallestFirst orders the lists by their estimated size: the smallest
// leads the walk (its every record is a step), the next smallest rule out
// most of its candidates before a larger list is moved. Records not yet
// flushed to a table are not in the estimate: it only ranks the lists.
func (j *join) smallestFirst() {
	slices.SortStableFunc(j.lists, func(a, b list) int { return cmp.Compare(a.size, b.size) })
	for i, l := range j.lists {
		if l.prefix[1] == 'e' {
			j.expiry = i
		}
	}
}

// align moves the lists forward (in the walk's order) to the first order
// suffix that all of them hold, from where they are: false when one of
// them runs out. It checks ctx every 1024 steps.
func (j *join) align(ctx context.Context) (bool, error) {
	for {
		for i := range j.lists {
			if !j.lists[i].it.Valid() {
				return false, j.lists[i].it.Error()
			}
		}
		if j.steps++; j.steps%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return false, err
			}
		}
		target := j.lists[0].order()
		agreed := true
		for i := 1; i < len(j.lists) && agreed; i++ {
			c := bytes.Compare(j.lists[i].order(), target)
			if c != 0 && (c < 0) == j.oldest { // behind the target
				if !j.catchUp(&j.lists[i], target) {
					return false, j.lists[i].it.Error()
				}
				c = bytes.Compare(j.lists[i].order(), target)
			}
			if c != 0 { // past it: the first list goes there
				agreed = false
				j.catchUp(&j.lists[0], j.lists[i].order())
			}
		}
		if agreed {
			return true, nil
		}
	}
}

// next moves past the current candidate to the next one.
func (j *join) next(ctx context.Context) (bool, error) {
	if j.oldest {
		j.lists[0].it.Next()
	} else {
		j.lists[0].it.Prev()
	}
	return j.align(ctx)
}

// catchUp moves l, which is behind order, to the first record at or past
// it: a few steps first (a list that most links are in is seldom far
// behind, and a step costs less than a seek), then a seek.
func (j *join) catchUp(l *list, order []byte) bool {
	for range 64 {
		var ok bool
		if j.oldest {
			ok = l.it.Next()
		} else {
			ok = l.it.Prev()
		}
		if !ok {
			return false
		}
		if c := bytes.Compare(l.order(), order); c == 0 || (c < 0) != j.oldest {
			return true
		}
	}
	return j.seekTo(l, order)
}

// seekTo moves l to the first record at or past order in the walk's
// order.
func (j *join) seekTo(l *list, order []byte) bool {
	j.seek = append(append(j.seek[:0], l.prefix...), order...)
	if j.oldest {
		return l.it.SeekGE(j.seek)
	}
	// The last record at or before order: no order is another followed
	// by 0x00 (a domain holds no 0x00).
	return l.it.SeekLT(append(j.seek, 0))
}

func (j *join) close() {
	for _, l := range j.lists {
		l.it.Close()
	}
}

// prefixEnd returns the smallest key after every key with prefix p (p's
// last byte is never 0xff here: 'c', 'e', 0x00 or an ASCII trigram's).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	end[len(end)-1]++
	return end
}
