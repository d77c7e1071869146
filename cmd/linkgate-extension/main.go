// Command linkgate-extension is linkgate's AWS Lambda extension: a native
// companion process that records, per invoke, duration, billed duration,
// init duration, max memory used and its own post-runtime cost, and writes
// them as CloudWatch Embedded Metric Format lines to stdout. It makes no
// network call on the invoke path and never waits for telemetry before
// asking for the next event.
//
// Deploy it as a layer holding extensions/linkgate-extension (make lambda).
// It imports only the standard library and internal/cli.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/lambda/extension"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

// memoryLimit is the Go heap's soft limit: the extension shares the
// function's memory (128 MB at the smallest size) and needs little.
const memoryLimit = 8 << 20

func main() {
	// One P: the extension must not compete with the function for CPU, and
	// Go does not see Lambda's CPU share. Both settings yield to GOMAXPROCS
	// and GOMEMLIMIT when those are set.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
	err := run(context.Background(), os.Args, os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	os.Exit(cli.Exit(err, filepath.Base(os.Args[0]), os.Stderr))
}

// run is the whole program. args[0] is the executable's path: its file name
// is the extension name Lambda requires at registration.
// A signal (running it by hand) flushes and exits cleanly; in Lambda the
// SHUTDOWN event does.
func run(ctx context.Context, args []string, getenv func(string) string, _ io.Reader, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	name := "linkgate-extension"
	if len(args) > 0 {
		name = filepath.Base(args[0])
		args = args[1:]
	}
	fs := cli.NewFlagSet(name, name+" [flags]",
		"The linkgate Lambda extension. Lambda starts it from /opt/extensions; it\n"+
			"needs AWS_LAMBDA_RUNTIME_API. Metrics go to stdout as CloudWatch EMF lines.", stderr)
	telemetryAddr := fs.String("extension-telemetry-addr", "sandbox.localdomain:0",
		"`address` the Telemetry API listener binds (127.0.0.1:0 outside Lambda; empty disables telemetry)")
	timeoutMs := fs.Int("extension-telemetry-timeout-ms", 100, "telemetry buffering timeout in `ms` (25–30000)")
	flushEvery := fs.Duration("extension-flush-interval", time.Minute, "write metrics at least this often")
	namespace := fs.String("extension-namespace", "linkgate/Lambda", "CloudWatch `namespace` of the metrics")
	logLevel := fs.String("extension-log-level", "info", "log `level`: debug, info, warn, error")
	perr := cli.Parse(fs, args, getenv)
	if errors.Is(perr, flag.ErrHelp) {
		return nil
	}
	if perr == nil && fs.NArg() > 0 {
		perr = cli.Usagef("unexpected arguments %q", fs.Args())
	}
	api := getenv("AWS_LAMBDA_RUNTIME_API")
	if api == "" {
		if perr != nil {
			return perr
		}
		return cli.Usagef("AWS_LAMBDA_RUNTIME_API is not set: %s runs as a Lambda extension", name)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		perr = errors.Join(perr, fmt.Errorf("log level: %w", err))
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("extension", name, "version", version)
	err := extension.Run(ctx, extension.Config{
		Name:               name,
		RuntimeAPI:         api,
		TelemetryAddr:      *telemetryAddr,
		TelemetryTimeoutMs: *timeoutMs,
		FlushInterval:      *flushEvery,
		Namespace:          *namespace,
		Out:                stdout,
		Logger:             logger,
		Invalid:            perr,
	})
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
