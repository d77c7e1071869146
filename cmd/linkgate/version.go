package main

import (
	"context"
	"fmt"

	"github.com/linkgate/linkgate/internal/cli"
)

// version and commit are set at build time:
// -ldflags "-X main.version=v1.2.3 -X main.commit=SHA" (make cross). Without
// a stamped commit, `linkgate version` shows the one go build recorded.
var version, commit = "dev", ""

func runVersion(ctx context.Context, args []string, env cli.Env) error {
	fs := cli.NewFlagSet("version", "linkgate version",
		"Print the version, the commit it was built from, the Go version and the platform.", env.Stderr)
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("version takes no arguments")
	}
	_, err := fmt.Fprintln(env.Stdout, cli.ReadBuild("linkgate", version, commit))
	return err
}
