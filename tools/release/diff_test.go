package main

import (
	"fmt"
	"strings"
)

// lineDiff names the first line where got and want differ, for failure
// messages about generated files.
func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("first difference at line %d:\n  have: %q\n  want: %q", i+1, gl, wl)
		}
	}
	return "no difference"
}
