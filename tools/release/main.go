// Command release builds linkgate's release artefacts, reproducibly: two
// runs on one commit write the same bytes.
//
// Usage, from the repository root (the Makefile targets run it):
//
//	go run ./tools/release build -version V -out dist    # make cross: static binaries per arch
//	go run ./tools/release release -version vX.Y.Z       # make release: dist/release/
//	go run ./tools/release image -version V              # make image: dist/image/
//	go run ./tools/release rootfs -bin B -out DIR        # the image's files (the Dockerfile's build stage)
//	go run ./tools/release sizes [-function]             # what each module adds to the binary
//	go run ./tools/release notice                        # go generate ./...: NOTICE
//	go run ./tools/release install-tools                 # the pinned SBOM generator (install-deps.sh)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

//go:generate go run . -C ../.. notice -o NOTICE

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
}

const usage = `usage: release [-C root] command [flags]

Commands:
  build -version V [-commit C] [-arch A,B] -out DIR
                                  static binaries DIR/PROGRAM_linux_ARCH (make cross)
  release -version vX.Y.Z [-out DIR] [-allow-dirty]
                                  archives, SBOMs, licences, SHA256SUMS (make release)
  image -version V [-bin DIR] [-out DIR]
                                  OCI images from make cross's binaries (make image)
  rootfs -bin FILE -out DIR       the image's files around the linkgate binary FILE
  sizes [-arch A] [-function] [-n N]
                                  what each module adds to linkgate (or the Lambda bootstrap)
  notice [-o FILE]                regenerate NOTICE (go generate ./...)
  install-tools                   build the pinned cyclonedx-gomod into .cache/bin
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	top := flag.NewFlagSet("release", flag.ContinueOnError)
	top.SetOutput(stderr)
	top.Usage = func() { fmt.Fprint(stderr, usage) }
	root := top.String("C", ".", "the repository root")
	if err := top.Parse(args); err != nil {
		return err
	}
	if top.NArg() == 0 {
		top.Usage()
		return errors.New("no command given")
	}
	cmd, rest := top.Arg(0), top.Args()[1:]
	fs := flag.NewFlagSet("release "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	switch cmd {
	case "build":
		version := fs.String("version", "dev", "version stamped into the binaries")
		commit := fs.String("commit", "", "commit stamped into the binaries (default: git's HEAD)")
		arch := fs.String("arch", strings.Join(arches, ","), "architectures, comma-separated")
		out := fs.String("out", "dist", "output folder, relative to the root")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		s, err := readStamp(ctx, *root, *version, *commit)
		if err != nil {
			return err
		}
		return buildBinaries(ctx, *root, inRoot(*root, *out), s, strings.Split(*arch, ","))
	case "image":
		version := fs.String("version", "dev", "version: the image's tag and label")
		bins := fs.String("bin", "dist", "folder of make cross's binaries, relative to the root")
		out := fs.String("out", "dist/image", "output folder, relative to the root (emptied first)")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		s, err := readStamp(ctx, *root, *version, "")
		if err != nil {
			return err
		}
		images, err := writeImages(ctx, *root, inRoot(*root, *bins), inRoot(*root, *out), s)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: %s/oci (multi-arch index), %s\n", imageRepo+":"+s.Version, *out, imageTarName(s.Version, "ARCH"))
		for _, im := range images {
			fmt.Fprintf(stdout, "  linux/%-6s %5.1f MB compressed, %5.1f MB unpacked\n", im.arch, float64(im.compressed)/1e6, float64(im.uncompressed)/1e6)
		}
		return nil
	case "rootfs":
		bin := fs.String("bin", "", "the linkgate binary")
		out := fs.String("out", "", "folder to write the files into")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if *bin == "" || *out == "" {
			return errors.New("rootfs: want -bin and -out")
		}
		return writeRootfs(ctx, *root, *bin, *out)
	case "release":
		version := fs.String("version", "", "release version, vMAJOR.MINOR.PATCH[-PRERELEASE]")
		out := fs.String("out", "dist/release", "output folder, relative to the root (emptied first)")
		allowDirty := fs.Bool("allow-dirty", false, "release a tree with uncommitted changes (for tests)")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if !semverRE.MatchString(*version) {
			return fmt.Errorf("-version %q: want vMAJOR.MINOR.PATCH, e.g. make release VERSION=v0.1.0", *version)
		}
		s, err := readStamp(ctx, *root, *version, "")
		if err != nil {
			return err
		}
		if s.Dirty() && !*allowDirty {
			return fmt.Errorf("the tree has uncommitted changes: commit them first, so the release is reproducible from its commit")
		}
		return release(ctx, *root, inRoot(*root, *out), s, stdout)
	case "sizes":
		arch := fs.String("arch", arches[0], "architecture")
		fn := fs.Bool("function", false, "the Lambda function's bootstrap instead of linkgate")
		n := fs.Int("n", 20, "modules listed before the rest is summed")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		p := programs[0]
		if *fn {
			p = function
		}
		sizes, total, err := binarySizes(ctx, *root, p, *arch)
		if err != nil {
			return err
		}
		printSizes(stdout, fmt.Sprintf("%s (%s, -tags %s)", p.name, *arch, p.tags), sizes, total, *n)
		return nil
	case "notice":
		out := fs.String("o", "NOTICE", "file to write, relative to the root; - for stdout")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		mods, err := linkedModules(ctx, *root)
		if err != nil {
			return err
		}
		text, err := renderNotice(mods)
		if err != nil {
			return err
		}
		if *out == "-" {
			_, err = stdout.Write(text)
			return err
		}
		return os.WriteFile(inRoot(*root, *out), text, 0o644)
	case "install-tools":
		if err := fs.Parse(rest); err != nil {
			return err
		}
		return installSBOMTool(ctx, *root)
	}
	top.Usage()
	return fmt.Errorf("unknown command %q", cmd)
}

// inRoot resolves a path given relative to the repository root.
func inRoot(root, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(root, p)
}
