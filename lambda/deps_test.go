package lambda_test

import (
	"strings"
	"testing"

	"github.com/linkgate/linkgate/internal/testdep"
)

// The adapter knows fasthttp (the handler's engine) and nothing of the
// shortener; the extension knows only the standard library.
func TestDependencies(t *testing.T) {
	tests := []struct {
		pkg     string
		allowed []string // import path prefixes allowed outside the standard library
	}{
		{"github.com/linkgate/linkgate/lambda", []string{"github.com/valyala/", "github.com/klauspost/compress", "github.com/andybalholm/brotli", "github.com/molecule-man/go-brrr", "golang.org/x/"}},
		// The extension's JSON strings are written by internal/jsonquote,
		// which the access log shares; it imports the standard library only.
		{"github.com/linkgate/linkgate/lambda/extension", []string{"github.com/linkgate/linkgate/internal/jsonquote"}},
	}
	for _, tt := range tests {
	deps:
		for _, dep := range testdep.NonStandardImports(t, tt.pkg) {
			for _, a := range tt.allowed {
				if strings.HasPrefix(dep, a) {
					continue deps
				}
			}
			t.Errorf("%s imports %s", tt.pkg, dep)
		}
	}
}
