package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/linkgate/linkgate/shortener/dynamodb"
)

// The Lambda measurement: the build as a function under the AWS Lambda
// runtime interface emulator (RIE), several execution environments at
// once, each living a while and then shut down (SIGTERM, as Lambda does
// when it reclaims one) and replaced by a cold one, so every environment
// writes the few visits it counted itself. The classic emulator serves one
// invoke at a time, so one emulator is one execution environment.

// lambdaEnv is one running emulator with the function.
type lambdaEnv struct {
	cmd    *exec.Cmd
	url    string
	exited chan struct{}
}

func startLambda(e *env, b build, table string, n int) (*lambdaEnv, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	api, err := freePort() // each emulator's Runtime API on its own port (the default is 9001 for all)
	if err != nil {
		return nil, err
	}
	args := []string{e.rie, "--runtime-interface-emulator-address", "127.0.0.1:" + strconv.Itoa(port),
		"--runtime-api-address", "127.0.0.1:" + strconv.Itoa(api), b.Path}
	if e.cpus != "" {
		args = append([]string{"taskset", "-c", e.cpus}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL_DYNAMODB="+e.meterURL, "LINKGATE_STORE=dynamodb:"+table,
		"LINKGATE_LOG_LEVEL=warn", "AWS_LAMBDA_FUNCTION_NAME=linkgate", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128", "GOMAXPROCS=1")
	f, err := os.Create(filepath.Join(e.work, fmt.Sprintf("%s-lambda-%d-%d.log", table, n, time.Now().UnixNano())))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	l := &lambdaEnv{cmd: cmd, url: fmt.Sprintf("http://127.0.0.1:%d/2015-03-31/functions/function/invocations", port), exited: make(chan struct{})}
	go func() { cmd.Wait(); f.Close(); close(l.exited) }()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
			c.Close()
			return l, nil
		}
		if time.Now().After(deadline) {
			l.stop()
			return nil, fmt.Errorf("the emulator did not listen on %d", port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop shuts the environment down as Lambda does: SIGTERM, then the
// function flushes and exits.
func (l *lambdaEnv) stop() {
	l.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-l.exited:
	case <-time.After(10 * time.Second):
		l.cmd.Process.Kill()
		<-l.exited
	}
}

// redirectEvent is an HTTP API (payload 2.0) event for GET /{id} from a
// visitor of request i.
func redirectEvent(id string, i int) []byte {
	ua, ref := headersFor(i)
	headers := map[string]string{"host": "sho.rt", "x-forwarded-proto": "https", "user-agent": ua}
	if ref != "" {
		headers["referer"] = ref
	}
	ev := map[string]any{"version": "2.0", "rawPath": "/" + id, "headers": headers,
		"requestContext": map[string]any{"http": map[string]string{"method": "GET", "sourceIp": "192.0.2.1"}}}
	b, _ := json.Marshal(ev)
	return b
}

// runLambdaFleet measures a build as n concurrent function environments,
// each replaced by a cold one after life, for the traffic seq at rate.
func runLambdaFleet(ctx context.Context, e *env, b build, s shape, n int, life time.Duration, rate float64, seq []int) (runResult, error) {
	res := runResult{Build: b.Name, Shape: s.String(), Instances: n, Rate: rate,
		Lambda: fmt.Sprintf("%d function environments, each shut down after %v", n, life)}
	table := fmt.Sprintf("bench-%s-lambda-%s%d-%d-%d", b.Name, s.Name, s.Links, n, time.Now().Unix())
	if err := dynamodb.CreateTable(ctx, e.client, table, true, time.Minute, io.Discard); err != nil {
		return res, err
	}
	ids := distinct(seq)
	res.Links = len(ids)
	if err := preload(ctx, e.client, table, ids); err != nil {
		return res, fmt.Errorf("preload: %w", err)
	}
	e.meter.reset()
	var redirects, other, errs, starts atomic.Int64
	queues := make([]chan int, n)
	var wg sync.WaitGroup
	var firstErr error
	var errMu sync.Mutex
	client := &http.Client{Timeout: 30 * time.Second}
	for q := range queues {
		queues[q] = make(chan int, 1024)
		wg.Go(func() {
			var l *lambdaEnv
			var born time.Time
			defer func() {
				if l != nil {
					l.stop()
				}
			}()
			for i := range queues[q] {
				if l != nil && time.Since(born) >= life {
					l.stop()
					l = nil
				}
				if l == nil {
					var err error
					if l, err = startLambda(e, b, table, q); err != nil {
						errMu.Lock()
						firstErr = err
						errMu.Unlock()
						return
					}
					born = time.Now()
					starts.Add(1)
				}
				select {
				case <-l.exited:
					errMu.Lock()
					firstErr = fmt.Errorf("a function environment exited by itself (logs in %s)", e.work)
					errMu.Unlock()
					return
				default:
				}
				resp, err := client.Post(l.url, "application/json", strings.NewReader(string(redirectEvent(linkID(seq[i]), i))))
				if err != nil {
					errs.Add(1)
					continue
				}
				var proxy struct {
					StatusCode int `json:"statusCode"`
				}
				json.NewDecoder(resp.Body).Decode(&proxy)
				resp.Body.Close()
				if proxy.StatusCode >= 300 && proxy.StatusCode < 400 {
					redirects.Add(1)
				} else {
					other.Add(1)
				}
			}
		})
	}
	res.Load.Sent, res.Load.MaxLag, res.Load.Behind = pace(ctx, len(seq), rate, func(i int) { queues[i%n] <- i })
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	if firstErr != nil {
		return res, firstErr
	}
	if res.Load.Behind {
		return res, fmt.Errorf("the functions fell %v behind the rate after %d requests: lower -rate (RATE)", maxLag, res.Load.Sent)
	}
	res.Load.Redirects, res.Load.Other, res.Load.Errors = redirects.Load(), other.Load(), errs.Load()
	res.Visits = map[string]int64{"cold_starts": starts.Load()}
	before := e.meter.snapshot()
	if err := foldVisits(ctx, e, b, table); err != nil {
		return res, err
	}
	after := e.meter.snapshot()
	res.Units, res.Fold = rows(after), rows(minus(after, before))
	var err error
	res.Checked, res.Wrong, err = check(ctx, e, table, seq, res.Load)
	return res, err
}
