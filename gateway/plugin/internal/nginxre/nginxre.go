// Package nginxre runs the regular expressions APISIX plugins hand to
// ngx.re (PCRE) with Go's regexp (RE2): options as flags, replacement
// templates ($1 followed by text means group 1, not a group named "1x"),
// and sub (the first match) beside gsub (all). RE2 has no backreferences
// or lookaround: a pattern using them is rejected when the configuration
// is checked.
package nginxre

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Regexp is a compiled ngx.re pattern.
type Regexp struct {
	re *regexp.Regexp
	// PCRE's $ also matches before a final newline; RE2's only at the end.
	// A pattern with $ outside multiline mode is run on the text without
	// its final newline, which is put back after.
	dollarEnd bool
}

// Compile compiles pattern with ngx.re's options: i (caseless), m
// (multiline), s (dotall) and x (extended: Go has no such flag; whitespace
// and # comments are removed); j, o, u, J, D are engine hints and ignored.
func Compile(pattern, options string) (*Regexp, error) {
	flags := ""
	for _, o := range options {
		switch o {
		case 'i', 'm', 's':
			if !strings.ContainsRune(flags, o) {
				flags += string(o)
			}
		case 'x':
			pattern = stripExtended(pattern)
		case 'j', 'o', 'u', 'U', 'J', 'D', 'a':
		default:
			return nil, fmt.Errorf("unknown flag \"%c\" (flags \"%s\")", o, options)
		}
	}
	dollar := !strings.ContainsRune(flags, 'm') && hasDollar(pattern)
	if flags != "" {
		pattern = "(?" + flags + ")" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	return &Regexp{re: re, dollarEnd: dollar}, nil
}

// MustCompile is Compile for known-good patterns.
func MustCompile(pattern, options string) *Regexp {
	re, err := Compile(pattern, options)
	if err != nil {
		panic(err)
	}
	return re
}

// hasDollar reports an unescaped $ outside a character class.
func hasDollar(p string) bool {
	class := false
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '\\':
			i++
		case c == '[':
			class = true
		case c == ']':
			class = false
		case c == '$' && !class:
			return true
		}
	}
	return false
}

// Match reports whether s has a match.
func (r *Regexp) Match(s []byte) bool {
	s, _ = r.trim(s)
	return r.re.Match(s)
}

// MatchString reports whether s has a match.
func (r *Regexp) MatchString(s string) bool { return r.Match([]byte(s)) }

func (r *Regexp) trim(s []byte) ([]byte, bool) {
	if r.dollarEnd && len(s) > 0 && s[len(s)-1] == '\n' {
		return s[:len(s)-1], true
	}
	return s, false
}

func stripExtended(p string) string {
	var b strings.Builder
	escaped, class := false, false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case escaped:
			escaped = false
		case c == '\\':
			escaped = true
		case c == '[':
			class = true
		case c == ']':
			class = false
		case !class && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			continue
		case !class && c == '#':
			for i < len(p) && p[i] != '\n' {
				i++
			}
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

var dollarN = regexp.MustCompile(`\$(\d+)`)

// CheckTemplate reports what ngx.re.sub says of a replacement whose "$"
// is not followed by a group number, "{N}" or "$".
func CheckTemplate(t string) error {
	for i := 0; i < len(t); i++ {
		if t[i] != '$' {
			continue
		}
		i++
		switch {
		case i < len(t) && (t[i] == '$' || '0' <= t[i] && t[i] <= '9'):
		case i < len(t) && t[i] == '{':
			j := i + 1
			for j < len(t) && '0' <= t[j] && t[j] <= '9' {
				j++
			}
			if j == i+1 || j == len(t) || t[j] != '}' {
				return errors.New("invalid capturing variable name found")
			}
			i = j
		default:
			return errors.New("invalid capturing variable name found")
		}
	}
	return nil
}

// Template turns an ngx.re replacement ("$1", "${1}", "$0", "$$") into
// regexp.Expand's form.
func Template(t string) string { return dollarN.ReplaceAllString(t, "$${$1}") }

// Sub appends src to dst with the first match of r replaced by template
// (in Template's form), as ngx.re.sub; it reports whether there was one.
func Sub(r *Regexp, dst, src, template []byte) ([]byte, bool) {
	s, nl := r.trim(src)
	m := r.re.FindSubmatchIndex(s)
	if m == nil {
		return append(dst, src...), false
	}
	dst = append(dst, s[:m[0]]...)
	dst = r.re.Expand(dst, template, s, m)
	dst = append(dst, s[m[1]:]...)
	if nl {
		dst = append(dst, '\n')
	}
	return dst, true
}

// Gsub is Sub for every match, as ngx.re.gsub; it returns how many there were.
func Gsub(r *Regexp, dst, src, template []byte) ([]byte, int) {
	s, nl := r.trim(src)
	n, last := 0, 0
	for _, m := range r.re.FindAllSubmatchIndex(s, -1) {
		dst = append(dst, s[last:m[0]]...)
		dst = r.re.Expand(dst, template, s, m)
		last = m[1]
		n++
	}
	dst = append(dst, s[last:]...)
	if nl {
		dst = append(dst, '\n')
	}
	return dst, n
}
