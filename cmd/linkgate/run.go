package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"sort"
	"syscall"

	"github.com/linkgate/linkgate/internal/cli"
)

// command is one subcommand: a one-line summary for `linkgate help` and the
// function that runs it. Every command answers --help.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, env cli.Env) error
}

// commands lists every subcommand; each lives in its own file (gateway and
// bench add themselves: the Lambda function's build, -tags functiononly,
// leaves them out).
var commands = map[string]command{
	"dynamodb": {"DynamoDB tooling: create-table", runDynamoDB},
	"lambda":   {"run as an AWS Lambda function (what linkgate does under Lambda without a command)", runLambda},
	"serve":    {"serve the URL shortener (redirects, seed-compatible API, REST API)", runServe},
	"version":  {"print the version and exit", runVersion},
}

// run is the whole program: main only calls it. It owns signal handling, so
// SIGINT/SIGTERM cancel ctx and commands shut down gracefully.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	env := cli.Env{Getenv: getenv, Stdin: stdin, Stdout: stdout, Stderr: stderr}

	if len(args) == 0 {
		// Deployed as a function's bootstrap, linkgate is started bare.
		if getenv("AWS_LAMBDA_RUNTIME_API") != "" {
			return runLambda(ctx, nil, env)
		}
		printHelp(stderr)
		return cli.Usagef("no command given")
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 {
			if c, ok := commands[rest[0]]; ok {
				return c.run(ctx, []string{"--help"}, env)
			}
		}
		printHelp(stdout)
		return nil
	case "-version", "--version":
		name = "version"
	}
	c, ok := commands[name]
	if !ok {
		printHelp(stderr)
		return cli.Usagef("unknown command %q", name)
	}
	return c.run(ctx, rest, env)
}

func printHelp(w io.Writer) {
	fmt.Fprintf(w, "linkgate — the link platform: shortener, gateway, load generator.\n\nUsage: linkgate <command> [flags]\n\nCommands:\n")
	names := make([]string, 0, len(commands)+1)
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "  %-10s %s\n\nRun 'linkgate <command> --help' for a command's flags.\n", "help", "show this help, or a command's")
}
