package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The plan holds every fuzz target of every package with one, and nothing
// of a package without: a package without targets between two with them
// must neither stop the step nor hide the targets after it.
func TestFindTargets(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return name
	}
	a := write("a_test.go", `package a
import "testing"
func FuzzB(f *testing.F) {}
func FuzzA(f *testing.F) {}
func Fuzzy(f *testing.F) {}         // not a fuzz target: lower case after Fuzz
func FuzzHelper(f *testing.F, n int) {} // two parameters: not a target
type T struct{}
func (T) FuzzM(f *testing.F) {}     // a method: not a target
func TestX(t *testing.T) {}
`)
	ax := write("a_x_test.go", `package a_test
import "testing"
func Fuzz(f *testing.F) {}
func FuzzA(f *testing.F) {} // another package's FuzzA; listed once
`)
	none := write("none_test.go", `package none
import "testing"
func TestOnly(t *testing.T) {}
`)
	c := write("c_test.go", `package c
import "testing"
func FuzzC(f *testing.F) {}
`)
	pkgs := []pkg{
		{ImportPath: "m/a", Dir: dir, TestGoFiles: []string{a}, XTestGoFiles: []string{ax}},
		{ImportPath: "m/none", Dir: dir, TestGoFiles: []string{none}},
		{ImportPath: "m/empty", Dir: dir},
		{ImportPath: "m/c", Dir: dir, TestGoFiles: []string{c}, IgnoredGoFiles: []string{"other.go", none}},
	}
	plan, err := findTargets(pkgs)
	if err != nil {
		t.Fatal(err)
	}
	want := []fuzzPkg{{"m/a", dir, []string{"Fuzz", "FuzzA", "FuzzB"}}, {"m/c", dir, []string{"FuzzC"}}}
	if !slices.EqualFunc(plan, want, func(x, y fuzzPkg) bool {
		return x.ImportPath == y.ImportPath && x.Dir == y.Dir && slices.Equal(x.Targets, y.Targets)
	}) {
		t.Errorf("plan %+v, want %+v", plan, want)
	}

	// A target in a test file the build leaves out would never run.
	ignored := write("tagged_test.go", "//go:build never\n\npackage c\nimport \"testing\"\nfunc FuzzTagged(f *testing.F) {}\n")
	pkgs[3].IgnoredGoFiles = append(pkgs[3].IgnoredGoFiles, ignored)
	if _, err := findTargets(pkgs); err == nil || !strings.Contains(err.Error(), "FuzzTagged") {
		t.Errorf("a fuzz target in an ignored file: %v, want an error naming it", err)
	}
}

func TestFuzzOutput(t *testing.T) {
	fail := "--- FAIL: FuzzX (0.10s)\n    Failing input written to testdata/fuzz/FuzzX/5a3b\n    To re-run:\n"
	lost := "fuzz: elapsed: 1s, execs: 100 (100/sec), new interesting: 0 (total: 3)\n--- FAIL: FuzzX (1.00s)\n    fuzzing process hung or terminated unexpectedly: exit status 2\n"
	if !foundFailure([]byte(fail)) || foundFailure([]byte(lost)) {
		t.Error("foundFailure: a failing input is a real failure, a lost worker is not")
	}
	ok := "fuzz: elapsed: 0s, gathering baseline coverage: 0/3 completed\nfuzz: elapsed: 0s, execs: 3 (0/sec), new interesting: 0 (total: 3)\nfuzz: elapsed: 2s, execs: 5312 (2650/sec), new interesting: 1 (total: 4)\nPASS\n"
	if got := lastProgress([]byte(ok)); got != "elapsed: 2s, execs: 5312 (2650/sec), new interesting: 1 (total: 4)" {
		t.Errorf("lastProgress: %q", got)
	}
	r := runner{bin: "x.test", dir: ".", target: "FuzzX", fuzztime: "2s", cacheDir: "/c/fuzz/m/a", timeout: 600e9}
	if got := strings.Join(r.args(), " "); got != "-test.paniconexit0 -test.fuzzcachedir=/c/fuzz/m/a -test.timeout=10m0s -test.run=^$ -test.fuzz=^FuzzX$ -test.fuzztime=2s" {
		t.Errorf("args: %s", got)
	}
}
