package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// stamp is what a build records of its source: the version, the commit
// (with "+dirty" when the tree has uncommitted changes) and the time every
// file in an archive or image is dated, so that two builds of one commit
// give the same bytes.
type stamp struct {
	Version string
	Commit  string
	Time    time.Time
}

// Dirty reports whether the tree had uncommitted changes.
func (s stamp) Dirty() bool { return strings.HasSuffix(s.Commit, "+dirty") }

// readStamp reads the commit and its time from git in root; commit, when
// not empty, is taken as it is instead (a Docker build has no .git). The
// time is SOURCE_DATE_EPOCH when that is set (the reproducible-builds
// convention), else the commit's.
func readStamp(ctx context.Context, root, version, commit string) (stamp, error) {
	git := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, "git", append([]string{"-C", root}, args...)...).Output()
		if err != nil {
			return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	s := stamp{Version: version, Commit: commit}
	var err error
	if s.Commit == "" {
		if s.Commit, err = git("rev-parse", "HEAD"); err != nil {
			return s, err
		}
		status, err := git("status", "--porcelain", "--untracked-files=no")
		if err != nil {
			return s, err
		}
		if status != "" {
			s.Commit += "+dirty"
		}
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = git("log", "-1", "--format=%ct", "HEAD"); err != nil {
			return s, err
		}
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return s, fmt.Errorf("commit time %q: %w", epoch, err)
	}
	s.Time = time.Unix(sec, 0).UTC()
	return s, nil
}

// semverRE is a release version: vMAJOR.MINOR.PATCH with an optional
// pre-release, as git tags name them.
var semverRE = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// binaryName is the file a build writes for a program and architecture.
func binaryName(prog, arch string) string { return prog + "_linux_" + arch }

// buildBinaries builds every program for every architecture into out, as
// binaryName names them: static, stripped, -trimpath, no VCS stamping by go
// (it records a clone's state but not a worktree's, so two checkouts of one
// commit would differ); the version and commit are stamped with -X instead.
func buildBinaries(ctx context.Context, root, out string, s stamp, arches []string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	ldflags := fmt.Sprintf("-s -w -X main.version=%s -X main.commit=%s", s.Version, s.Commit)
	// One architecture per goroutine, its programs one after the other (they
	// share most packages, which the first build compiles): a go build
	// links on about one core.
	errs := make([]error, len(arches))
	var wg sync.WaitGroup
	for i, arch := range arches {
		wg.Go(func() {
			for _, p := range programs {
				dst, err := filepath.Abs(filepath.Join(out, binaryName(p.name, arch)))
				if err == nil {
					_, err = goCmd(ctx, root, goEnv(arch), "build", "-trimpath", "-buildvcs=false",
						"-tags", p.tags, "-ldflags", ldflags, "-o", dst, p.pkg)
				}
				if err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
