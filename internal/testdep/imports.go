package testdep

import (
	"os/exec"
	"strings"
	"testing"
)

// NonStandardImports returns every package outside the standard library
// that pkg depends on, directly or not, pkg itself excluded (go list
// -deps): what dependency-direction tests check.
func NonStandardImports(tb testing.TB, pkg string) []string {
	tb.Helper()
	return NonStandardImportsTags(tb, pkg, "")
}

// NonStandardImportsTags is NonStandardImports of pkg built with the
// comma-separated build tags.
func NonStandardImportsTags(tb testing.TB, pkg, tags string) []string {
	tb.Helper()
	out, err := exec.Command("go", "list", "-deps", "-tags", tags, "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).CombinedOutput()
	if err != nil {
		tb.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	var deps []string
	for _, d := range strings.Fields(string(out)) {
		if d != pkg {
			deps = append(deps, d)
		}
	}
	return deps
}
