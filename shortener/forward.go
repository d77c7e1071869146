package shortener

import (
	"bytes"
	"strings"
)

// Bounds of query forwarding, so that a visitor's query costs the
// redirect a bounded amount of work whatever its size.
const (
	// MaxForwardedParams is how many of the visitor's parameters are
	// forwarded at most; the rest are dropped.
	MaxForwardedParams = 64
	// MaxForwardedURL is the longest Location a forwarded query may make,
	// in bytes; parameters that would pass it are dropped.
	MaxForwardedURL = 8 << 10
)

// AppendForwardQuery appends to dst the target URL with the visitor's
// query string (query: the raw text after '?', without it) merged in, for
// links that forward the query (UTM campaigns: sho.rt/x?utm_source=mail
// goes to the target with utm_source=mail added):
//
//   - the visitor's parameters are appended to the target's, in their
//     order, before the target's #fragment;
//   - a visitor parameter whose name the target already has (names
//     compared percent-decoded) is dropped: the target's value wins, so a
//     visitor cannot override what the link's owner set (an affiliate id,
//     a campaign);
//   - empty parameters ("a&&b") are dropped, bytes a URL may not contain
//     are percent-encoded, and at most MaxForwardedParams parameters are
//     forwarded, within MaxForwardedURL bytes of result.
//
// It does not allocate beyond growing dst.
func AppendForwardQuery(dst, target, query []byte) []byte {
	frag := len(target)
	if i := bytes.IndexByte(target, '#'); i >= 0 {
		frag = i
	}
	base, fragment := target[:frag], target[frag:]
	var tq []byte // the target's query
	hasQuery := false
	if i := bytes.IndexByte(base, '?'); i >= 0 {
		tq, hasQuery = base[i+1:], true
	}
	start := len(dst)
	dst = append(dst, base...)
	forwarded := 0
	for len(query) > 0 && forwarded < MaxForwardedParams {
		var p []byte
		if i := bytes.IndexByte(query, '&'); i >= 0 {
			p, query = query[:i], query[i+1:]
		} else {
			p, query = query, nil
		}
		if len(p) == 0 || hasParam(tq, paramName(p)) {
			continue
		}
		n := escapedLen(p)
		if len(dst)-start+1+n+len(fragment) > MaxForwardedURL {
			continue
		}
		switch {
		case !hasQuery:
			dst = append(dst, '?')
			hasQuery = true
		case len(dst) > start && dst[len(dst)-1] != '?' && dst[len(dst)-1] != '&':
			dst = append(dst, '&')
		}
		if n == len(p) {
			dst = append(dst, p...) // nothing to escape
		} else {
			dst = appendEscaped(dst, p)
		}
		forwarded++
	}
	return append(dst, fragment...)
}

// paramName is the name part of a "name=value" parameter.
func paramName(p []byte) []byte {
	if i := bytes.IndexByte(p, '='); i >= 0 {
		return p[:i]
	}
	return p
}

// hasParam reports whether query has a parameter named name, comparing
// names percent-decoded ('+' is a space).
func hasParam(query, name []byte) bool {
	for len(query) > 0 {
		var p []byte
		if i := bytes.IndexByte(query, '&'); i >= 0 {
			p, query = query[:i], query[i+1:]
		} else {
			p, query = query, nil
		}
		if len(p) > 0 && sameDecoded(paramName(p), name) {
			return true
		}
	}
	return false
}

// sameDecoded compares two query components after percent-decoding.
func sameDecoded(a, b []byte) bool {
	for len(a) > 0 && len(b) > 0 {
		ca, na := decodedByte(a)
		cb, nb := decodedByte(b)
		if ca != cb {
			return false
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) == 0 && len(b) == 0
}

// decodedByte returns the first byte s stands for and how many bytes of s
// it takes; a malformed escape stands for itself.
func decodedByte(s []byte) (byte, int) {
	switch {
	case s[0] == '+':
		return ' ', 1
	case s[0] == '%' && len(s) >= 3 && ishex(s[1]) && ishex(s[2]):
		return unhex(s[1])<<4 | unhex(s[2]), 3
	}
	return s[0], 1
}

func ishex(c byte) bool {
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

// unsafeBytes are the bytes percent-encoded in a query component passed
// on in a Location header.
var unsafeBytes = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c <= ' ' || c >= 0x7f || strings.IndexByte("\"#<>\\^`{|}", byte(c)) >= 0
	}
	return t
}()

func queryUnsafe(c byte) bool { return unsafeBytes[c] }

func escapedLen(p []byte) int {
	n := len(p)
	for _, c := range p {
		if queryUnsafe(c) {
			n += 2
		}
	}
	return n
}

func appendEscaped(dst, p []byte) []byte {
	const hex = "0123456789ABCDEF"
	for _, c := range p {
		if queryUnsafe(c) {
			dst = append(dst, '%', hex[c>>4], hex[c&15])
		} else {
			dst = append(dst, c)
		}
	}
	return dst
}
