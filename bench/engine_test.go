package bench_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/linkgate/linkgate/bench"
	"github.com/linkgate/linkgate/internal/testdep"
)

func TestClosedLoop(t *testing.T) {
	t.Parallel()
	var served atomic.Int64
	u := serve(t, func(w http.ResponseWriter, r *http.Request) { served.Add(1); w.Write([]byte("ok")) })
	c := config(u, 2, 4, time.Minute, 0)
	c.Requests = 200 // the run ends on a count, not on the clock
	res := run(t, c)
	if res.Requests != 200 || res.Errors.Total() != 0 {
		t.Fatalf("requests %d errors %+v", res.Requests, res.Errors)
	}
	// Every counted response was really served (the target may have served
	// a few more that the end of the run cut off).
	if n := served.Load(); n < res.Requests || n > res.Requests+4 {
		t.Errorf("target served %d, result counts %d", n, res.Requests)
	}
	if res.Latency.TotalCount() < res.Requests-4 || res.Bytes == 0 {
		t.Errorf("histogram %d values for %d requests, %d bytes", res.Latency.TotalCount(), res.Requests, res.Bytes)
	}
	if limited, _ := res.GeneratorLimited(); limited {
		t.Error("a closed-loop run is never generator-limited")
	}
}

func TestRequestsStopsTheRun(t *testing.T) {
	t.Parallel()
	u := rawTarget(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	c := config(u, 2, 4, time.Minute, 0)
	c.Requests = 1001
	res := run(t, c)
	if res.Requests != 1001 {
		t.Errorf("requests = %d, want 1001", res.Requests)
	}
}

// A target answering after a fixed delay: both latencies show at least
// the delay, the corrected one never less than the uncorrected, and every
// request planned in the window is in the histograms exactly once, however
// late the machine ran it. (How closely they agree is a timing figure:
// BenchmarkPacing.)
func TestFixedDelay(t *testing.T) {
	t.Parallel()
	const delay = 20 * time.Millisecond
	u := serve(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay) // deliberate: the fixed delay under test
		w.Write([]byte("ok"))
	})
	res := run(t, config(u, 1, 20, time.Second, 200))
	c50, u50 := ms(res.Latency.ValueAtPercentile(50)), ms(res.Uncorrected.ValueAtPercentile(50))
	t.Logf("corrected p50 %v, uncorrected p50 %v", c50, u50)
	if u50 < delay || c50 < u50 {
		t.Errorf("p50 corrected %v, uncorrected %v: want the delay %v ≤ uncorrected ≤ corrected", c50, u50, delay)
	}
	if n := res.Latency.TotalCount(); n != 200 || n != res.Uncorrected.TotalCount()+res.UnsentAtEnd {
		t.Errorf("%d corrected latencies, %d uncorrected, %d unsent; want the 200 planned", n, res.Uncorrected.TotalCount(), res.UnsentAtEnd)
	}
	if res.Errors.Total() != 0 {
		t.Errorf("errors %+v", res.Errors)
	}
}

// stallingRequester stops the generator's thread once, for stall, when it
// builds request number at, and notes when.
type stallingRequester struct {
	req   []byte
	n, at int
	stall time.Duration
	began time.Time
}

func (s *stallingRequester) Request(dst []byte) ([]byte, error) {
	if s.n++; s.n == s.at {
		s.began = time.Now()
		time.Sleep(s.stall) // deliberate: the stall under test
	}
	return append(dst, s.req...), nil
}

// A generator that stops just before the end of the run sends nothing
// late: what it did not send is its lag all the same.
//
// Not timed: the stall is the test's own, and the bound is reckoned from
// when it began, however late the machine got there. Eight connections
// (HTTP/2: streams) each send every 20 ms; the thread stops in the middle
// of the run's last 400 ms, and every connection that was idle then (the
// ones not in flight at the end: nothing runs after the stall) had its
// next request due within 20 ms of the stall's start, so one of them
// waited from then to the end of the run.
func TestLateAtTheEndIsSendLag(t *testing.T) {
	t.Parallel()
	h2c := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	h2c.Config.Protocols = new(http.Protocols)
	h2c.Config.Protocols.SetUnencryptedHTTP2(true)
	h2c.Start()
	t.Cleanup(h2c.Close)
	h2u, _ := url.Parse(h2c.URL + "/")
	for _, tt := range []struct {
		name string
		c    bench.Config
	}{
		{"http1", config(rawTarget(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), 1, 8, time.Second, 400)},
		{"h2c", h2config(h2u, 1, 8, time.Second, 400)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := tt.c
			get := bench.AppendRequest(nil, "GET", "/", bench.Fields{{Name: "Host", Value: c.URL.Host}}, nil)
			// Request 300 is due 750 ms into the schedule, 250 ms before
			// the end; building it takes 400 ms.
			sr := &stallingRequester{req: get, at: 300, stall: 400 * time.Millisecond}
			c.NewRequester = func(int) (bench.Requester, error) { return sr, nil }
			before := time.Now()
			res := run(t, c)
			// The run ends 1.05 s after it starts (the connections open
			// 50 ms before the schedule), which is after before.
			want := before.Add(1050*time.Millisecond).Sub(sr.began) - 20*time.Millisecond
			lag := ms(res.SendLag.Max())
			t.Logf("stall began %v after the start, send lag max %v, %d in flight at the end", sr.began.Sub(before), lag, res.InFlightAtEnd)
			if sr.began.IsZero() || res.InFlightAtEnd == 8 {
				t.Logf("no connection was idle at the stall: nothing to check")
				return
			}
			if lag < want {
				t.Errorf("send lag max %v, want at least the %v from the stall to the end", lag, want)
			}
		})
	}
}

