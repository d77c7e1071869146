// Command linkgate is the link platform in one binary: the shortener
// (serve), the APISIX-compatible gateway (gateway), the load generator
// (bench), DynamoDB tooling (dynamodb) and, under AWS Lambda, the function.
package main

import (
	"context"
	"os"

	"github.com/linkgate/linkgate/internal/cli"
	// WebSocket over HTTP/2 (extended CONNECT) without GODEBUG=http2xconnect=1.
	_ "github.com/linkgate/linkgate/internal/xconnect"
)

func main() {
	err := run(context.Background(), os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	os.Exit(cli.Exit(err, "linkgate", os.Stderr))
}
