// Command ddbunits measures what linkgate's visit statistics cost on
// DynamoDB: the capacity units DynamoDB reports (ReturnConsumedCapacity:
// TOTAL, asked for every request by a metering proxy, meter.go) summed per
// 1,000 redirects. It is the harness of make bench-dynamodb
// (scripts/bench-dynamodb.sh starts DynamoDB Local and calls it).
//
// For each build, traffic shape and number of instances: a fresh table,
// the links the traffic visits preloaded, that many `linkgate serve`
// processes with default settings behind a round-robin load balancer, a
// fixed rate of GET /{id} for a fixed time with browsers, bots and
// referrers mixed as real visitors are, then SIGTERM (the servers flush
// what they counted); every DynamoDB call from the first request to the
// last exit is counted. The traffic is the same for every build (fixed
// seed).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/linkgate/linkgate/shortener/dynamodb"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var (
		endpoint  = flag.String("dynamodb", "", "DynamoDB Local endpoint, http://127.0.0.1:PORT")
		builds    listFlag
		shapes    listFlag
		instances = flag.String("instances", "1,4", "comma-separated numbers of instances")
		rate      = flag.Float64("rate", 1000, "redirects per second, all instances together")
		duration  = flag.Duration("duration", 2*time.Minute, "how long the traffic runs per measurement")
		cpus      = flag.String("cpus", "", "taskset CPU list for the servers (empty: no pinning)")
		conns     = flag.Int("conns", 128, "connections per instance")
		work      = flag.String("work", os.TempDir(), "folder for the servers' logs")
		out       = flag.String("json", "", "write the results as JSON to this file")
		recs      = flag.String("records", "", "write the table's figures to this file as tools/benchcmp records")
		from      = flag.String("convert", "", "only write -records from a `file` written by -json")
		seed      = flag.Uint64("seed", 1, "seed of the traffic")
		aged      = flag.Int("aged", 1000, "links of the old layout at its bounds read cold twice per build (0: none)")
		rie       = flag.String("rie", "", "aws-lambda-rie binary: also measure each build as Lambda functions (empty: no)")
		lambdaN   = flag.Int("lambda", 4, "concurrent function environments in the Lambda runs")
		life      = flag.Duration("lambda-life", 40*time.Second, "how long a function environment lives before Lambda shuts it down")
	)
	flag.Var(&builds, "build", "NAME=PATH of a linkgate binary to measure (repeat)")
	flag.Var(&shapes, "shape", "traffic: uniform:LINKS or zipf:S:LINKS (repeat; default uniform:100000 and zipf:1.1:1000000)")
	flag.Parse()
	if *from != "" {
		if *recs == "" {
			log.Fatal("ddbunits: -convert needs -records")
		}
		if err := convert(*from, *recs); err != nil {
			log.Fatal("ddbunits: ", err)
		}
		return
	}
	if *endpoint == "" || len(builds) == 0 {
		log.Fatal("ddbunits: -dynamodb and at least one -build NAME=PATH are required")
	}
	if len(shapes) == 0 {
		shapes = listFlag{"uniform:100000", "zipf:1.1:1000000"}
	}
	c := config{rate: *rate, duration: *duration, seed: *seed, aged: *aged, rie: *rie, lambda: *lambdaN, life: *life}
	for _, b := range builds {
		name, path, ok := strings.Cut(b, "=")
		if !ok || name == "" || path == "" {
			log.Fatalf("ddbunits: -build %q: want NAME=PATH", b)
		}
		c.builds = append(c.builds, build{name, path})
	}
	for _, v := range shapes {
		s, err := parseShape(v)
		if err != nil {
			log.Fatal("ddbunits: ", err)
		}
		c.shapes = append(c.shapes, s)
	}
	for _, v := range strings.Split(*instances, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			log.Fatalf("ddbunits: -instances %q: want positive numbers", *instances)
		}
		c.instances = append(c.instances, n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	results, agedResults, err := run(ctx, c, *endpoint, *cpus, *work, *conns)
	if *out != "" && len(results) > 0 {
		b, _ := json.MarshalIndent(map[string]any{"runs": results, "aged": agedResults}, "", "  ")
		if werr := os.WriteFile(*out, b, 0o644); werr != nil {
			log.Print("ddbunits: ", werr)
		}
	}
	if *recs != "" && len(results) > 0 {
		if werr := writeRecords(*recs, records(results, agedResults)); werr != nil {
			log.Print("ddbunits: ", werr)
		}
	}
	if len(results) > 0 {
		fmt.Printf("\nRedirects at %g/s for %v per measurement; units as DynamoDB Local reported them (ReturnConsumedCapacity: TOTAL), plus what it does not report and DynamoDB bills (refused conditional writes, keys a BatchGetItem did not find), computed by DynamoDB's rules: \"of which computed\".\n\n", c.rate, c.duration)
		printTable(os.Stdout, results)
		fmt.Println()
	}
	if len(agedResults) > 0 {
		fmt.Printf("Cold reads (no cache) of %d links of the old layout at its bounds, twice; units as DynamoDB Local reported them, plus those computed.\n\n", c.aged)
		printAged(os.Stdout, agedResults)
		fmt.Println()
	}
	printUnits(os.Stdout, results)
	if err != nil {
		log.Fatal("ddbunits: ", err)
	}
}

