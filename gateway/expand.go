package gateway

import "strings"

// ExpandVars replaces each $name and ${name} in tmpl with the variable's
// value read from get, as APISIX's core.utils.resolve_var, whose regex is
// (?<!\\)\$\{?(\w+)\}?: a "$" after a backslash is left as it is, and the
// braces are each optional.
func ExpandVars(tmpl string, get Vars) string {
	s, _ := ExpandVarsN(tmpl, get)
	return s
}

// ExpandVarsN is ExpandVars that also counts the variables that had a
// value (resolve_var's n_resolved): a rate-limit key whose variables are
// all empty falls back to the client address.
func ExpandVarsN(tmpl string, get Vars) (string, int) {
	if strings.IndexByte(tmpl, '$') < 0 {
		return tmpl, 0
	}
	n := 0
	var b strings.Builder
	for i := 0; i < len(tmpl); i++ {
		c := tmpl[i]
		if c != '$' || (i > 0 && tmpl[i-1] == '\\') {
			b.WriteByte(c)
			continue
		}
		j := i + 1
		if j < len(tmpl) && tmpl[j] == '{' {
			j++
		}
		k := j
		for k < len(tmpl) && isWordByte(tmpl[k]) {
			k++
		}
		if k == j {
			b.WriteByte(c)
			continue
		}
		if v := get.Var(tmpl[j:k]); v != "" {
			b.WriteString(v)
			n++
		}
		if k < len(tmpl) && tmpl[k] == '}' {
			k++
		}
		i = k - 1
	}
	return b.String(), n
}

func isWordByte(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
