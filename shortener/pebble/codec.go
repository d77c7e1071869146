package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
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
// Optional fields, left out when zero:
//
//	1 tags: each tag as uvarint length, bytes (sorted, as the Service
//	  stores them)
//	2 forward query: one byte, shortener.Forward
//
// Fields added later take new field numbers, so older records stay
// readable as they are. A record with a field this build does not know is
// refused, not read without it: rewriting it would lose the field.
const (
	valueVersion = 1
	hasCreated   = 1
	hasExpires   = 2

	fieldTags    = 1
	fieldForward = 2
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
	dst = append(dst, l.URL...)
	if len(l.Tags) > 0 {
		n := 0
		for _, t := range l.Tags {
			n += uvarintLen(len(t)) + len(t)
		}
		dst = binary.AppendUvarint(dst, fieldTags)
		dst = binary.AppendUvarint(dst, uint64(n))
		for _, t := range l.Tags {
			dst = binary.AppendUvarint(dst, uint64(len(t)))
			dst = append(dst, t...)
		}
	}
	if l.ForwardQuery != shortener.ForwardDefault {
		dst = append(dst, fieldForward, 1, byte(l.ForwardQuery))
	}
	return dst
}

// decodeLink parses a value; v belongs to pebble, so every field is
// copied out.
func decodeLink(id string, v []byte) (shortener.Link, error) {
	l, url, tags, err := decodeValue(v)
	if err != nil {
		return shortener.Link{}, err
	}
	l.ID, l.URL = id, string(url)
	for len(tags) > 0 {
		n, k := binary.Uvarint(tags)
		l.Tags = append(l.Tags, string(tags[k:k+int(n)])) // checked by decodeValue
		tags = tags[k+int(n):]
	}
	return l, nil
}

// decodeMeta parses a value into a Link without ID, URL and Tags and
// returns the URL's bytes (aliasing v). It does not allocate.
func decodeMeta(v []byte) (l shortener.Link, url []byte, err error) {
	l, url, _, err = decodeValue(v)
	return l, url, err
}

// decodeValue parses a value into a Link without ID, URL and Tags and
// returns the URL's bytes and the tags field (each aliasing v), checked. It
// does not allocate.
func decodeValue(v []byte) (l shortener.Link, url, tags []byte, err error) {
	if len(v) < 2 || v[0] != valueVersion {
		return shortener.Link{}, nil, nil, errCorrupt
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
		return shortener.Link{}, nil, nil, errCorrupt
	}
	url, rest = rest[k:k+int(n)], rest[k+int(n):]
	for len(rest) > 0 {
		field, k := binary.Uvarint(rest)
		if k <= 0 {
			return shortener.Link{}, nil, nil, errCorrupt
		}
		rest = rest[k:]
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return shortener.Link{}, nil, nil, errCorrupt
		}
		data := rest[k : k+int(n)]
		rest = rest[k+int(n):]
		switch field {
		case fieldTags:
			if !validTags(data) {
				return shortener.Link{}, nil, nil, errCorrupt
			}
			tags = data
		case fieldForward:
			if len(data) != 1 || data[0] > byte(shortener.ForwardOff) {
				return shortener.Link{}, nil, nil, errCorrupt
			}
			l.ForwardQuery = shortener.Forward(data[0])
		default:
			return shortener.Link{}, nil, nil, fmt.Errorf("link record has field %d, which this build does not know (written by a newer linkgate?)", field)
		}
	}
	return l, url, tags, nil
}

// validTags checks that a tags field is a sequence of length-prefixed
// tags.
func validTags(data []byte) bool {
	for len(data) > 0 {
		n, k := binary.Uvarint(data)
		if k <= 0 || n == 0 || n > uint64(len(data)-k) {
			return false
		}
		data = data[k+int(n):]
	}
	return true
}

func uvarintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n))
}
