// Command fuzz runs every fuzz target of the packages it is given for a
// fixed time each: the test command's fuzz step (scripts/test-isolated.sh).
//
//	fuzz -fuzztime 2s ./...
//
// go test -fuzz takes one target and links the package's instrumented test
// binary again each time; with ~50 targets in ~25 packages that is half the
// step. Here each package's binary is built once (go test -c -fuzz) and run
// once per target, as go test -fuzz runs it: in the package's folder, with
// the same fuzz cache, -test.paniconexit0 and a timeout.
//
// No target is skipped silently: the targets are found in the packages'
// test files (go list, then go/parser), a _test.go file that the build
// leaves out (build tags) may not hold one, each binary must list exactly
// the targets its sources declare, and a run that finds no target fails.
//
// A target that fails with a failing input fails the step. Any other
// failure (the fuzz engine losing a worker on a loaded machine) is retried
// once.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fuzz:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("fuzz", flag.ContinueOnError)
	fuzztime := fs.String("fuzztime", "2s", "time (or Nx iterations) per target, as go test -fuzztime")
	timeout := fs.Duration("timeout", 10*time.Minute, "timeout of one target's run, as go test -timeout")
	goCmd := fs.String("go", "go", "the go `command`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	patterns := fs.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	pkgs, err := listPackages(ctx, *goCmd, patterns)
	if err != nil {
		return err
	}
	plan, err := findTargets(pkgs)
	if err != nil {
		return err
	}
	if len(plan) == 0 {
		return fmt.Errorf("no fuzz target in %s", strings.Join(patterns, " "))
	}
	cacheDir, err := goEnv(ctx, *goCmd, "GOCACHE")
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "linkgate-fuzz-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	n := 0
	for _, p := range plan {
		n += len(p.Targets)
	}
	fmt.Fprintf(out, "fuzz: %d targets in %d packages, %s each\n", n, len(plan), *fuzztime)
	start := time.Now()
	bins, err := buildAll(ctx, *goCmd, plan, tmp)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "fuzz: built %d test binaries in %s\n", len(bins), time.Since(start).Round(time.Second))
	for i, p := range plan {
		listed, err := listTargets(ctx, bins[i], p.Dir)
		if err != nil {
			return fmt.Errorf("%s: %w", p.ImportPath, err)
		}
		if !slices.Equal(listed, p.Targets) {
			return fmt.Errorf("%s: the test binary has fuzz targets %v, its sources declare %v", p.ImportPath, listed, p.Targets)
		}
		for _, f := range p.Targets {
			r := runner{bin: bins[i], dir: p.Dir, target: f, fuzztime: *fuzztime, timeout: *timeout,
				cacheDir: filepath.Join(cacheDir, "fuzz", p.ImportPath)}
			if err := r.runWithRetry(ctx, out, p.ImportPath); err != nil {
				return err
			}
		}
		os.Remove(bins[i])
	}
	fmt.Fprintf(out, "fuzz: %d targets in %d packages passed in %s\n", n, len(plan), time.Since(start).Round(time.Second))
	return nil
}

// pkg is what go list says of one package.
type pkg struct {
	ImportPath     string
	Dir            string
	TestGoFiles    []string
	XTestGoFiles   []string
	IgnoredGoFiles []string
	Error          *struct{ Err string }
}

// fuzzPkg is a package with its fuzz targets, sorted.
type fuzzPkg struct {
	ImportPath, Dir string
	Targets         []string
}

