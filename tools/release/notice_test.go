package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// repoRoot is the repository root, seen from this package's directory.
const repoRoot = "../.."

// NOTICE must list exactly what the binaries link: a dependency added,
// removed or relicensed without regenerating it fails here.
func TestNoticeUpToDate(t *testing.T) {
	mods, err := linkedModules(context.Background(), repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	want, err := renderNotice(mods)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(repoRoot, "NOTICE"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("NOTICE is out of date with the modules linked into the binaries; regenerate it with: go generate ./...\n%s", lineDiff(string(got), string(want)))
	}
}

func TestLicenseFileNames(t *testing.T) {
	for name, want := range map[string]bool{
		"LICENSE": true, "LICENSE.txt": true, "License.md": true, "LICENSE-MIT": true, "COPYING": true,
		"NOTICE": true, "NOTICE.txt": true, "PATENTS": true, "UNLICENSE": true,
		"README.md": false, "licensecheck.go": false, "noticed": false,
	} {
		if got := licenseFileRE.MatchString(name); got != want {
			t.Errorf("%s: licence file %v, want %v", name, got, want)
		}
	}
}
