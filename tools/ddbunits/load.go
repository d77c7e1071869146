package main

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// loadResult counts the answers of one load run.
type loadResult struct {
	Sent      int64         // requests sent
	Redirects int64         // answered with a redirect: a followed link, one visit
	Other     int64         // any other status
	Errors    int64         // no answer (connection errors, timeouts)
	MaxLag    time.Duration // the latest a request was sent after its time
	// Behind is set when the servers fell so far behind (MaxLag beyond
	// maxLag) that the run was stopped: the rate is more than this
	// machine's DynamoDB Local and servers can take.
	Behind bool
}

// maxLag is how late a request may be sent before runLoad gives up.
const maxLag = 30 * time.Second

// Browsers, bots and referrers of the simulated visitors, with weights
// out of 100, so the statistics have the breakdowns real ones have.
var (
	agents = []weighted{
		{45, "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"},
		{25, "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1"},
		{15, "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0"},
		{5, "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0"},
		{5, "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"},
		{5, "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"},
	}
	referrers = []weighted{
		{40, ""},
		{20, "https://www.google.com/"},
		{15, "https://t.co/a1b2c3"},
		{10, "https://news.ycombinator.com/item?id=1"},
		{10, "https://www.reddit.com/r/golang/"},
		{5, "blog"}, // one of 50 hosts, https://blogN.example.com/post
	}
)

type weighted struct {
	w int
	v string
}

// pick returns the value of the weights at x (0 ≤ x < 100).
func pick(ws []weighted, x int) string {
	for _, w := range ws {
		if x < w.w {
			return w.v
		}
		x -= w.w
	}
	return ws[len(ws)-1].v
}

// headersFor returns the User-Agent and Referer of request i.
func headersFor(i int) (ua, ref string) {
	h := uint64(i)*0x9e3779b97f4a7c15 + 1
	h ^= h >> 29
	ua = pick(agents, int(h%100))
	ref = pick(referrers, int(h/100%100))
	if ref == "blog" {
		ref = "https://blog" + strconv.Itoa(int(h/10000%50)) + ".example.com/post"
	}
	return ua, ref
}

// runLoad sends GET /{id} for every link number of seq, rate requests a
// second in all, request i to targets[i mod len(targets)] (round robin,
// as a load balancer spreads them), open loop: each at its time, whatever
// earlier ones are doing, with up to conns in flight per target.
func runLoad(ctx context.Context, targets []string, seq []int, rate float64, conns int) loadResult {
	var res loadResult
	var redirects, other, errs atomic.Int64
	client := &http.Client{
		Timeout:       10 * time.Second,
		Transport:     &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer client.CloseIdleConnections()
	type job struct{ i int }
	queues := make([]chan job, len(targets))
	var wg sync.WaitGroup
	for t := range targets {
		queues[t] = make(chan job, conns)
		for range conns {
			wg.Go(func() {
				for j := range queues[t] {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, targets[t]+"/"+linkID(seq[j.i]), nil)
					ua, ref := headersFor(j.i)
					req.Header.Set("User-Agent", ua)
					if ref != "" {
						req.Header.Set("Referer", ref)
					}
					resp, err := client.Do(req)
					if err != nil {
						errs.Add(1)
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode >= 300 && resp.StatusCode < 400 {
						redirects.Add(1)
					} else {
						other.Add(1)
					}
				}
			})
		}
	}
	res.Sent, res.MaxLag, res.Behind = pace(ctx, len(seq), rate, func(i int) { queues[i%len(targets)] <- job{i} })
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	res.Redirects, res.Other, res.Errors = redirects.Load(), other.Load(), errs.Load()
	return res
}

// pace calls send(i) for i from 0 to n-1, each at its time at rate a
// second, and returns how many it sent and the latest one was late; it
// stops early (behind) once one is later than maxLag.
func pace(ctx context.Context, n int, rate float64, send func(i int)) (sent int64, lag time.Duration, behind bool) {
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if d := time.Until(due); d > time.Millisecond {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		send(i)
		sent++
		if lag = max(lag, time.Since(due)); lag > maxLag {
			return sent, lag, true
		}
	}
	return sent, lag, false
}
