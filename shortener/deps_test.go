package shortener_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The domain package imports only the standard library; adapters import
// their one dependency and the domain, never each other.
func TestDependencyDirection(t *testing.T) {
	tests := []struct {
		pkg     string
		allowed []string // non-standard import path prefixes allowed besides the package itself
	}{
		// The one exception: host names are mapped with x/net/idna (which
		// the standard library itself vendors for net/http) and x/text.
		{"github.com/linkgate/linkgate/shortener", []string{"golang.org/x/net/idna", "golang.org/x/text"}},
		{"github.com/linkgate/linkgate/shortener/bolt", []string{"github.com/linkgate/linkgate/shortener", "go.etcd.io/bbolt", "golang.org/x/sys", "golang.org/x/net/idna", "golang.org/x/text"}},
		{"github.com/linkgate/linkgate/shortener/internal/statsrec", []string{"github.com/linkgate/linkgate/shortener", "golang.org/x/net/idna", "golang.org/x/text"}},
		{"github.com/linkgate/linkgate/shortener/importer", []string{"github.com/linkgate/linkgate/shortener", "golang.org/x/net/idna", "golang.org/x/text"}},
	}
	// The HTTP API knows the domain (and the module's internal helpers),
	// never a store adapter.
	out, err := exec.Command("go", "list", "-deps", "github.com/linkgate/linkgate/shortener/httpapi").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/linkgate/linkgate/") && !strings.HasPrefix(dep, "github.com/linkgate/linkgate/internal/") &&
			dep != "github.com/linkgate/linkgate/shortener" && dep != "github.com/linkgate/linkgate/shortener/httpapi" && dep != "github.com/linkgate/linkgate/shortener/importer" {
			t.Errorf("shortener/httpapi imports %s", dep)
		}
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
				if dep == a || strings.HasPrefix(dep, a+"/") {
					continue deps
				}
			}
			t.Errorf("%s imports %s", tt.pkg, dep)
		}
	}
}
