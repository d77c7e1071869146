// Package nginxuri is nginx's URI escaping (ngx_escape_uri), as APISIX's
// core.utils.uri_safe_encode and the redirect plugin use it.
package nginxuri

import "slices"

// Encode escapes b (up to the '?' at q, if q >= 0) in place as nginx's
// ngx_escape_uri (NGX_ESCAPE_URI): space, '#', '%', '?', controls and
// bytes from 0x7f. It grows b only if it has no room for the escapes.
func Encode(b []byte, q int) []byte {
	end := len(b)
	if q >= 0 {
		end = q
	}
	n := 0
	for _, c := range b[:end] {
		if Escapes(c) {
			n++
		}
	}
	if n == 0 {
		return b
	}
	b = slices.Grow(b, 2*n)
	out := b[:len(b)+2*n]
	copy(out[end+2*n:], b[end:])
	j := end + 2*n
	for i := end - 1; i >= 0; i-- {
		c := b[i]
		if Escapes(c) {
			j -= 3
			out[j], out[j+1], out[j+2] = '%', "0123456789ABCDEF"[c>>4], "0123456789ABCDEF"[c&15]
		} else {
			j--
			out[j] = c
		}
	}
	return out
}

// Escapes reports whether ngx_escape_uri (NGX_ESCAPE_URI) escapes c.
func Escapes(c byte) bool {
	return c <= ' ' || c == '#' || c == '%' || c == '?' || c >= 0x7f
}
