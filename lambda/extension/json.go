package extension

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A small, allocation-free JSON reader for the two documents the extension
// reads on its hot paths: Extensions API events and Telemetry API batches.
// It validates strictly (the grammar of RFC 8259, as encoding/json does) and
// hands out sub-slices of the input instead of building values; the fuzz
// test checks it against encoding/json.

// kind is the type of a JSON value.
type kind uint8

const (
	kindInvalid kind = iota
	kindObject
	kindArray
	kindString
	kindNumber
	kindBool
	kindNull
)

// maxDepth bounds nesting, as encoding/json does.
const maxDepth = 10000

var errSyntax = errors.New("invalid JSON")

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

// scanValue validates the JSON value that starts at data[i] (no leading
// space), nested depth containers deep, and returns its kind and the index
// just past it.
func scanValue(data []byte, i, depth int) (kind, int, error) {
	if i >= len(data) {
		return kindInvalid, i, errSyntax
	}
	switch c := data[i]; {
	case c == '"':
		end, _, err := scanString(data, i)
		return kindString, end, err
	case c == '-' || ('0' <= c && c <= '9'):
		end, err := scanNumber(data, i)
		return kindNumber, end, err
	case c == 't':
		return literal(data, i, "true", kindBool)
	case c == 'f':
		return literal(data, i, "false", kindBool)
	case c == 'n':
		return literal(data, i, "null", kindNull)
	case c == '{' || c == '[':
		end, err := scanContainer(data, i, depth)
		if c == '{' {
			return kindObject, end, err
		}
		return kindArray, end, err
	}
	return kindInvalid, i, errSyntax
}

func literal(data []byte, i int, lit string, k kind) (kind, int, error) {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return kindInvalid, i, errSyntax
	}
	return k, i + len(lit), nil
}

// scanContainer validates an object or array iteratively (no recursion, so
// hostile nesting costs no stack) and returns the index just past it. depth
// is how many containers enclose it.
func scanContainer(data []byte, i, depth int) (int, error) {
	var stackBuf [32]byte
	stack := stackBuf[:0] // '{' or '[' per open container
	for {
		// data[i] opens a container.
		open := data[i]
		if depth+len(stack) == maxDepth {
			return i, errSyntax
		}
		stack = append(stack, open)
		i = skipSpace(data, i+1)
		closer := byte('}')
		if open == '[' {
			closer = ']'
		}
		if i < len(data) && data[i] == closer {
			i++
			goto closed
		}
	element:
		// One member (object) or element (array) starts at data[i].
		if stack[len(stack)-1] == '{' {
			if i >= len(data) || data[i] != '"' {
				return i, errSyntax
			}
			end, _, err := scanString(data, i)
			if err != nil {
				return end, err
			}
			i = skipSpace(data, end)
			if i >= len(data) || data[i] != ':' {
				return i, errSyntax
			}
			i = skipSpace(data, i+1)
		}
		if i < len(data) && (data[i] == '{' || data[i] == '[') {
			continue // descend
		}
		{
			_, end, err := scanValue(data, i, 0) // a scalar
			if err != nil {
				return end, err
			}
			i = end
		}
	afterValue:
		i = skipSpace(data, i)
		if i >= len(data) {
			return i, errSyntax
		}
		closer = '}'
		if stack[len(stack)-1] == '[' {
			closer = ']'
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
			goto element
		case closer:
			i++
		default:
			return i, errSyntax
		}
	closed:
		stack = stack[:len(stack)-1]
		if len(stack) == 0 {
			return i, nil
		}
		goto afterValue
	}
}

// scanString validates the string that starts at data[i] (a quote) and
// returns the index just past its closing quote and whether it contains
// escapes.
func scanString(data []byte, i int) (end int, escaped bool, err error) {
	i++
	for i < len(data) {
		c := data[i]
		if plain[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			return i + 1, escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(data) {
				return i, escaped, errSyntax
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(data)-i < 6 || !isHex4(data[i+2:i+6]) {
					return i, escaped, errSyntax
				}
				i += 6
			default:
				return i, escaped, errSyntax
			}
		case c < 0x20:
			return i, escaped, errSyntax
		default:
			i++
		}
	}
	return i, escaped, errSyntax
}

// plain marks the bytes a string may hold without further checks: all but
// '"', '\\' and control characters.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// scanNumber validates -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func scanNumber(data []byte, i int) (int, error) {
	digits := func(i int) (int, bool) {
		start := i
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
		return i, i > start
	}
	if data[i] == '-' {
		i++
	}
	if i < len(data) && data[i] == '0' {
		i++
	} else {
		var ok bool
		if i, ok = digits(i); !ok {
			return i, errSyntax
		}
	}
	if i < len(data) && data[i] == '.' {
		var ok bool
		if i, ok = digits(i + 1); !ok {
			return i, errSyntax
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		var ok bool
		if i, ok = digits(i); !ok {
			return i, errSyntax
		}
	}
	return i, nil
}

