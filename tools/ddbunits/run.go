package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/linkgate/linkgate/shortener/dynamodb"
)

// build is one linkgate binary under test.
type build struct {
	Name, Path string
}

// runResult is what one run measured.
type runResult struct {
	Build     string           `json:"build"`
	Lambda    string           `json:"lambda,omitempty"` // how the function environments lived, for a Lambda run
	Shape     string           `json:"shape"`
	Instances int              `json:"instances"`
	Rate      float64          `json:"rate"`
	Links     int              `json:"links_preloaded"`
	Load      loadResult       `json:"load"`
	Visits    map[string]int64 `json:"visits"` // the instances' linkgate_visits_* counters, summed
	Units     []opUnits        `json:"units"`  // during the load, the shutdown flush and the fold
	// Fold is the part of Units that the fold after the servers stopped
	// cost (linkgate dynamodb fold-visits: builds that have a visit log).
	Fold []opUnits `json:"fold"`
	// Checked links had their stored total compared with the visits the
	// traffic sent them (after the servers stopped); Wrong did not match.
	Checked, Wrong int
}

// opUnits is one row of the meter's counts.
type opUnits struct {
	opKey
	opCount
}

// env is what a run needs around it.
type env struct {
	client   *ddb.Client // DynamoDB Local, directly (preloads, tables)
	meterURL string      // the meter in front of it, for the builds under test
	meter    *meter
	cpus     string // taskset list for the servers; "" for none
	rie      string // aws-lambda-rie, for Lambda runs
	work     string // folder for logs
	conns    int
}

// runOne measures one build on one shape with n instances: a fresh table,
// the links of the traffic preloaded, n servers started with default
// settings, the traffic sent, the servers stopped with SIGTERM (they flush
// their visits), and the capacity units of everything between counted.
func runOne(ctx context.Context, e *env, b build, s shape, n int, rate float64, seq []int) (runResult, error) {
	res := runResult{Build: b.Name, Shape: s.String(), Instances: n, Rate: rate}
	table := fmt.Sprintf("bench-%s-%s%d-%d-%d", b.Name, s.Name, s.Links, n, time.Now().Unix())
	if err := dynamodb.CreateTable(ctx, e.client, table, true, time.Minute, io.Discard); err != nil {
		return res, err
	}
	ids := distinct(seq)
	res.Links = len(ids)
	if err := preload(ctx, e.client, table, ids); err != nil {
		return res, fmt.Errorf("preload: %w", err)
	}
	servers, err := startServers(ctx, e, b, table, n)
	defer func() {
		for _, s := range servers {
			s.kill()
		}
	}()
	if err != nil {
		return res, err
	}
	e.meter.reset()
	targets := make([]string, len(servers))
	for i, s := range servers {
		targets[i] = s.url
	}
	res.Load = runLoad(ctx, targets, seq, rate, e.conns)
	if res.Load.Behind {
		return res, fmt.Errorf("the servers fell %v behind the rate after %d requests: lower -rate (RATE)", maxLag, res.Load.Sent)
	}
	res.Visits = map[string]int64{}
	for _, s := range servers {
		m, err := scrape(s.url + "/metrics")
		if err != nil {
			return res, err
		}
		for k, v := range m {
			if strings.HasPrefix(k, "linkgate_visits_") {
				res.Visits[strings.TrimPrefix(k, "linkgate_visits_")] += int64(v)
			}
		}
	}
	for _, s := range servers {
		if err := s.stop(30 * time.Second); err != nil {
			return res, err
		}
	}
	// What the run wrote to the visit log is folded too: a fold that
	// would have come later is part of what these visits cost.
	before := e.meter.snapshot()
	if err := foldVisits(ctx, e, b, table); err != nil {
		return res, err
	}
	after := e.meter.snapshot()
	res.Units, res.Fold = rows(after), rows(minus(after, before))
	res.Checked, res.Wrong, err = check(ctx, e, table, seq, res.Load)
	return res, err
}

// checkLinks is how many links check compares.
const checkLinks = 100

// check reads the statistics of checkLinks of the traffic's links (with
// this tree's reader, which reads both layouts) and compares their totals
// with the visits the traffic sent them: no visit lost in a flush, at
// shutdown or in a fold, none counted twice. With failed requests the
// counts cannot be known, and nothing is compared.
func check(ctx context.Context, e *env, table string, seq []int, l loadResult) (checked, wrong int, err error) {
	if l.Other != 0 || l.Errors != 0 || l.Sent != int64(len(seq)) {
		return 0, 0, nil
	}
	s := dynamodb.New(e.client, dynamodb.Options{Table: table, ManualVisits: true, Timeout: 10 * time.Second})
	defer s.Close()
	sent := map[int]int64{}
	for _, k := range seq {
		sent[k]++
	}
	for _, k := range distinct(seq)[:min(checkLinks, len(sent))] {
		st, err := s.VisitStats(ctx, linkID(k))
		if err != nil {
			return checked, wrong, fmt.Errorf("check %s: %w", linkID(k), err)
		}
		checked++
		if st.Total != sent[k] {
			wrong++
			fmt.Fprintf(os.Stderr, "    link %s: %d visits stored, %d sent\n", linkID(k), st.Total, sent[k])
		}
	}
	return checked, wrong, nil
}

