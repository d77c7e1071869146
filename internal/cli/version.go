package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Build describes a binary: the version and commit stamped at link time
// (-ldflags "-X main.version=v1.2.3 -X main.commit=SHA[+dirty]", as make
// cross and make release do), else the commit `go build -buildvcs` recorded;
// the Go toolchain and the platform.
type Build struct {
	Name, Version string
	Commit        string // full revision; empty when the build recorded none
	CommitTime    string // RFC 3339, UTC
	Modified      bool   // built from a tree with uncommitted changes
	Go, Platform  string
}

// ReadBuild returns the Build of the running binary. commit is the one
// stamped at link time, "" if none.
func ReadBuild(name, version, commit string) Build {
	b := Build{Name: name, Version: version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if commit != "" {
		b.Commit, b.Modified = strings.CutSuffix(commit, "+dirty")
	} else if info, ok := debug.ReadBuildInfo(); ok {
		b.fromSettings(info.Settings)
	}
	return b
}

func (b *Build) fromSettings(settings []debug.BuildSetting) {
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.time":
			b.CommitTime = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
}

// String is the one line `linkgate version` prints:
// "linkgate v0.1.0 commit 0123456789ab go1.26.8 linux/arm64", the commit
// shortened to 12 digits, "+dirty" when the tree was modified, "unknown"
// when the build recorded no commit (go run, go test, -buildvcs=false).
func (b Build) String() string {
	commit := "unknown"
	if b.Commit != "" {
		commit = b.Commit[:min(12, len(b.Commit))]
		if b.Modified {
			commit += "+dirty"
		}
	}
	return fmt.Sprintf("%s %s commit %s %s %s", b.Name, b.Version, commit, b.Go, b.Platform)
}