type config struct {
	builds    []build
	shapes    []shape
	instances []int
	rate      float64
	duration  time.Duration
	seed      uint64
	aged      int
	rie       string
	lambda    int
	life      time.Duration
}

func run(ctx context.Context, c config, endpoint, cpus, work string, conns int) ([]runResult, []agedResult, error) {
	target, err := url.Parse(endpoint)
	if err != nil {
		return nil, nil, err
	}
	m := newMeter(target)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	go http.Serve(ln, m)
	client := dynamodb.NewClient(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", ""),
	}, func(o *ddb.Options) { o.BaseEndpoint = aws.String(endpoint) })
	e := &env{client: client, meterURL: "http://" + ln.Addr().String(), meter: m, cpus: cpus, work: work, conns: conns, rie: c.rie}
	// DynamoDB Local is a JVM: its first thousands of calls are slow
	// enough to time out. Warm it (and the first build) up, unmeasured.
	fmt.Fprintln(os.Stderr, "==> warm-up")
	warm := shape{Name: "uniform", Links: 5000}
	if _, err := runOne(ctx, e, c.builds[0], warm, 1, c.rate, warm.sequence(int(c.rate*10), c.seed)); err != nil {
		return nil, nil, fmt.Errorf("warm-up: %w", err)
	}
	var results []runResult
	for _, s := range c.shapes {
		seq := s.sequence(int(c.rate*c.duration.Seconds()), c.seed)
		for _, n := range c.instances {
			for _, b := range c.builds {
				fmt.Fprintf(os.Stderr, "==> %s, %s, %d instance(s)\n", b.Name, s, n)
				r, err := runOne(ctx, e, b, s, n, c.rate, seq)
				if err != nil {
					return results, nil, fmt.Errorf("%s, %s, %d instances: %w", b.Name, s, n, err)
				}
				results = append(results, r)
				progress(r)
			}
		}
		if c.rie == "" {
			continue
		}
		for _, b := range c.builds {
			fmt.Fprintf(os.Stderr, "==> %s, %s, Lambda: %d function environments living %v\n", b.Name, s, c.lambda, c.life)
			r, err := runLambdaFleet(ctx, e, b, s, c.lambda, c.life, c.rate, seq)
			if err != nil {
				return results, nil, fmt.Errorf("%s, %s, Lambda: %w", b.Name, s, err)
			}
			results = append(results, r)
			progress(r)
		}
	}
	var aged []agedResult
	for _, b := range c.builds {
		if c.aged <= 0 {
			break
		}
		fmt.Fprintf(os.Stderr, "==> %s, cold reads of %d items of the old layout\n", b.Name, c.aged)
		r, err := runAged(ctx, e, b, c.aged, c.rate)
		if err != nil {
			return results, aged, fmt.Errorf("%s, old items: %w", b.Name, err)
		}
		aged = append(aged, r)
	}
	return results, aged, nil
}

func progress(r runResult) {
	sm := summarize(r)
	fmt.Fprintf(os.Stderr, "    %d redirects, %.0f write units (%.1f per 1,000), %.0f read units\n",
		sm.Redirects, sm.WriteUnits, per1000(sm.WriteUnits, sm.Redirects), sm.ReadUnits)
}