// Coordinated omission: a target that stalls 500 ms every 2 s. The corrected
// latency shows the stall to every request planned during it; the
// uncorrected median stays small, as a closed-loop tool would report.
func TestCoordinatedOmission(t *testing.T) {
	t.Parallel()
	start := time.Now()
	var mu sync.RWMutex
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Until(start.Add(time.Second))):
			}
			mu.Lock()
			time.Sleep(500 * time.Millisecond) // deliberate: the target stalls every other second
			mu.Unlock()
			start = start.Add(2 * time.Second)
		}
	}()
	u := serve(t, func(w http.ResponseWriter, r *http.Request) {
		mu.RLock() // blocks while the stall holds the lock
		w.Write([]byte("ok"))
		mu.RUnlock()
	})
	res := run(t, config(u, 1, 10, 2500*time.Millisecond, 100))
	t.Logf("corrected p99 %v, uncorrected p50 %v, uncorrected p99 %v", ms(res.Latency.ValueAtPercentile(99)),
		ms(res.Uncorrected.ValueAtPercentile(50)), ms(res.Uncorrected.ValueAtPercentile(99)))
	// The stall holds one request per connection; those planned during
	// it wait in the generator. Counted, not timed: the uncorrected
	// latency has at most one value per connection per stall that long,
	// the corrected one every request planned in its first 100 ms too.
	long := func(h *hdrhistogram.Histogram) (n int64) {
		for _, b := range h.Distribution() {
			if ms(b.From) >= 400*time.Millisecond {
				n += b.Count
			}
		}
		return n
	}
	if c, u := long(res.Latency), long(res.Uncorrected); c < 10 || u > 2*10 {
		t.Errorf("latencies ≥ 400 ms: %d corrected, %d uncorrected; want ≥ 10 and at most one per connection per stall", c, u)
	}
}

// A timeout is recorded with the latency it reached, never dropped; so is a
// request still in flight when the run ends.
func TestTimeoutAndInFlightRecorded(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	u := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
			return
		}
		w.Write([]byte("ok"))
	})
	u.Path = "/hang"
	c := config(u, 1, 2, 500*time.Millisecond, 0)
	c.Timeout = 150 * time.Millisecond
	res := run(t, c)
	if res.Errors.Timeout < 2 {
		t.Errorf("timeouts %d, want at least 2", res.Errors.Timeout)
	}
	if res.InFlightAtEnd != 2 {
		t.Errorf("in flight at end %d, want 2", res.InFlightAtEnd)
	}
	if got := res.Latency.TotalCount(); got != res.Errors.Timeout+res.InFlightAtEnd {
		t.Errorf("histogram holds %d values, want timeouts + in flight = %d", got, res.Errors.Timeout+res.InFlightAtEnd)
	}
	// A bucket's From is its lowest equivalent value: 150.000–150.015 ms
	// share the bucket that starts at 149.888 ms, so a timeout caught at
	// the first tick past the deadline lands below it. Its To cannot.
	var atTimeout int64
	for _, b := range res.Latency.Distribution() {
		if ms(b.To) >= 150*time.Millisecond {
			atTimeout += b.Count
		}
	}
	if atTimeout < res.Errors.Timeout {
		t.Errorf("%d values ≥ the timeout for %d timeouts: timeouts must carry their latency", atTimeout, res.Errors.Timeout)
	}
	if res.Requests != 0 {
		t.Errorf("requests %d, want 0: nothing completed", res.Requests)
	}
}

