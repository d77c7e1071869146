package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestSymbolPackage(t *testing.T) {
	tests := []struct{ name, want string }{
		{"github.com/redis/go-redis/v9.cmdable.FTCreate", "github.com/redis/go-redis/v9"},
		{"github.com/linkgate/linkgate/gateway.(*Registry).Get", "github.com/linkgate/linkgate/gateway"},
		{"github.com/valyala/fasthttp.(*Server).serveConn.func1", "github.com/valyala/fasthttp"},
		{"type:*net/http.Request", "net/http"},
		{"go:itab.*os.File,io.Reader", "os"},
		{"runtime.mallocgc", "runtime"},
		{"slices.SortFunc[go.shape.[]string,go.shape.string]", "slices"},
		{"codeberg.org/go-fonts/liberation/liberationsansitalic..gobytes.1", "codeberg.org/go-fonts/liberation/liberationsansitalic"},
		{"gopkg.in/yaml.v3.(*parser).parse", "gopkg.in/yaml.v3"},
		{"go:string.*", "go:string"},
		{"go:func.*", "go:func"},
	}
	known := packageModules("github.com/redis/go-redis/v9\tm\ngithub.com/linkgate/linkgate/gateway\tm\n" +
		"github.com/valyala/fasthttp\tm\nnet/http\t\nos\t\nruntime\t\nslices\t\n" +
		"codeberg.org/go-fonts/liberation/liberationsansitalic\tm\ngopkg.in/yaml.v3\tm\n")
	for _, tt := range tests {
		if got := symbolPackage(tt.name, known); got != tt.want {
			t.Errorf("symbolPackage(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestSizesByModule(t *testing.T) {
	mods := packageModules("github.com/redis/go-redis/v9\tgithub.com/redis/go-redis/v9\n" +
		"github.com/redis/go-redis/v9/internal/pool\tgithub.com/redis/go-redis/v9\n" +
		"runtime\t\nnet/http\t\n")
	got, total := sizesByModule([]symbol{
		{"github.com/redis/go-redis/v9.cmdable.FTCreate", 300},
		{"github.com/redis/go-redis/v9/internal/pool.(*ConnPool).Get", 100},
		{"runtime.mallocgc", 250},
		{"type:*net/http.Request", 50},
		{"go:string.*", 120},
	}, mods)
	want := []moduleSize{{"github.com/redis/go-redis/v9", 400}, {"std", 300}, {linkerData, 120}}
	if total != 820 || len(got) != len(want) {
		t.Fatalf("got %v (total %d), want %v (820)", got, total, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// The Lambda function's bootstrap, built with scripts/lambda-package.sh's
// tags, links no gateway, load generator, ACME or OpenTelemetry code (and
// no embedded store): a function keeps links in DynamoDB and serves the
// shortener only. The tags are read from the script, so the test follows
// what is shipped.
func TestFunctionLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	script, err := os.ReadFile(filepath.Join(root, "scripts", "lambda-package.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`go build [^\n]*-tags (\S+)[^\n]*\n[^\n]*-o "\$stage/\$arch/function/bootstrap"`).FindSubmatch(script)
	if m == nil {
		t.Fatal("scripts/lambda-package.sh: no go build -tags … of the function's bootstrap")
	}
	tags := string(m[1])
	if tags != function.tags {
		t.Errorf("the script builds the bootstrap with -tags %s, tools/release's function program with %s", tags, function.tags)
	}
	out, err := goCmd(context.Background(), root, goEnv("arm64"), "list", "-deps", "-tags", tags, "./cmd/linkgate")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := []string{
		"github.com/linkgate/linkgate/gateway",          // the gateway
		"github.com/linkgate/linkgate/bench",            // the load generator
		"github.com/linkgate/linkgate/shortener/pebble", // the embedded store
		"github.com/caddyserver/certmagic",              // ACME
		"github.com/mholt/acmez",
		"golang.org/x/crypto/acme",
		"go.opentelemetry.io/", // OpenTelemetry
		"github.com/cockroachdb/pebble",
	}
	var linked int
	for dep := range strings.Lines(string(out)) {
		dep = strings.TrimSpace(dep)
		linked++
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, strings.TrimSuffix(f, "/")+"/") || (strings.HasSuffix(f, "/") && strings.HasPrefix(dep, f)) {
				t.Errorf("the Lambda bootstrap (-tags %s) links %s", tags, dep)
			}
		}
	}
	if linked < 50 {
		t.Fatalf("go list named %d packages: not the bootstrap's dependencies", linked)
	}
}

// No release binary (nor the Lambda function's bootstrap) links
// text/template: its executor calls reflect.Value.MethodByName, which
// makes the linker keep every exported method of every reachable type
// (about 18 MB of linkgate's 57 MB in December 2026). The dashboard page
// and the bench reports are written with explicit escaping instead
// (shortener/httpapi/ui_page.go, bench/htmlreport); make build's tags must
// be the release's, since they are what keep x/net/trace's html/template
// out.
func TestNoTemplateExecutor(t *testing.T) {
	root := filepath.Join("..", "..")
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var tags string
	if m := regexp.MustCompile(`(?m)^TAGS\s*:=\s*(\S+)$`).FindSubmatch(makefile); m != nil {
		tags = string(m[1])
	}
	if tags != programs[0].tags {
		t.Errorf("the Makefile's TAGS %q are not tools/release's linkgate tags %q", tags, programs[0].tags)
	}
	for _, p := range append(programs, function) {
		t.Run(p.name, func(t *testing.T) {
			out, err := goCmd(context.Background(), root, goEnv("amd64"), "list", "-deps", "-tags", p.tags,
				"-f", "{{.ImportPath}}:{{range .Imports}} {{.}}{{end}}", p.pkg)
			if err != nil {
				t.Fatal(err)
			}
			var linked int
			for line := range strings.Lines(string(out)) {
				pkg, imports, _ := strings.Cut(strings.TrimSpace(line), ":")
				linked++
				for imp := range strings.FieldsSeq(imports) {
					if imp == "text/template" || imp == "html/template" {
						t.Errorf("%s (-tags %s) links %s, imported by %s", p.name, p.tags, imp, pkg)
					}
				}
			}
			if linked < 20 {
				t.Fatalf("go list named %d packages: not %s's dependencies", linked, p.name)
			}
		})
	}
}
