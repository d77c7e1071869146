package bolt

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

// A link's value in the links bucket (the key is its id):
//
//	byte    version (1)
//	byte    flags: 1 = has CreatedAt, 2 = has ExpiresAt
//	varint  CreatedAt, Unix seconds (if flag 1)
//	varint  ExpiresAt, Unix seconds (if flag 2)
//	varint  MaxVisits
//	varint  Visits
//	bytes   URL (the rest)
const (
	valueVersion = 1
	hasCreated   = 1
	hasExpires   = 2
)

func encode(l shortener.Link) []byte {
	b := make([]byte, 2, 2+4*binary.MaxVarintLen64+len(l.URL))
	b[0] = valueVersion
	if !l.CreatedAt.IsZero() {
		b[1] |= hasCreated
		b = binary.AppendVarint(b, l.CreatedAt.Unix())
	}
	if !l.ExpiresAt.IsZero() {
		b[1] |= hasExpires
		b = binary.AppendVarint(b, l.ExpiresAt.Unix())
	}
	b = binary.AppendVarint(b, l.MaxVisits)
	b = binary.AppendVarint(b, l.Visits)
	return append(b, l.URL...)
}

var errCorrupt = errors.New("corrupt link record")

// decode parses a value; v may live in bbolt's memory map, so every field
// is copied out.
func decode(id string, v []byte) (shortener.Link, error) {
	l, url, err := decodeMeta(v)
	if err != nil {
		return shortener.Link{}, err
	}
	l.ID, l.URL = id, string(url)
	return l, nil
}

// decodeMeta parses a value into a Link without ID and URL, and returns the
// URL's bytes (aliasing v). It does not allocate.
func decodeMeta(v []byte) (l shortener.Link, url []byte, err error) {
	if len(v) < 2 || v[0] != valueVersion {
		return shortener.Link{}, nil, errCorrupt
	}
	flags, rest := v[1], v[2:]
	var ok bool
	next := func() int64 {
		if !ok {
			return 0
		}
		x, n := binary.Varint(rest)
		if n <= 0 {
			ok = false
			return 0
		}
		rest = rest[n:]
		return x
	}
	ok = true
	if flags&hasCreated != 0 {
		l.CreatedAt = time.Unix(next(), 0).UTC()
	}
	if flags&hasExpires != 0 {
		l.ExpiresAt = time.Unix(next(), 0).UTC()
	}
	l.MaxVisits = next()
	l.Visits = next()
	if !ok {
		return shortener.Link{}, nil, errCorrupt
	}
	return l, rest, nil
}
