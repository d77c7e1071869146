package lambda_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The adapter knows fasthttp (the handler's engine) and nothing of the
// shortener; the extension knows only the standard library.
func TestDependencies(t *testing.T) {
	tests := []struct {
		pkg     string
		allowed []string // non-standard import path prefixes allowed besides the package itself
	}{
		{"github.com/linkgate/linkgate/lambda", []string{"github.com/valyala/", "github.com/klauspost/compress", "github.com/andybalholm/brotli", "github.com/molecule-man/go-brrr", "golang.org/x/"}},
		{"github.com/linkgate/linkgate/lambda/extension", nil},
	}
	for _, tt := range tests {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", tt.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", tt.pkg, err, out)
		}
	deps:
		for _, dep := range strings.Fields(string(out)) {
			if dep == tt.pkg {
				continue
			}
			for _, a := range tt.allowed {
				if strings.HasPrefix(dep, a) {
					continue deps
				}
			}
			t.Errorf("%s imports %s", tt.pkg, dep)
		}
	}
}