func listPackages(ctx context.Context, goCmd string, patterns []string) ([]pkg, error) {
	cmd := exec.CommandContext(ctx, goCmd, append([]string{"list", "-e", "-json=ImportPath,Dir,TestGoFiles,XTestGoFiles,IgnoredGoFiles,Error"}, patterns...)...)
	cmd.Stderr = os.Stderr
	data, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var pkgs []pkg
	for dec := json.NewDecoder(bytes.NewReader(data)); ; {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("go list: %w", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
}

// findTargets parses the packages' test files for fuzz targets. A fuzz
// target in a test file the build ignores is an error: it would never run.
func findTargets(pkgs []pkg) ([]fuzzPkg, error) {
	var plan []fuzzPkg
	var errs []error
	for _, p := range pkgs {
		var targets []string
		for _, name := range slices.Concat(p.TestGoFiles, p.XTestGoFiles) {
			fs, err := fuzzFuncs(filepath.Join(p.Dir, name))
			if err != nil {
				return nil, err
			}
			targets = append(targets, fs...)
		}
		for _, name := range p.IgnoredGoFiles {
			if !strings.HasSuffix(name, "_test.go") {
				continue
			}
			fs, err := fuzzFuncs(filepath.Join(p.Dir, name))
			if err != nil {
				return nil, err
			}
			if len(fs) > 0 {
				errs = append(errs, fmt.Errorf("%s: fuzz targets %v are in a file this build leaves out (build constraints): they would never run", filepath.Join(p.Dir, name), fs))
			}
		}
		if len(targets) > 0 {
			slices.Sort(targets)
			plan = append(plan, fuzzPkg{p.ImportPath, p.Dir, slices.Compact(targets)})
		}
	}
	return plan, errors.Join(errs...)
}

// fuzzFuncs returns the fuzz targets a test file declares: top-level
// functions named as testing names them (Fuzz, then no lower-case letter)
// taking one parameter.
func fuzzFuncs(path string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || !isFuzzName(fn.Name.Name) || fn.Type.Params.NumFields() != 1 {
			continue
		}
		names = append(names, fn.Name.Name)
	}
	return names, nil
}

// isFuzzName is testing's rule for a fuzz target's name.
func isFuzzName(name string) bool {
	rest, ok := strings.CutPrefix(name, "Fuzz")
	if !ok {
		return false
	}
	if rest == "" {
		return true
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return !unicode.IsLower(r)
}

// buildAll builds every package's instrumented test binary into dir, a
// few at a time, before any target runs: a build during a run would take
// the cores the fuzz workers' fixed time is spent on. bins[i] is plan[i]'s.
func buildAll(ctx context.Context, goCmd string, plan []fuzzPkg, dir string) (bins []string, err error) {
	bins = make([]string, len(plan))
	errs := make([]error, len(plan))
	sem := make(chan struct{}, runtime.NumCPU())
	var wg sync.WaitGroup
	for i, p := range plan {
		bins[i] = filepath.Join(dir, fmt.Sprintf("%d.test", i))
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cmd := exec.CommandContext(ctx, goCmd, "test", "-c", "-fuzz=.", "-o", bins[i], p.ImportPath)
			if msg, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("go test -c -fuzz=. %s: %w\n%s", p.ImportPath, err, msg)
			}
		})
	}
	wg.Wait()
	return bins, errors.Join(errs...)
}

// listTargets asks a test binary for its fuzz targets.
func listTargets(ctx context.Context, bin, dir string) ([]string, error) {
	cmd := exec.CommandContext(ctx, bin, "-test.list", "^Fuzz")
	cmd.Dir = dir
	data, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("-test.list: %w\n%s", err, data)
	}
	var names []string
	for _, l := range strings.Fields(string(data)) {
		if isFuzzName(l) {
			names = append(names, l)
		}
	}
	slices.Sort(names)
	return names, nil
}

// runner runs one fuzz target.
type runner struct {
	bin, dir, target, fuzztime, cacheDir string
	timeout                              time.Duration
}

func (r runner) args() []string {
	return []string{
		"-test.paniconexit0", "-test.fuzzcachedir=" + r.cacheDir, "-test.timeout=" + r.timeout.String(),
		"-test.run=^$", "-test.fuzz=^" + r.target + "$", "-test.fuzztime=" + r.fuzztime,
	}
}

func (r runner) runWithRetry(ctx context.Context, out io.Writer, pkgPath string) error {
	for attempt := 1; ; attempt++ {
		start := time.Now()
		cmd := exec.CommandContext(ctx, r.bin, r.args()...)
		cmd.Dir = r.dir
		log, err := cmd.CombinedOutput()
		if err == nil {
			fmt.Fprintf(out, "fuzz %s %s: ok in %.1fs (%s)\n", pkgPath, r.target, time.Since(start).Seconds(), lastProgress(log))
			return nil
		}
		out.Write(log)
		if foundFailure(log) || attempt == 2 || ctx.Err() != nil {
			return fmt.Errorf("%s %s: %w", pkgPath, r.target, err)
		}
		fmt.Fprintf(out, "fuzz %s %s: %v without a failing input; retrying once\n", pkgPath, r.target, err)
	}
}

// foundFailure reports whether a fuzz run's output records a failing input:
// a real failure, never retried.
func foundFailure(log []byte) bool {
	return bytes.Contains(log, []byte("Failing input written to"))
}

// lastProgress is the last "elapsed: …, execs: …" report of a fuzz run.
func lastProgress(log []byte) string {
	last := ""
	for l := range strings.Lines(string(log)) {
		if _, p, ok := strings.Cut(l, "fuzz: "); ok && strings.HasPrefix(p, "elapsed:") {
			last = strings.TrimSpace(p)
		}
	}
	return last
}

// goEnv is one variable of go env.
func goEnv(ctx context.Context, goCmd, name string) (string, error) {
	out, err := exec.CommandContext(ctx, goCmd, "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}
