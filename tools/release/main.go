// Command release builds linkgate's release artefacts: reproducible static
// binaries for linux/amd64 and linux/arm64 (make cross), per-arch archives
// with the licences of everything they include, CycloneDX SBOMs and
// SHA256SUMS (make release), OCI images (make image), and NOTICE
// (go generate ./...).
//
// Usage (from the repository root):
//
//	go run ./tools/release notice [-o NOTICE]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
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

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	top := flag.NewFlagSet("release", flag.ContinueOnError)
	top.SetOutput(stderr)
	dir := top.String("C", ".", "the repository root")
	if err := top.Parse(args); err != nil {
		return err
	}
	if top.NArg() == 0 {
		return errors.New("want a command: notice")
	}
	cmd, rest := top.Arg(0), top.Args()[1:]
	fs := flag.NewFlagSet("release "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	switch cmd {
	case "notice":
		out := fs.String("o", "NOTICE", "file to write, relative to the root; - for stdout")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		mods, err := linkedModules(ctx, *dir)
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
		return os.WriteFile(filepathJoin(*dir, *out), text, 0o644)
	}
	return fmt.Errorf("unknown command %q", cmd)
}

func filepathJoin(root, p string) string {
	if len(p) > 0 && p[0] == '/' {
		return p
	}
	return root + "/" + p
}
