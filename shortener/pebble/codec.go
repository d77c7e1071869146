package pebble

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

// A link's value (the key is its linkKey):
//
//	byte    version (1)
//	byte    flags: 1 = has CreatedAt, 2 = has ExpiresAt
//	varint  CreatedAt, Unix seconds (if flag 1)
//	varint  ExpiresAt, Unix seconds (if flag 2)
//	varint  MaxVisits
//	varint  Visits (counted before statistics were kept, e.g. imported)
//	uvarint length of the URL, URL
//	then optional fields, each: uvarint field number, uvarint length, bytes
//
// Fields added later (tags, query forwarding, …) take new field numbers,
// so older records stay readable as they are. A record with a field this
// build does not know is refused, not read without it: rewriting it would
// lose the field.
const (
	valueVersion = 1
	hasCreated   = 1
	hasExpires   = 2
)

var errCorrupt = errors.New("corrupt link record")

// appendLink appends the value of l to dst.
func appendLink(dst []byte, l *shortener.Link) []byte {
	dst = append(dst, valueVersion, 0)
	flags := len(dst) - 1
	if !l.CreatedAt.IsZero() {
		dst[flags] |= hasCreated
		dst = binary.AppendVarint(dst, l.CreatedAt.Unix())
	}
	if !l.ExpiresAt.IsZero() {
		dst[flags] |= hasExpires
		dst = binary.AppendVarint(dst, l.ExpiresAt.Unix())
	}
	dst = binary.AppendVarint(dst, l.MaxVisits)
	dst = binary.AppendVarint(dst, l.Visits)
	dst = binary.AppendUvarint(dst, uint64(len(l.URL)))
	return append(dst, l.URL...)
}

// decodeLink parses a value; v belongs to pebble, so every field is
// copied out.
func decodeLink(id string, v []byte) (shortener.Link, error) {
	l, url, err := decodeMeta(v)
	if err != nil {
		return shortener.Link{}, err
	}
	l.ID, l.URL = id, string(url)
	return l, nil
}

// decodeMeta parses a value into a Link without ID and URL and returns the
// URL's bytes (aliasing v). It does not allocate.
func decodeMeta(v []byte) (l shortener.Link, url []byte, err error) {
	if len(v) < 2 || v[0] != valueVersion {
		return shortener.Link{}, nil, errCorrupt
	}
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
	if flags&hasCreated != 0 {
		l.CreatedAt = time.Unix(next(), 0).UTC()
	}
	if flags&hasExpires != 0 {
		l.ExpiresAt = time.Unix(next(), 0).UTC()
	}
	l.MaxVisits = next()
	l.Visits = next()
	n, k := binary.Uvarint(rest)
	if !ok || flags&^(hasCreated|hasExpires) != 0 || k <= 0 || n > uint64(len(rest)-k) {
		return shortener.Link{}, nil, errCorrupt
	}
	url, rest = rest[k:k+int(n)], rest[k+int(n):]
	if len(rest) != 0 {
		// Optional fields: none is defined yet.
		return shortener.Link{}, nil, errors.New("link record has fields this build does not know (written by a newer linkgate?)")
	}
	return l, url, nil
}
