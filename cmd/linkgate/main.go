// Command linkgate is the link platform in one binary: the shortener
// (serve), the APISIX-compatible gateway (gateway), the load generator
// (bench), DynamoDB tooling (dynamodb) and, under AWS Lambda, the function.
package main

import (
	"context"
	"os"

	"github.com/linkgate/linkgate/internal/cli"
)

func main() {
	err := run(context.Background(), os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	os.Exit(cli.Exit(err, "linkgate", os.Stderr))
}