// foldVisits runs linkgate dynamodb fold-visits through the meter, for a
// build that has it.
func foldVisits(ctx context.Context, e *env, b build, table string) error {
	cmd := exec.CommandContext(ctx, b.Path, "dynamodb", "fold-visits", "--table", table)
	cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL_DYNAMODB="+e.meterURL)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && strings.Contains(string(out), "unknown subcommand") {
		return nil // a build without a visit log
	}
	if err != nil {
		return fmt.Errorf("fold-visits: %w: %s", err, out)
	}
	return nil
}

// minus returns the counts of a that b does not have.
func minus(a, b map[opKey]opCount) map[opKey]opCount {
	out := map[opKey]opCount{}
	for k, c := range a {
		d := b[k]
		c.Calls -= d.Calls
		c.Units -= d.Units
		c.Items -= d.Items
		c.Failed -= d.Failed
		c.Computed -= d.Computed
		c.Errors -= d.Errors
		if c != (opCount{}) {
			out[k] = c
		}
	}
	return out
}

// preload writes the link items of ids as linkgate creates them
// (shortURL, originalURL, createdAt), directly to DynamoDB, 25 per
// BatchWriteItem, 16 batches in flight.
func preload(ctx context.Context, c *ddb.Client, table string, ids []int) error {
	return preloadItems(ctx, c, table, ids, nil)
}

// preloadItems is preload with more attributes on every item.
func preloadItems(ctx context.Context, c *ddb.Client, table string, ids []int, extra map[string]types.AttributeValue) error {
	now := strconv.FormatInt(time.Now().Unix(), 10)
	batches := make(chan []types.WriteRequest)
	errc := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for reqs := range batches {
				for len(reqs) > 0 {
					out, err := c.BatchWriteItem(ctx, &ddb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
					if err != nil {
						errc <- err
						return
					}
					reqs = out.UnprocessedItems[table]
				}
			}
		})
	}
	go func() {
		defer close(batches)
		var reqs []types.WriteRequest
		for i, k := range ids {
			id := linkID(k)
			item := map[string]types.AttributeValue{
				dynamodb.AttrID:        &types.AttributeValueMemberS{Value: id},
				dynamodb.AttrURL:       &types.AttributeValueMemberS{Value: "https://bench.example/" + id},
				dynamodb.AttrCreatedAt: &types.AttributeValueMemberN{Value: now},
			}
			maps.Copy(item, extra)
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
			if len(reqs) == 25 || i == len(ids)-1 {
				select {
				case batches <- reqs:
				case <-ctx.Done():
					return
				}
				reqs = nil
			}
		}
	}()
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return ctx.Err()
	}
}

// server is one running linkgate serve.
type server struct {
	url  string
	cmd  *exec.Cmd
	done chan error
}

