package gateway

import "strings"

// ExpandVars replaces each $name and ${name} in tmpl with the variable's
// value read from get, as APISIX's core.utils.resolve_var, whose regex is
// (?<!\\)\$\{?(\w+)\}?: a "$" after a backslash is left as it is, and the
// braces are each optional.
func ExpandVars(tmpl string, get Vars) string {
	if strings.IndexByte(tmpl, '$') < 0 {
		return tmpl
	}
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
		b.WriteString(get.Var(tmpl[j:k]))
		if k < len(tmpl) && tmpl[k] == '}' {
			k++
		}
		i = k - 1
	}
	return b.String()
}

func isWordByte(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
