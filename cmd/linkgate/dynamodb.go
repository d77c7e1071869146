package main

import (
	"context"
	"fmt"
	"time"

	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/shortener/dynamodb"
)

const dynamodbHelp = `DynamoDB tooling. Subcommands:

  create-table   create the links table (on-demand capacity, partition key
                 shortURL, TTL on expiresAt) and its certificate table;
                 existing tables are fine
  fold-visits    fold the visit log into its state items now (serve and
                 the Lambda mode do it by themselves when due)

AWS settings come from the SDK's standard chain: AWS_REGION, AWS_PROFILE,
credentials (environment, profile, SSO, instance or task role), and
AWS_ENDPOINT_URL_DYNAMODB (or AWS_ENDPOINT_URL) for DynamoDB Local.`

func runDynamoDB(ctx context.Context, args []string, env cli.Env) error {
	fs := cli.NewFlagSet("dynamodb", "linkgate dynamodb <subcommand> [flags]", dynamodbHelp, env.Stderr)
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return err
	}
	switch sub := fs.Arg(0); sub {
	case "create-table":
		return runCreateTable(ctx, fs.Args()[1:], env)
	case "fold-visits":
		return runFoldVisits(ctx, fs.Args()[1:], env)
	case "":
		fs.Usage()
		return cli.Usagef("dynamodb: no subcommand given")
	default:
		fs.Usage()
		return cli.Usagef("dynamodb: unknown subcommand %q", sub)
	}
}

// createTableWait bounds --wait; DynamoDB usually activates a table in
// seconds.
const createTableWait = 10 * time.Minute

func runCreateTable(ctx context.Context, args []string, env cli.Env) error {
	fs := cli.NewFlagSet("dynamodb create-table", "linkgate dynamodb create-table [--table NAME] [--wait]",
		`Create the DynamoDB table linkgate and the seed's app use: on-demand
capacity (PAY_PER_REQUEST), partition key shortURL (string), TTL on
expiresAt. Idempotent: an existing table with that key is fine, and TTL is
enabled on it if it is not yet. DynamoDB enables TTL only once a table is
ACTIVE: --wait waits for that; without it, run the command again later.

It also creates the table NAME-certs (partition key d, sort key k), where
instances with automatic HTTPS share their certificates, ACME accounts and
locks (docs/dynamodb.md).`, env.Stderr)
	table := fs.String("table", dynamodb.DefaultTable, "table `name`")
	wait := fs.Bool("wait", false, "wait until the table is ACTIVE, then enable TTL")
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("create-table takes no arguments, got %q", fs.Args())
	}
	if *table == "" {
		return cli.Usagef("--table must not be empty")
	}
	s, err := dynamodb.Open(ctx, dynamodb.Options{Table: *table})
	if err != nil {
		return err
	}
	defer s.Close()
	if err := dynamodb.CreateTable(ctx, s.Client(), *table, *wait, createTableWait, env.Stdout); err != nil {
		return err
	}
	return dynamodb.CreateCertTable(ctx, s.Client(), dynamodb.CertTable(*table), *wait, createTableWait, env.Stdout)
}

func runFoldVisits(ctx context.Context, args []string, env cli.Env) error {
	fs := cli.NewFlagSet("dynamodb fold-visits", "linkgate dynamodb fold-visits [--table NAME]",
		`Fold the visit log of a table into its state items now, until nothing
committed is left unfolded (docs/dynamodb.md, "Visit statistics"). Every
instance folds by itself when the log has grown enough; this is for
operators and benchmarks. It waits for the fold lease if another process
holds it.`, env.Stderr)
	table := fs.String("table", dynamodb.DefaultTable, "table `name`")
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("fold-visits takes no arguments, got %q", fs.Args())
	}
	s, err := dynamodb.Open(ctx, dynamodb.Options{Table: *table, ManualVisits: true, Timeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		res, err := s.FoldVisits(ctx)
		if err != nil {
			return err
		}
		if res.Unavailable {
			fmt.Fprintln(env.Stderr, "another process holds the fold lease; waiting")
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Second):
			}
			continue
		}
		fmt.Fprintf(env.Stdout, "folded %d records into %d state items (%d bytes); the log is folded through record %d\n",
			res.Records, res.Items, res.StateBytes, res.Through)
		if res.Records == 0 {
			return nil
		}
	}
}
