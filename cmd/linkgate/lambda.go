package main

import (
	"context"
	"log/slog"
	"time"

	awslambda "github.com/aws/aws-lambda-go/lambda"

	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/lambda"
	"github.com/linkgate/linkgate/shortener/dynamodb"
	"github.com/linkgate/linkgate/shortener/httpapi"
)

const lambdaDescription = `Run as an AWS Lambda function (runtime provided.al2023, this binary as
bootstrap): the shortener's API — the same routes, status codes and bodies
as serve — for API Gateway REST API (payload 1.0), HTTP API (payload 2.0)
and function URL events. linkgate does this by itself when
AWS_LAMBDA_RUNTIME_API is set and no command is given; configure it with
the LINKGATE_* environment variables of the flags below.

Store: dynamodb:TABLE only. The embedded store (pebble, or bolt) is refused: every
execution environment has its own short-lived disk, so links would vanish.
Init makes no network call (the table is not checked): a missing table
shows as 503s, and in the function's log.`

// lambdaCacheSize is the read cache's default size in a function: small
// next to the 128 MB the smallest function has.
const lambdaCacheSize = 10_000

func runLambda(ctx context.Context, args []string, env cli.Env) error {
	c := defaultServeConfig()
	c.cacheSize = lambdaCacheSize
	c.api.TrustHost = true // the adapter sets Host from the event's requestContext.domainName
	fs := cli.NewFlagSet("lambda", "linkgate lambda [flags]", lambdaDescription, env.Stderr)
	c.registerShortener(fs, "dynamodb:"+dynamodb.DefaultTable, "json")
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("lambda takes no arguments, got %q", fs.Args())
	}
	if err := c.validateShortener(); err != nil {
		return err
	}
	kind, table, _ := splitStore(c.store) // validated
	if kind != "dynamodb" {
		return cli.Usagef("--store %q: a Lambda function cannot keep links in the embedded store "+
			"(each execution environment has its own short-lived disk); use dynamodb:TABLE (LINKGATE_STORE)", c.store)
	}
	if env.Getenv("AWS_LAMBDA_RUNTIME_API") == "" {
		return cli.Usagef("AWS_LAMBDA_RUNTIME_API is not set: linkgate lambda runs inside AWS Lambda or the runtime interface emulator")
	}
	logger, err := cli.NewLogger(env.Stderr, c.logFormat, c.logLevel)
	if err != nil {
		return err
	}
	raw, err := dynamodb.Open(ctx, c.dynamoOptions(logger, table))
	if err != nil {
		return err
	}
	app, err := newShortener(logger, c, raw, kind)
	if err != nil {
		return err
	}
	fn := lambda.NewHandler(app.handler.ServeFastHTTP, lambda.Options{
		MaxBodyBytes:   httpapi.MaxBodyBytes,
		MaxHeaderBytes: 8 << 10, // as serve's --max-header-bytes default
		ErrorHandler:   httpapi.HandleServerError,
	})
	logger.LogAttrs(ctx, slog.LevelInfo, "linkgate lambda ready", slog.String("store", c.store),
		slog.Int("cache_entries", c.cacheSize.entries(kind)), slog.String("version", version))
	// WithEnableSIGTERM registers the internal extension that makes Lambda
	// send SIGTERM before it stops the environment. run's context ends on
	// it: flush the counted visits, close the store and exit at once, so
	// the shutdown phase (and the extensions' SHUTDOWN event) does not wait
	// for a SIGKILL.
	// StartWithOptions itself never returns; it exits the process if the
	// Runtime API fails.
	go awslambda.StartWithOptions(fn, awslambda.WithContext(ctx), awslambda.WithEnableSIGTERM())
	<-ctx.Done()
	logger.Info("shutting down", "cause", context.Cause(ctx).Error())
	fctx, cancel := context.WithTimeout(context.Background(), lambdaFlushTimeout)
	defer cancel()
	return app.Close(fctx, logger)
}

// lambdaFlushTimeout bounds the visits flush after SIGTERM: Lambda gives the
// runtime a few hundred milliseconds before SIGKILL.
const lambdaFlushTimeout = 250 * time.Millisecond