// startServers starts n linkgate serve processes of build b over table,
// with default settings, their DynamoDB calls through the meter, and waits
// until each answers /readyz.
func startServers(ctx context.Context, e *env, b build, table string, n int, extra ...string) ([]*server, error) {
	var out []*server
	for i := range n {
		port, err := freePort()
		if err != nil {
			return out, err
		}
		args := append([]string{b.Path, "serve", "--addr", "127.0.0.1:" + strconv.Itoa(port), "--store", "dynamodb:" + table, "--log-level", "warn"}, extra...)
		if e.cpus != "" {
			args = append([]string{"taskset", "-c", e.cpus}, args...)
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1", "AWS_ENDPOINT_URL_DYNAMODB="+e.meterURL)
		logName := filepath.Join(e.work, fmt.Sprintf("%s-%d.log", table, i))
		f, err := os.Create(logName)
		if err != nil {
			return out, err
		}
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			f.Close()
			return out, err
		}
		s := &server{url: "http://127.0.0.1:" + strconv.Itoa(port), cmd: cmd, done: make(chan error, 1)}
		go func() { s.done <- cmd.Wait(); f.Close() }()
		out = append(out, s)
		if err := waitReady(ctx, s, 60*time.Second); err != nil {
			return out, fmt.Errorf("%s instance %d: %w (log: %s)", b.Name, i, err, logName)
		}
	}
	return out, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func waitReady(ctx context.Context, s *server, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		select {
		case err := <-s.done:
			s.done <- err
			return fmt.Errorf("exited: %v", err)
		default:
		}
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return errors.New("not ready in time")
}

// stop sends SIGTERM and waits for the process to exit (it flushes its
// visits first).
func (s *server) stop(d time.Duration) error {
	if s.cmd.Process == nil {
		return nil
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.cmd.Process = nil
		if err != nil {
			return fmt.Errorf("%s: exit after SIGTERM: %w", s.url, err)
		}
		return nil
	case <-time.After(d):
		return fmt.Errorf("%s did not exit within %v of SIGTERM", s.url, d)
	}
}

func (s *server) kill() {
	if s.cmd.Process != nil {
		s.cmd.Process.Kill()
	}
}

// scrape reads the untyped samples of a Prometheus text page (name{labels}
// value); labelled samples keep their labels in the name.
func scrape(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// rows returns the meter's counts sorted by operation and class.
func rows(counts map[opKey]opCount) []opUnits {
	out := make([]opUnits, 0, len(counts))
	for k, c := range counts {
		out = append(out, opUnits{k, c})
	}
	sortRows(out)
	return out
}

// agedResult is what cold reads of items of the old layout at its bounds
// cost: the first pass reads them as the old layout left them, the second
// after a build that migrates them has done so.
type agedResult struct {
	Build     string    `json:"build"`
	Links     int       `json:"links"`
	ItemBytes int       `json:"item_bytes"` // the old item's size by DynamoDB's rules
	First     []opUnits `json:"first_pass"`
	Migration []opUnits `json:"migration"` // between the passes
	Second    []opUnits `json:"second_pass"`
}

// oldItemAttrs are the statistics attributes of an item of the old layout
// at its bounds: 400 days, 100 referrer hosts, 20 browsers, 10 bots and 50
// countries, as a link visited daily for over a year has.
func oldItemAttrs(now time.Time) map[string]types.AttributeValue {
	n := func(v int) types.AttributeValue { return &types.AttributeValueMemberN{Value: strconv.Itoa(v)} }
	a := map[string]types.AttributeValue{"visits": n(40_000), "bots": n(2_000)}
	for i := range 400 {
		a["vd:"+now.AddDate(0, 0, -i).Format("2006-01-02")] = n(100)
	}
	for i := range 100 {
		a[fmt.Sprintf("vr:referrer%02d.example.com", i)] = n(400)
	}
	for i := range 20 {
		a[fmt.Sprintf("vb:Browser %d", i)] = n(1900)
	}
	for i := range 10 {
		a[fmt.Sprintf("vx:Bot %d", i)] = n(200)
	}
	for i := range 50 {
		a[fmt.Sprintf("vc:%c%c", 'A'+i/26, 'A'+i%26)] = n(800)
	}
	return a
}

// runAged measures cold reads (no cache) of n items of the old layout at
// its bounds, twice, with the build's migration (if it has one) between.
func runAged(ctx context.Context, e *env, b build, n int, rate float64) (agedResult, error) {
	res := agedResult{Build: b.Name, Links: n}
	table := fmt.Sprintf("bench-%s-aged-%d", b.Name, time.Now().Unix())
	if err := dynamodb.CreateTable(ctx, e.client, table, true, time.Minute, io.Discard); err != nil {
		return res, err
	}
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	attrs := oldItemAttrs(time.Now())
	sample := map[string]types.AttributeValue{
		dynamodb.AttrID: &types.AttributeValueMemberS{Value: linkID(0)}, dynamodb.AttrURL: &types.AttributeValueMemberS{Value: "https://bench.example/" + linkID(0)},
		dynamodb.AttrCreatedAt: &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Unix(), 10)},
	}
	maps.Copy(sample, attrs)
	res.ItemBytes = itemBytes(sample)
	if err := preloadItems(ctx, e.client, table, ids, attrs); err != nil {
		return res, fmt.Errorf("preload: %w", err)
	}
	servers, err := startServers(ctx, e, b, table, 1, "--cache-size", "0")
	defer func() {
		for _, s := range servers {
			s.kill()
		}
	}()
	if err != nil {
		return res, err
	}
	pass := func() ([]opUnits, error) {
		e.meter.reset()
		l := runLoad(ctx, []string{servers[0].url}, ids, rate, e.conns)
		if l.Behind || l.Redirects < int64(n)/2 {
			return nil, fmt.Errorf("cold pass: %+v", l)
		}
		return rows(e.meter.snapshot()), nil
	}
	if res.First, err = pass(); err != nil {
		return res, err
	}
	time.Sleep(2 * time.Second) // the old layout writes each visit a second later: part of the first pass
	// The migration runs in the background: wait until its counter (if
	// the build has one) stops moving.
	e.meter.reset()
	last, still := -1.0, 0
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline) && still < 5; {
		m, err := scrape(servers[0].url + "/metrics")
		if err != nil {
			return res, err
		}
		v, ok := m["linkgate_dynamodb_visit_migrated_total"]
		if !ok {
			break
		}
		if v == last {
			still++
		} else {
			still, last = 0, v
		}
		time.Sleep(time.Second)
	}
	res.Migration = rows(e.meter.snapshot())
	if res.Second, err = pass(); err != nil {
		return res, err
	}
	return res, servers[0].stop(30 * time.Second)
}
