package main

import (
	"context"
	"fmt"
	"runtime"

	"github.com/linkgate/linkgate/internal/cli"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func runVersion(ctx context.Context, args []string, env cli.Env) error {
	fs := cli.NewFlagSet("version", "linkgate version", "Print the version, Go version and platform.", env.Stderr)
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("version takes no arguments")
	}
	_, err := fmt.Fprintf(env.Stdout, "linkgate %s %s %s/%s\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}