// member is one name/value pair of an object, or one element of an array
// (name empty). Slices point into the document.
type member struct {
	name    []byte // raw name between the quotes (may hold escapes)
	escaped bool   // name holds escapes
	value   []byte // the raw value
	kind    kind
}

// iter walks the members of an object or the elements of an array. Make one
// with iterate; call next until it returns false, then check err.
type iter struct {
	data   []byte
	i      int
	depth  int // containers enclosing this one
	object bool
	closer byte
	err    error
	m      member
}

// iterate starts walking the container value raw, nested depth containers
// deep (0 for a document). A raw that is not an object or array yields
// nothing and an error.
func iterate(raw []byte, depth int) iter {
	it := iter{data: raw, depth: depth}
	if depth >= maxDepth {
		it.fail()
		return it
	}
	i := skipSpace(raw, 0)
	if i >= len(raw) || (raw[i] != '{' && raw[i] != '[') {
		it.err = errSyntax
		it.i = len(raw)
		return it
	}
	it.object = raw[i] == '{'
	it.closer = ']'
	if it.object {
		it.closer = '}'
	}
	it.i = skipSpace(raw, i+1)
	switch {
	case it.i >= len(raw):
		it.fail()
	case raw[it.i] == it.closer: // empty
		if skipSpace(raw, it.i+1) != len(raw) {
			it.fail()
		}
		it.i = len(raw)
	}
	return it
}

func (it *iter) fail() bool {
	it.err = errSyntax
	it.i = len(it.data)
	return false
}

// next advances to the next member; it returns false at the end or on a
// syntax error (then it.err is set).
func (it *iter) next() bool {
	d, i := it.data, it.i
	if i >= len(d) {
		return false
	}
	it.m = member{}
	if it.object {
		if d[i] != '"' {
			return it.fail()
		}
		end, esc, err := scanString(d, i)
		if err != nil {
			return it.fail()
		}
		it.m.name, it.m.escaped = d[i+1:end-1], esc
		i = skipSpace(d, end)
		if i >= len(d) || d[i] != ':' {
			return it.fail()
		}
		i = skipSpace(d, i+1)
	}
	k, end, err := scanValue(d, i, it.depth+1)
	if err != nil {
		return it.fail()
	}
	it.m.value, it.m.kind = d[i:end], k
	i = skipSpace(d, end)
	switch {
	case i < len(d) && d[i] == ',':
		it.i = skipSpace(d, i+1)
		if it.i >= len(d) || d[it.i] == it.closer {
			return it.fail() // trailing comma
		}
	case i < len(d) && d[i] == it.closer:
		if skipSpace(d, i+1) != len(d) {
			return it.fail()
		}
		it.i = len(d)
	default:
		return it.fail()
	}
	return true
}

// nameIs reports whether the member's name equals name, decoding escapes
// if the name has any.
func (m *member) nameIs(name string) bool {
	if !m.escaped {
		return string(m.name) == name
	}
	var buf [64]byte
	got, ok := appendUnquoted(buf[:0], m.name)
	return ok && string(got) == name
}

// str returns a string value's contents with escapes decoded into scratch
// when needed (so usually without copying), and false for other kinds.
func (m *member) str(scratch *[]byte) ([]byte, bool) {
	if m.kind != kindString {
		return nil, false
	}
	raw := m.value[1 : len(m.value)-1]
	for _, c := range raw {
		if c == '\\' {
			start := len(*scratch)
			out, ok := appendUnquoted(*scratch, raw)
			if !ok {
				return nil, false
			}
			*scratch = out
			return out[start:], true
		}
	}
	return raw, true
}

// text returns a string value's contents as a string ("" for other kinds).
func (m *member) text(scratch *[]byte) string {
	s, _ := m.str(scratch)
	return string(s)
}

// num returns a number value as a float64; false for other kinds and for
// numbers out of float64 range.
func (m *member) num() (float64, bool) {
	if m.kind != kindNumber {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(m.value), 64)
	return f, err == nil
}

// appendUnquoted appends the string contents raw (between the quotes) with
// escapes decoded, the way encoding/json decodes them: invalid surrogates
// become U+FFFD.
func appendUnquoted(dst, raw []byte) ([]byte, bool) {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		if i+1 >= len(raw) {
			return dst, false
		}
		switch raw[i+1] {
		case '"', '\\', '/':
			dst = append(dst, raw[i+1])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			if len(raw)-i < 6 || !isHex4(raw[i+2:]) {
				return dst, false
			}
			r := hex4(raw[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				if len(raw)-i >= 6 && raw[i] == '\\' && raw[i+1] == 'u' && isHex4(raw[i+2:]) {
					if r2 := utf16.DecodeRune(r, hex4(raw[i+2:])); r2 != utf8.RuneError {
						dst = utf8.AppendRune(dst, r2)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default:
			return dst, false
		}
		i += 2
	}
	return dst, true
}
