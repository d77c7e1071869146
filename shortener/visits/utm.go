package visits

import "unicode/utf8"

// MaxUTMLength bounds a UTM value (decoded); longer ones count as
// InvalidUTM.
const MaxUTMLength = 100

// InvalidUTM is the key of UTM values that are too long or not printable
// text.
const InvalidUTM = "(invalid)"

// The UTM parameters counted, in the order of rawVisit.utm.
var utmNames = [3]string{"utm_source", "utm_medium", "utm_campaign"}

// UTMValues finds utm_source, utm_medium and utm_campaign in a raw query
// string (without '?'), decoded ('+' and %XX) into bufs (each at least
// MaxUTMLength bytes): nil for a parameter absent or empty, an empty
// non-nil slice for a value that is longer than MaxUTMLength or holds a
// control character or a malformed escape. The first occurrence of a
// parameter counts. It does not allocate.
func UTMValues(query []byte, bufs *[3][MaxUTMLength]byte) (out [3][]byte) {
	for len(query) > 0 {
		var pair []byte
		pair, query = cut(query, '&')
		if len(pair) < 4 || string(pair[:4]) != "utm_" {
			continue
		}
		key, val := cut(pair, '=')
		for i, name := range utmNames {
			if string(key) != name || out[i] != nil || len(val) == 0 {
				continue
			}
			out[i] = decodeUTM(val, bufs[i][:])
		}
	}
	return out
}

func cut(b []byte, sep byte) (before, after []byte) {
	for i, c := range b {
		if c == sep {
			return b[:i], b[i+1:]
		}
	}
	return b, nil
}

// decodeUTM percent-decodes v into buf; an empty non-nil slice when it
// does not fit or is not printable.
func decodeUTM(v, buf []byte) []byte {
	invalid := buf[:0:0]
	n := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch c {
		case '+':
			c = ' '
		case '%':
			if i+2 >= len(v) || !isHex(v[i+1]) || !isHex(v[i+2]) {
				return invalid
			}
			c = unhex(v[i+1])<<4 | unhex(v[i+2])
			i += 2
		}
		if c < 0x20 || c == 0x7f || n == len(buf) {
			return invalid
		}
		buf[n] = c
		n++
	}
	if n == 0 {
		return nil
	}
	if !utf8.Valid(buf[:n]) {
		return invalid
	}
	return buf[:n]
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
