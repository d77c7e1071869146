// Command lambdabench is the harness of make lambda-bench: it reproduces the
// seed's CloudWatch dashboard (lambda-performance-dashboard) on this
// machine. It runs linkgate as a function under the AWS Lambda runtime
// interface emulator (RIE) against DynamoDB Local, in three variants — no
// extension, linkgate-extension, and the naive extension (naiveext) — and
// reports, per variant, duration avg/max, cold starts and init avg/max,
// post-runtime extension time avg/max, max memory used (from /proc, since
// the emulator's REPORT line fakes it), client latency and binary sizes, as
// a Markdown table, JSON and an SVG chart.
//
// It runs as root: every emulator gets a private mount namespace (unshare
// -m) in which a folder holding the variant's extension is bind-mounted
// over /opt, the only place the emulator loads extensions from. Invokes are
// sequential: the classic emulator crashes on concurrent ones.
// scripts/lambda-bench.sh builds everything, starts DynamoDB Local in a
// loopback-only network namespace and runs this.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

type config struct {
	rie, function, extension, naive string
	baseline, baselineName          string   // another build's bootstrap, measured with no extension; its label
	env                             []string // for the function and its extensions
	invokes, restarts               int
	cpuQuota                        float64  // CPUs; 0: none
	cpus                            string   // taskset list for the emulator and all it starts; "": any
	extensionEnv                    []string // extra environment for linkgate-extension's variant
	sinkLatency                     time.Duration
	out, svg                        string
}

func main() {
	var c config
	var ddb string
	flag.StringVar(&c.rie, "rie", ".cache/bin/aws-lambda-rie", "aws-lambda-rie binary")
	flag.StringVar(&c.function, "function", "", "the function's bootstrap (linkgate, stripped)")
	flag.StringVar(&c.extension, "extension", "", "linkgate-extension binary (stripped)")
	flag.StringVar(&c.baseline, "baseline", "", "another build's bootstrap (e.g. an earlier commit's), measured with no extension beside this one")
	flag.StringVar(&c.baselineName, "baseline-name", "baseline", "the -baseline build's label in the report (e.g. its commit)")
	flag.StringVar(&c.naive, "naive", "", "naive extension binary (tools/lambdabench/naiveext)")
	flag.StringVar(&ddb, "dynamodb", "", "DynamoDB Local endpoint, http://127.0.0.1:PORT (table goUrlShortener must exist)")
	flag.IntVar(&c.invokes, "n", 200, "warm invokes per variant, spread over the restarts")
	flag.IntVar(&c.restarts, "restarts", 10, "emulator restarts (cold starts) per variant")
	flag.Float64Var(&c.cpuQuota, "cpu-quota", 0, "CPU quota for the emulator and everything it starts, in CPUs (e.g. 0.25); 0: none")
	flag.StringVar(&c.cpus, "cpus", "", "pin the emulator, function and extension to these CPUs (taskset list, e.g. 0); empty: no pinning")
	flag.DurationVar(&c.sinkLatency, "sink-latency", 30*time.Millisecond, "latency of the naive extension's upload sink")
	flag.StringVar(&c.out, "out", "", "folder for results.json and the emulator logs (default: a temporary folder)")
	flag.StringVar(&c.svg, "svg", "", "write the chart to this SVG file")
	var extEnv string
	flag.StringVar(&extEnv, "extension-env", "", "comma-separated NAME=VALUE settings for linkgate-extension's variant (e.g. LINKGATE_EXTENSION_TELEMETRY_TIMEOUT_MS=25)")
	flag.Parse()
	if extEnv != "" {
		c.extensionEnv = strings.Split(extEnv, ",")
	}
	if c.function == "" || c.extension == "" || c.naive == "" || ddb == "" {
		log.Fatal("lambdabench: -function, -extension, -naive and -dynamodb are required (scripts/lambda-bench.sh sets them)")
	}
	if c.restarts < 1 || c.invokes < c.restarts {
		log.Fatal("lambdabench: need -restarts ≥ 1 and -n ≥ -restarts")
	}
	if err := run(context.Background(), c, ddb); err != nil {
		log.Fatal("lambdabench: ", err)
	}
}

