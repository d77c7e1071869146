package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

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
//	'x' 'm' "built2"                   the index covers every link
//
// where order is the creation time (8 bytes, big-endian: 0 for links
// without one, else Unix seconds with the sign bit flipped), the id,
// 0x00 and the domain. Key order is then exactly oldest first
// (shortener.Newer reversed): Find iterates forwards for oldest first and
// backwards for newest first, seeks to the cursor, narrows a creation-time
// range to its keys, and checks each candidate link against the whole
// filter. A tag filter walks that tag's records, a domain filter its
// domain's, any other filter every link's: a filter that few links pass
// (a search, a state, a tag with a domain) still reads links until the
// page is full. Tags and domains never contain 0x00, ids are
// shortener.ValidID.
//
// The state "expired" walks the links that can expire ('e'): most links
// never do, and the newest seldom have yet. Their records' value (the
// expiry, Unix seconds with the sign bit flipped, 0 for none; then 1 if
// the link has a visit limit) lets Find pass over a link whose expiry is
// still ahead without reading it; one with a visit limit is read (its
// visits are counted elsewhere).
//
// A store written before the index, or before its 'e' records ("built",
// not "built2"), gets it when it is opened (buildListIndex), once.
const kindListIndex = 'x'

var (
	listIndexBuilt = []byte{kindListIndex, 'm', 'b', 'u', 'i', 'l', 't', '2'}
	// listIndexBuiltV1 marks an index without 'e' records (02908ad).
	listIndexBuiltV1 = []byte{kindListIndex, 'm', 'b', 'u', 'i', 'l', 't'}
)

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
	domain, _ := shortener.SplitKey(key)
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

// buildListIndex indexes every link of a store that has no index yet, in
// batches, then marks the index built. Creates, edits and deletes are
// not running yet (Open calls it).
func (s *Store) buildListIndex() error {
	if _, closer, found, err := s.get(listIndexBuilt); err != nil {
		return err
	} else if found {
		closer.Close()
		return nil
	}
	it, err := s.db.NewIter(&pebbledb.IterOptions{LowerBound: linksLower, UpperBound: linksUpper})
	if err != nil {
		return err
	}
	defer it.Close()
	b := s.db.NewBatch()
	n := 0
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
		if err := indexLink(b, key, nil, &l); err != nil {
			b.Close()
			return err
		}
		if n++; n%10_000 == 0 {
			if err := b.Commit(pebbledb.NoSync); err != nil {
				b.Close()
				return err
			}
			b.Close()
			b = s.db.NewBatch()
		}
	}
	if err := it.Error(); err != nil {
		b.Close()
		return err
	}
	if err := b.Set(listIndexBuilt, nil, nil); err != nil {
		b.Close()
		return err
	}
	if err := b.Delete(listIndexBuiltV1, nil); err != nil {
		b.Close()
		return err
	}
	defer b.Close()
	if n > 0 && s.logger != nil {
		s.logger.Info("store: indexed the links for listing", "links", n)
	}
	return b.Commit(pebbledb.Sync)
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
	// Bounds: the prefix, narrowed to the creation-time range (whole
	// seconds, which is what is stored; f.Match checks exactly).
	lower, upper := prefix, prefixEnd(prefix)
	if !f.CreatedAfter.IsZero() {
		lower = binary.BigEndian.AppendUint64(bytes.Clone(prefix), uint64(f.CreatedAfter.Unix())^1<<63)
	}
	if !f.CreatedBefore.IsZero() {
		upper = binary.BigEndian.AppendUint64(bytes.Clone(prefix), (uint64(f.CreatedBefore.Unix())^1<<63)+1)
	}
	it, err := s.db.NewIter(&pebbledb.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return shortener.Page{}, unavailable("find links", err)
	}
	defer it.Close()
	var ok bool
	switch {
	case after == nil && f.Oldest:
		ok = it.First()
	case after == nil:
		ok = it.Last()
	case f.Oldest: // just after the cursor's key
		ok = it.SeekGE(append(appendOrder(bytes.Clone(prefix), after.Key(), after.CreatedAt), 0))
	default: // just before it
		ok = it.SeekLT(appendOrder(bytes.Clone(prefix), after.Key(), after.CreatedAt))
	}
	var p shortener.Page
	for n := 0; ok; n++ {
		if n%1024 == 1023 {
			if err := ctx.Err(); err != nil {
				return shortener.Page{}, unavailable("find links", err)
			}
		}
		read := true
		if prefix[1] == 'e' {
			v, err := it.ValueAndErr()
			if err != nil {
				return shortener.Page{}, unavailable("find links", err)
			}
			read = !unexpired(v, f.Now) // an expiry still ahead: not read
		}
		var l shortener.Link
		var err error
		if read {
			key, valid := orderKey(it.Key()[len(prefix):])
			if !valid {
				return shortener.Page{}, fmt.Errorf("find links: index record %q", it.Key())
			}
			l, err = s.Get(ctx, key)
		}
		switch {
		case !read:
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
		if f.Oldest {
			ok = it.Next()
		} else {
			ok = it.Prev()
		}
	}
	if err := it.Error(); err != nil {
		return shortener.Page{}, unavailable("find links", err)
	}
	return p, nil
}

// prefixEnd returns the smallest key after every key with prefix p (p's
// last byte is never 0xff here: 'c', or 0x00).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	end[len(end)-1]++
	return end
}