// Requests planned but never sent because the connection was stuck are
// recorded at the end with the latency they reached.
func TestUnsentAtEndRecorded(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	u := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	})
	res := run(t, config(u, 1, 1, 500*time.Millisecond, 100))
	// 50 planned: the first sent and stuck (unless the machine was so slow
	// that it was not sent at all), the rest unsent.
	if res.InFlightAtEnd > 1 || res.InFlightAtEnd+res.UnsentAtEnd != 50 {
		t.Errorf("in flight %d, unsent %d; want 1 and 49", res.InFlightAtEnd, res.UnsentAtEnd)
	}
	if n := res.Latency.TotalCount(); n != res.InFlightAtEnd+res.UnsentAtEnd {
		t.Errorf("histogram %d values", n)
	}
	if _, reasons := res.GeneratorLimited(); len(reasons) == 0 {
		t.Error("achieving nothing of -R must mark the run generator-limited")
	}
}

func TestErrorsByKind(t *testing.T) {
	t.Parallel()
	t.Run("status", func(t *testing.T) {
		t.Parallel()
		var n atomic.Int64
		u := serve(t, func(w http.ResponseWriter, r *http.Request) {
			switch n.Add(1) % 3 {
			case 0:
				w.WriteHeader(404)
			case 1:
				w.WriteHeader(503)
			default:
				w.WriteHeader(302)
			}
		})
		res := run(t, config(u, 1, 1, 300*time.Millisecond, 0))
		s := res.Errors.Status
		if s[404] == 0 || s[503] == 0 || len(s) != 2 || res.Errors.Socket() != 0 {
			t.Errorf("errors %+v, want 404 and 503 counted by code, 302 not", res.Errors)
		}
		if res.Errors.StatusTotal() != s[404]+s[503] {
			t.Error("status total")
		}
	})
	t.Run("connect", func(t *testing.T) {
		t.Parallel()
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now
		u, _ := url.Parse("http://" + addr + "/")
		res := run(t, config(u, 1, 2, 200*time.Millisecond, 0))
		if res.Errors.Connect == 0 || res.Requests != 0 {
			t.Errorf("errors %+v, requests %d", res.Errors, res.Requests)
		}
	})
	t.Run("read", func(t *testing.T) {
		t.Parallel()
		u := serve(t, func(w http.ResponseWriter, r *http.Request) {
			// Promise 10 bytes, send 2, hang up.
			conn, buf, _ := w.(http.Hijacker).Hijack()
			buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nok")
			buf.Flush()
			conn.Close()
		})
		res := run(t, config(u, 1, 1, 200*time.Millisecond, 0))
		if res.Errors.Read == 0 || res.Requests != 0 {
			t.Errorf("errors %+v, requests %d", res.Errors, res.Requests)
		}
	})
}

// The warm-up is excluded from every figure: requests, bytes, latency.
func TestWarmupExcluded(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	u := serve(t, func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Write([]byte("ok"))
	})
	c := config(u, 1, 4, 500*time.Millisecond, 400)
	c.Warmup = 500 * time.Millisecond
	var calibrated atomic.Int64
	c.OnCalibrated = func(int, time.Duration) { calibrated.Add(1) }
	res := run(t, c)
	// 200 requests are planned in the warm-up and 200 in the window. The
	// histogram holds the window's, each once however late it ran. The
	// count is of responses completed in the window: every one of the
	// window's that completed, and those of the warm-up that came late,
	// but none that completed in the warm-up (of which the calibration
	// says there was at least one).
	if got := res.Latency.TotalCount(); got != 200 {
		t.Errorf("histogram holds %d values, want the 200 planned in the window", got)
	}
	if total := n.Load(); res.Requests < 200-res.InFlightAtEnd-res.UnsentAtEnd || res.Requests >= total {
		t.Errorf("server saw %d requests, result counts %d (%d in flight and %d unsent at the end)",
			total, res.Requests, res.InFlightAtEnd, res.UnsentAtEnd)
	}
	if calibrated.Load() != 1 || res.Calibration[0] <= 0 {
		t.Errorf("calibration callbacks %d, means %v", calibrated.Load(), res.Calibration)
	}
}

