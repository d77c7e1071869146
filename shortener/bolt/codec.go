package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
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
	if len(v) < 2 || v[0] != valueVersion {
		return shortener.Link{}, fmt.Errorf("%w (version %v)", errCorrupt, v[:min(len(v), 1)])
	}
	flags, rest := v[1], v[2:]
	next := func() int64 {
		x, n := binary.Varint(rest)
		if n <= 0 {
			rest = nil
			return 0
		}
		rest = rest[n:]
		return x
	}
	l := shortener.Link{ID: id}
	if flags&hasCreated != 0 {
		l.CreatedAt = time.Unix(next(), 0).UTC()
	}
	if flags&hasExpires != 0 {
		l.ExpiresAt = time.Unix(next(), 0).UTC()
	}
	l.MaxVisits = next()
	if rest == nil {
		return shortener.Link{}, errCorrupt
	}
	l.Visits = next()
	if rest == nil {
		return shortener.Link{}, errCorrupt
	}
	l.URL = string(rest)
	return l, nil
}
