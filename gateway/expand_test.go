package gateway

import "testing"

type mapVars map[string]string

func (m mapVars) Var(name string) string { return m[name] }

// Cases from APISIX's resolve_var regex (?<!\\)\$\{?(\w+)\}? as PCRE
// applies it.
func TestExpandVars(t *testing.T) {
	vars := mapVars{"host": "h.com", "uri": "/a", "arg_x": "1"}
	for tmpl, want := range map[string]string{
		"plain":              "plain",
		"$host":              "h.com",
		"${host}":            "h.com",
		"$host$uri":          "h.com/a",
		"${host}x":           "h.comx",
		"$hostx":             "",
		"\\$host":            "\\$host",
		"$":                  "$",
		"a$ b":               "a$ b",
		"${host":             "h.com",
		"$host}":             "h.com",
		"${}":                "${}",
		"$arg_x-$unset-$uri": "1--/a",
	} {
		if got := ExpandVars(tmpl, vars); got != want {
			t.Errorf("ExpandVars(%q) = %q, want %q", tmpl, got, want)
		}
	}
}

func TestExpandVarsN(t *testing.T) {
	vars := mapVars{"http_a": "1"}
	for tmpl, want := range map[string]int{"$http_a $http_b": 1, "$http_b $http_c": 0, "plain": 0, "${http_a}${http_a}": 2} {
		if _, n := ExpandVarsN(tmpl, vars); n != want {
			t.Errorf("ExpandVarsN(%q): %d resolved, want %d", tmpl, n, want)
		}
	}
}

func FuzzExpandVars(f *testing.F) {
	for _, s := range []string{"$host", "${uri}x", "\\$a", "${", "$$"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tmpl string) {
		// Without variables set, expanding only removes references.
		if got := ExpandVars(tmpl, mapVars{}); len(got) > len(tmpl) {
			t.Fatalf("%q grew to %q", tmpl, got)
		}
	})
}
