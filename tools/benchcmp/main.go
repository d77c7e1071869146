// Command benchcmp is the statistics of the make bench-* targets: it runs
// load generators against targets the scripts started, in interleaved
// rounds, reads the CPU time the process under test spent per request from
// /proc/PID/stat, and prints the tables — medians, ranges, ratios — from a
// template, so the scripts only start and stop servers.
//
//	benchcmp run -o FILE [-rounds 3] [-cpu LOAD_CPU] [-gen wrk] [-t 1] [-c 50] [-d 10s] \
//	    -target 'NAME URL [key=value…]' …
//	benchcmp report FILE… <<'EOF'
//	{{report "nginx return 302 (b)" "b"}}
//	  ratio (a)/(b), medians: {{printf "%.3f" (div (med "a" "rps") (med "b" "rps"))}}
//	EOF
//
// run measures every target once per round, in the order given (or
// reversed every other round with -order alternate), and appends one JSON
// line per run to FILE, so several run invocations (a server restarted in
// between, another workload) feed one report. Per-target keys: gen=wrk,
// linkgate, vegeta or h2load (m= its streams per connection; its
// percentiles from its --log-file), pid=PID (CPU time per request of that process and its
// children, figure "cpu" in µs), lua=FILE, t=, c=, d=, R= and warmup=
// (linkgate's -R and --warmup), prewarm=D (an unmeasured run before the
// first round), rewarm=D (one before every round), arg=X (an extra
// generator argument, repeatable; percent-escaped, so arg=-H
// arg=Connection:%20close passes a header with its space). -before NAME=COMMAND runs a bash command
// before each of NAME's runs (e.g. an admin API call that switches a
// gateway's route). Figures of a run: rps, requests, avg, p50 … p99
// (ms), errors, non2xx, cpu, gencpu (the generator's own µs per request),
// seconds; linkgate adds up50/up99 (uncorrected) and lag99 (send lag).
//
// publish is report that also keeps the run as data in docs/results, and
// tables regenerates the tables the docs link to (publish.go).
//
// cert DIR writes a throwaway CA and a server certificate for 127.0.0.1,
// made with crypto/x509, for TLS targets (nginx ssl, the gateway's TLS).
//
// report executes a text/template read from stdin (or -t TEXT) over the
// records; its functions are listed at results.funcs (report.go): vals,
// med, per, median, mr, rng, each, scale, div, mul, report, reportms.
//
// To add a scenario to a make bench-* target: start its server in the
// script, add a -target line (with pid= for CPU per request) to the run
// call, and a line to the report template. To add an anchor generator
// (h2load, vegeta…): write its command line and the parser of its output
// in gen.go, add it to generators, and test the parser on a saved output
// of the real tool (testdata/).
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

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "benchcmp:", err)
		}
		os.Exit(1)
	}
}

const usage = `usage: benchcmp run -o FILE [flags] -target 'NAME URL [key=value…]'…
       benchcmp report [-t TEMPLATE] FILE… (template on stdin without -t)
       benchcmp publish -target NAME -run WORK/run.json [-dir docs/results] [-command CMD] [-load-start L] [-t TEMPLATE] FILE…
       benchcmp tables [-dir docs/results]
       benchcmp cert DIR (a throwaway CA and a certificate for 127.0.0.1: ca.pem, server.pem, server-key.pem)`

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "run":
		o, err := parseRun(args[1:], stderr)
		if err != nil {
			return err
		}
		return runRounds(ctx, o, stdout, stderr)
	case "cert":
		if len(args) != 2 {
			return errors.New("usage: benchcmp cert DIR")
		}
		return writeCerts(args[1])
	case "publish":
		o, err := parsePublish(args[1:], stderr)
		if err != nil {
			return err
		}
		return publish(o, stdin, stdout)
	case "tables":
		fs := flag.NewFlagSet("benchcmp tables", flag.ContinueOnError)
		fs.SetOutput(stderr)
		dir := fs.String("dir", "docs/results", "the results `folder`")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return writeTables(*dir)
	case "report":
		fs := flag.NewFlagSet("benchcmp report", flag.ContinueOnError)
		fs.SetOutput(stderr)
		text := fs.String("t", "", "the table `template` (default: read from stdin)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			return errors.New("report: name at least one results file")
		}
		recs, err := readRecords(fs.Args())
		if err != nil {
			return err
		}
		if *text == "" {
			b, err := io.ReadAll(stdin)
			if err != nil {
				return err
			}
			*text = string(b)
		}
		return report(stdout, *text, recs)
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}
