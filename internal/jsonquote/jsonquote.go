// Package jsonquote writes a JSON string without allocating, for the hot
// paths that build JSON by hand (the access log's lines, the Lambda
// extension's requests).
package jsonquote

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// Append appends s as a JSON string: '"' and '\\' escaped, control
// characters and DEL as \n, \r, \t or \u00xx, each byte that is not part
// of UTF-8 as \ufffd (as encoding/json), U+2028 and U+2029 escaped (as
// encoding/json, for JavaScript readers). A log line holding it stays
// one line whatever s holds.
func Append(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20 || c == 0x7f:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return append(dst, '"')
}
