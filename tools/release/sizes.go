package main

import (
	"cmp"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// What each module adds to a binary, from the linker's symbol sizes (the
// symbol table `go tool nm -size` lists), read from a build with the
// release's flags but its symbol table kept (the release strips it): each
// symbol goes to the package its name starts with and that package to its
// module (go list -deps). Symbols in sections that take no file bytes
// (.bss, .noptrbss: crypto/internal/fips140/drbg's 32 MiB buffer) are left
// out. What belongs to no package — strings, function and type tables the
// linker generates — is counted as "(linker data)". The sizes are of
// symbols, so their total is below the file's; the shares are what to
// read.

// function is the Lambda function's bootstrap as scripts/lambda-package.sh
// builds it (TestFunctionLinks reads the tags from that script).
var function = program{name: "bootstrap", pkg: "./cmd/linkgate", tags: "lambda.norpc,nopebble,functiononly"}

// moduleSize is what one module's symbols take in a binary.
type moduleSize struct {
	Module string
	Bytes  int64
}

// binarySizes builds prog for arch with the release's flags (symbols kept)
// and returns its size by module, largest first, and the total.
func binarySizes(ctx context.Context, root string, p program, arch string) ([]moduleSize, int64, error) {
	dir, err := os.MkdirTemp("", "linkgate-sizes-")
	if err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, p.name)
	env := goEnv(arch)
	if _, err := goCmd(ctx, root, env, "build", "-trimpath", "-buildvcs=false", "-tags", p.tags, "-o", bin, p.pkg); err != nil {
		return nil, 0, err
	}
	syms, err := fileSymbols(bin)
	if err != nil {
		return nil, 0, err
	}
	pkgs, err := goCmd(ctx, root, env, "list", "-deps", "-tags", p.tags, "-f", "{{.ImportPath}}\t{{with .Module}}{{.Path}}{{end}}", p.pkg)
	if err != nil {
		return nil, 0, err
	}
	sizes, total := sizesByModule(syms, packageModules(string(pkgs)))
	return sizes, total, nil
}

// symbol is a named part of a binary's file.
type symbol struct {
	Name string
	Size int64
}

// fileSymbols reads an ELF binary's symbols that take bytes in its file.
func fileSymbols(bin string) ([]symbol, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	var out []symbol
	for _, s := range syms {
		if s.Size == 0 || s.Section == elf.SHN_UNDEF || int(s.Section) >= len(f.Sections) {
			continue
		}
		if f.Sections[s.Section].Type == elf.SHT_NOBITS {
			continue
		}
		out = append(out, symbol{s.Name, int64(s.Size)})
	}
	return out, nil
}

// packageModules maps import paths to module paths from lines of
// "importpath\tmodule"; the standard library's packages map to "std".
func packageModules(list string) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(list) {
		pkg, mod, _ := strings.Cut(strings.TrimRight(line, "\r\n"), "\t")
		if pkg == "" {
			continue
		}
		if mod == "" {
			mod = "std"
		}
		m[pkg] = mod
	}
	return m
}

// linkerData is where symbols of no package go.
const linkerData = "(linker data)"

// sizesByModule sums symbol sizes by module, largest first.
func sizesByModule(syms []symbol, modules map[string]string) ([]moduleSize, int64) {
	sums := map[string]int64{}
	var total int64
	for _, sym := range syms {
		mod := modules[symbolPackage(sym.Name, modules)]
		if mod == "" {
			mod = linkerData
		}
		sums[mod] += sym.Size
		total += sym.Size
	}
	out := make([]moduleSize, 0, len(sums))
	for m, n := range sums {
		out = append(out, moduleSize{m, n})
	}
	slices.SortFunc(out, func(a, b moduleSize) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), strings.Compare(a.Module, b.Module))
	})
	return out, total
}

// symbolPackage is the import path a symbol's name starts with, among
// the packages modules knows: "github.com/a/b.(*T).M" → "github.com/a/b",
// "type:*net/http.Request" → "net/http", "go:itab.*os.File,io.Reader" →
// "os", "gopkg.in/yaml.v3.(*parser).parse" → "gopkg.in/yaml.v3" (a dot in
// the last element: the longest known prefix wins). A name of no known
// package ("go:string.*") gives its text up to the first dot, which maps
// to no module.
func symbolPackage(name string, modules map[string]string) string {
	for _, p := range []string{"type:", "go:itab.", "go:info.", "go:cuinfo.", "gclocals·", "go:link."} {
		name = strings.TrimPrefix(name, p)
	}
	name = strings.TrimLeft(name, "*[]")
	// The package ends at a '.' after the last '/' before any bracket,
	// comma or parenthesis (generic arguments, methods).
	end := len(name)
	if i := strings.IndexAny(name, "[(,"); i >= 0 {
		end = i
	}
	head := name[:end]
	slash := strings.LastIndexByte(head, '/')
	first := ""
	for i := slash + 1; i < len(head); i++ {
		if head[i] != '.' {
			continue
		}
		if _, ok := modules[head[:i]]; ok {
			return head[:i]
		}
		if first == "" {
			first = head[:i]
		}
	}
	if first == "" {
		return head
	}
	return first
}

// printSizes writes what each module adds, its share, and the rest folded
// below the first n.
func printSizes(w io.Writer, title string, sizes []moduleSize, total int64, n int) {
	fmt.Fprintf(w, "%s: %.1f MB of symbols in the file, by module (the linker's symbol sizes):\n", title, float64(total)/1e6)
	var rest int64
	for i, s := range sizes {
		if i >= n {
			rest += s.Bytes
			continue
		}
		fmt.Fprintf(w, "  %8.2f MB %5.1f %%  %s\n", float64(s.Bytes)/1e6, 100*float64(s.Bytes)/float64(total), s.Module)
	}
	if rest > 0 {
		fmt.Fprintf(w, "  %8.2f MB %5.1f %%  %d other modules\n", float64(rest)/1e6, 100*float64(rest)/float64(total), len(sizes)-n)
	}
}
