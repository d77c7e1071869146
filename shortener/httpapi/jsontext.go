package httpapi

import (
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// checkJSONText refuses what encoding/json accepts but silently replaces
// with U+FFFD: bytes that are not UTF-8, and \u escapes of lone UTF-16
// surrogates (RFC 8259 §8.1 requires UTF-8; a lone surrogate is no
// character). Without this a client's bytes would be stored as something
// else than it sent. It looks only at strings' escapes: everything else
// is left to the decoder. (encoding/json/v2 refuses both by itself, but is
// behind GOEXPERIMENT in this Go.)
func checkJSONText(b []byte) error {
	if !utf8.Valid(b) {
		for i := 0; i < len(b); {
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return fmt.Errorf("byte %d is not UTF-8", i)
			}
			i += n
		}
	}
	inString := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(b):
			if b[i+1] != 'u' {
				i++ // a one-character escape, \" included
				continue
			}
			r, ok := hex4(b[i+2:])
			if !ok {
				continue // the decoder reports the bad escape
			}
			i += 5
			if !utf16.IsSurrogate(r) {
				continue
			}
			// A high surrogate must be followed by \u and a low one.
			if r < 0xdc00 && i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
				if lo, ok := hex4(b[i+3:]); ok && lo >= 0xdc00 && lo <= 0xdfff {
					i += 6
					continue
				}
			}
			return errLoneSurrogate
		}
	}
	return nil
}

var errLoneSurrogate = errors.New(`a \u escape of a lone UTF-16 surrogate is not a character`)

// hex4 decodes four hexadecimal digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