// variant is one way of deploying the function.
type variant struct {
	name      string
	function  string // the bootstrap, if not -function's
	extension string // path of the extension binary; "" for none
	file      string // its file name in /opt/extensions
	env       []string
}

func run(ctx context.Context, c config, ddb string) error {
	if c.out == "" {
		d, err := os.MkdirTemp("", "lambdabench-")
		if err != nil {
			return err
		}
		c.out = d
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	sink, err := startSink(c.sinkLatency)
	if err != nil {
		return err
	}
	c.env = []string{
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=bench", "AWS_SECRET_ACCESS_KEY=bench",
		"AWS_ENDPOINT_URL_DYNAMODB=" + ddb,
		"AWS_LAMBDA_FUNCTION_NAME=linkgate", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128",
		"LINKGATE_STORE=dynamodb:goUrlShortener",
		"LINKGATE_CACHE_SIZE=0", // every invoke reaches DynamoDB, as the seed's function did real work
		"LINKGATE_LOG_LEVEL=warn",
		"LINKGATE_EXTENSION_TELEMETRY_ADDR=127.0.0.1:0",
		"PATH=/usr/bin:/bin",
	}
	variants := []variant{
		{name: "no extension"},
		{name: "blank extension (register, loop)", extension: c.naive, file: "blank-extension", env: []string{"LINKGATE_BENCH_SINK_URL=none"}},
		{name: "linkgate-extension", extension: c.extension, file: "linkgate-extension", env: c.extensionEnv},
		{name: "naive extension (sync upload, 30 ms)", extension: c.naive, file: "naive-extension", env: []string{"LINKGATE_BENCH_SINK_URL=" + sink}},
	}
	if c.baseline != "" {
		variants = append(variants, variant{name: "no extension, " + c.baselineName + " build", function: c.baseline})
	}
	// Warm DynamoDB Local (a JVM) up first, then interleave the variants,
	// rotating their order each round, so drift and noise on this shared
	// machine fall on all of them alike. The JVM's first calls can outlast
	// the function's store deadline (1 s) on a busy machine: the warm-up
	// is tried three times.
	for try := 1; ; try++ {
		err := warmUp(ctx, c, variants[0])
		if err == nil {
			break
		}
		if try == 3 {
			return fmt.Errorf("warm-up: %w", err)
		}
		fmt.Fprintf(os.Stderr, "warm-up %d: %v; again\n", try, err)
	}
	results := make([]result, len(variants))
	for i, v := range variants {
		results[i] = result{Variant: v.name, Baseline: v.function != ""}
	}
	for round := 0; round < c.restarts; round++ {
		warm := c.invokes / c.restarts
		if round < c.invokes%c.restarts {
			warm++
		}
		for k := range variants {
			i := (round + k) % len(variants)
			if err := measure(ctx, c, variants[i], round, warm, &results[i]); err != nil {
				return fmt.Errorf("%s: %w", variants[i].name, err)
			}
		}
	}
	for _, r := range results {
		fmt.Fprintf(os.Stderr, "%s: %d invokes, %d cold starts\n", r.Variant, len(r.Invokes), len(r.InitsMs))
	}
	f, err := os.Create(filepath.Join(c.out, "results.json"))
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	enc.SetIndent("", "  ")
	if err := enc.Encode(results); err != nil {
		return err
	}
	f.Close()
	printReport(os.Stdout, c, results)
	if c.svg != "" {
		if err := chart(c.svg, results); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "raw results and emulator logs: %s\n", c.out)
	return nil
}

// startSink serves the naive extension's uploads: each answered after d.
func startSink(d time.Duration) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(d)
		w.WriteHeader(http.StatusOK)
	}))
	return "http://" + ln.Addr().String() + "/events", nil
}

func createFile(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return os.Create(path)
}
