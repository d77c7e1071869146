package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/google/licensecheck"
)

// program is one binary a release ships.
type program struct {
	name, pkg, tags string
}

// programs are the release's binaries, with make build's tags: linkgate's
// lambda.norpc drops aws-lambda-go's RPC mode (the retired go1.x runtime)
// and grpcnotrace gRPC's golang.org/x/net/trace, both only for what they
// link: html/template, whose executor keeps every exported method of
// every reachable type (TestNoTemplateExecutor).
var programs = []program{
	{name: "linkgate", pkg: "./cmd/linkgate", tags: "lambda.norpc,grpcnotrace"},
	{name: "linkgate-extension", pkg: "./cmd/linkgate-extension"},
}

// arches are the release's architectures, all linux.
var arches = []string{"amd64", "arm64"}

// goEnv is the environment of every go command the release runs for arch:
// static binaries, modules exactly as go.sum pins them.
func goEnv(arch string) []string {
	return append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0", "GOFLAGS=-mod=readonly", "GOTOOLCHAIN=local")
}

// goCmd runs the go command in root and returns its standard output.
func goCmd(ctx context.Context, root string, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = root, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}

// module is a Go module linked into a release binary, or the Go standard
// library (Path "std").
type module struct {
	Path, Version, Dir string
	Licenses           []string // SPDX identifiers named by its licence files, sorted
	Files              []string // its licence and notice files, names relative to Dir
}

// linkedModules returns every module compiled into any of the release's
// binaries on any of its architectures (go list -deps: the same set the
// binaries' build info records), plus the standard library, sorted by path,
// with their licence files identified.
func linkedModules(ctx context.Context, root string) ([]module, error) {
	const format = `{{with .Module}}{{if not .Main}}{{.Path}}	{{.Version}}	{{with .Replace}}{{.Dir}}{{else}}{{.Dir}}{{end}}{{end}}{{end}}`
	seen := map[string]module{}
	for _, arch := range arches {
		for _, p := range programs {
			out, err := goCmd(ctx, root, goEnv(arch), "list", "-deps", "-tags", p.tags, "-f", format, p.pkg)
			if err != nil {
				return nil, err
			}
			for line := range strings.Lines(string(out)) {
				f := strings.Split(strings.TrimSpace(line), "\t")
				if len(f) != 3 {
					continue
				}
				if f[2] == "" {
					return nil, fmt.Errorf("module %s@%s is not in the module cache (go mod download)", f[0], f[1])
				}
				seen[f[0]+"@"+f[1]] = module{Path: f[0], Version: f[1], Dir: f[2]}
			}
		}
	}
	goroot, err := goCmd(ctx, root, goEnv(arches[0]), "env", "GOROOT")
	if err != nil {
		return nil, err
	}
	version, err := goCmd(ctx, root, goEnv(arches[0]), "env", "GOVERSION")
	if err != nil {
		return nil, err
	}
	mods := []module{{Path: "std", Version: strings.TrimSpace(string(version)), Dir: strings.TrimSpace(string(goroot))}}
	for _, m := range seen {
		mods = append(mods, m)
	}
	slices.SortFunc(mods[1:], func(a, b module) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Version, b.Version))
	})
	for i := range mods {
		if err := mods[i].identify(); err != nil {
			return nil, err
		}
	}
	return mods, nil
}

// licenseFileRE matches the names of licence and notice files at a
// module's root: LICENSE, LICENSE.txt, LICENSE-MIT, COPYING, NOTICE,
// PATENTS…
var licenseFileRE = regexp.MustCompile(`(?i)^(un)?(licen[cs]e|copying|notice|patents)([._-].*)?$`)

// isNotice reports whether a licence file is a notice rather than a licence.
func isNotice(name string) bool {
	n := strings.ToLower(name)
	return strings.HasPrefix(n, "notice") || strings.HasPrefix(n, "patents")
}

// identify finds m's licence files and the licences they hold. A module
// without a licence file, or whose licence is not recognised, is an error:
// a release must not ship what it cannot name the licence of.
func (m *module) identify() error {
	names, err := licenseFiles(m.Dir)
	if err != nil {
		return fmt.Errorf("module %s: %w", m.Path, err)
	}
	ids := map[string]bool{}
	for _, name := range names {
		m.Files = append(m.Files, name)
		if isNotice(filepath.Base(name)) {
			continue
		}
		text, err := os.ReadFile(filepath.Join(m.Dir, name))
		if err != nil {
			return err
		}
		for _, match := range licensecheck.Scan(text).Match {
			ids[match.ID] = true
		}
	}
	for id := range ids {
		m.Licenses = append(m.Licenses, id)
	}
	slices.Sort(m.Licenses)
	switch {
	case len(m.Files) == 0:
		return fmt.Errorf("module %s@%s has no licence file in %s", m.Path, m.Version, m.Dir)
	case len(m.Licenses) == 0:
		return fmt.Errorf("module %s@%s: no known licence in %v", m.Path, m.Version, m.Files)
	}
	return nil
}

// licenseFiles lists the licence and notice files at the root of dir and
// in a licenses/ folder there (where a module with a choice of licences
// keeps their texts), as slash-separated names relative to dir.
func licenseFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		switch {
		case e.IsDir() && strings.EqualFold(e.Name(), "licenses"):
			sub, err := os.ReadDir(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, err
			}
			for _, s := range sub {
				if s.Type().IsRegular() {
					names = append(names, e.Name()+"/"+s.Name())
				}
			}
		case e.Type().IsRegular() && licenseFileRE.MatchString(e.Name()):
			names = append(names, e.Name())
		}
	}
	return names, nil
}