func TestCancelReturnsPartialResult(t *testing.T) {
	t.Parallel()
	u := serve(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := bench.Run(ctx, config(u, 1, 2, time.Minute, 0))
	if err != nil {
		t.Fatal(err)
	}
	if res.Elapsed > 5*time.Second || res.Requests == 0 {
		t.Errorf("elapsed %v requests %d", res.Elapsed, res.Requests)
	}
}

// The live view comes once a second of the measured window, when every
// thread has closed it: the test waits for that event (and ends the run
// on it), not for a time.
func TestProgress(t *testing.T) {
	t.Parallel()
	u := serve(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	c := config(u, 2, 2, time.Minute, 500)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := make(chan bench.Progress, 1)
	c.Progress = func(p bench.Progress) {
		if p.P99 <= 0 {
			return // a second no thread had closed yet
		}
		select {
		case got <- p:
			cancel()
		default:
		}
	}
	if _, err := bench.Run(ctx, c); err != nil {
		t.Fatal(err)
	}
	var p bench.Progress
	select {
	case p = <-got:
	default:
		t.Fatal("a minute without a live view of a closed second")
	}
	if p.Requests == 0 || p.Elapsed < time.Second || p.Warmup || p.Total != time.Minute {
		t.Errorf("progress %+v", p)
	}
}

func TestInvalidRequestFromSource(t *testing.T) {
	t.Parallel()
	u := serve(t, func(w http.ResponseWriter, r *http.Request) {})
	c := config(u, 1, 1, time.Second, 0)
	c.NewRequester = func(int) (bench.Requester, error) { return bench.Static("GET /\r\n"), nil }
	if _, err := bench.Run(context.Background(), c); err == nil || !strings.Contains(err.Error(), "invalid request") {
		t.Errorf("err = %v", err)
	}
	c.NewRequester = func(int) (bench.Requester, error) { return nil, errors.New("boom") }
	if _, err := bench.Run(context.Background(), c); err == nil {
		t.Error("want the source's error")
	}
}

func TestConfigValidate(t *testing.T) {
	u, _ := url.Parse("http://127.0.0.1:1/")
	base := config(u, 2, 4, time.Second, 0)
	tests := []struct {
		name string
		mod  func(*bench.Config)
	}{
		{"no url", func(c *bench.Config) { c.URL = nil }},
		{"ftp", func(c *bench.Config) { c.URL = &url.URL{Scheme: "ftp", Host: "x"} }},
		{"threads", func(c *bench.Config) { c.Threads = 0 }},
		{"c < t", func(c *bench.Config) { c.Connections = 1 }},
		{"duration", func(c *bench.Config) { c.Duration = 0 }},
		{"timeout", func(c *bench.Config) { c.Timeout = 0 }},
		{"rate", func(c *bench.Config) { c.Rate = -1 }},
		{"source", func(c *bench.Config) { c.NewRequester = nil }},
	}
	for _, tt := range tests {
		c := base
		tt.mod(&c)
		if c.Validate() == nil {
			t.Errorf("%s: want an error", tt.name)
		}
	}
	if err := base.Validate(); err != nil {
		t.Error(err)
	}
}

// The static send/receive path does not allocate per request.
func TestStaticPathDoesNotAllocate(t *testing.T) {
	if testdep.Race {
		t.Skip("the race detector allocates")
	}
	u := rawTarget(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	c := config(u, 1, 8, time.Minute, 0)
	c.Requests = 2000
	run(t, c) // warm up the process: goroutines, buffers
	c.Requests = 50000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res := run(t, c)
	runtime.ReadMemStats(&after)
	perReq := float64(after.Mallocs-before.Mallocs) / float64(res.Requests)
	t.Logf("%d allocations for %d requests (%.4f per request)", after.Mallocs-before.Mallocs, res.Requests, perReq)
	if perReq > 0.01 {
		t.Errorf("%.4f allocations per request, want none", perReq)
	}
}

// BenchmarkClosedLoop measures the generator's send/receive loop against an
// in-process target that allocates nothing: allocs/op is per request.
func BenchmarkClosedLoop(b *testing.B) {
	u := rawTarget(b, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	c := config(u, 1, 16, time.Hour, 0)
	c.Requests = int64(b.N)
	b.ReportAllocs()
	b.ResetTimer()
	run(b, c)
}

// BenchmarkPacing measures the pacing error at 5k req/s against a fast
// target: corrected p50 − uncorrected p50 (wrk2's 1 ms timer adds about
// 0.8 ms; the goal is ≤ 0.1 ms), and the generator's send lag p99. It is
// a timing figure, so a benchmark: one run of a second per iteration.
//
//	go test -run '^$' -bench Pacing -benchtime 3x ./bench/
func BenchmarkPacing(b *testing.B) {
	u := rawTarget(b, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	var diff, lag time.Duration
	for b.Loop() {
		res := run(b, config(u, 2, 50, time.Second, 5000))
		diff += ms(res.Latency.ValueAtPercentile(50)) - ms(res.Uncorrected.ValueAtPercentile(50))
		lag += ms(res.SendLag.ValueAtPercentile(99))
	}
	b.ReportMetric(float64(diff.Microseconds())/float64(b.N), "pacing-error-µs")
	b.ReportMetric(float64(lag.Microseconds())/float64(b.N), "send-lag-p99-µs")
}
