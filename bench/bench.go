// Package bench is linkgate's load generator: a wrk2-class constant-rate
// HTTP/1.1 client over TCP or TLS that measures latency from each request's planned send time
// (so a stalled server cannot hide its queue), records it in HdrHistograms,
// checks its own pacing, and reports in wrk2's format, JSON and .hgrm.
//
// It speaks raw HTTP/1.1 over keep-alive connections, one request in flight
// per connection (several when a script pipelines), with requests built once
// and a minimal response parser, driven by one epoll loop per thread as wrk
// is. With https:// the records are encrypted and decrypted on that loop by
// crypto/tls; handshakes run beside it (tls.go). It knows nothing about
// linkgate's own packages: it talks HTTP only.
package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds: 1 µs to 1 h at 3 significant digits, in microseconds.
const (
	histMin    = 1
	histMax    = int64(time.Hour / time.Microsecond)
	histDigits = 3
)

// SampleInterval is how often each thread samples its request rate for the
// Req/Sec row of the report.
const SampleInterval = 100 * time.Millisecond

// Defaults match wrk's.
const (
	DefaultThreads     = 2
	DefaultConnections = 10
	DefaultDuration    = 10 * time.Second
	DefaultTimeout     = 2 * time.Second
)

// Config describes one run.
type Config struct {
	// URL is the target, http:// or https://host[:port]/path. It picks the
	// address to connect to; the requests themselves come from NewRequester.
	URL *url.URL
	// TLS configures https:// targets (NewTLSConfig); nil means verify
	// against the system's roots. The server name defaults to the URL's
	// host, ALPN to http/1.1, and a session cache is added if it has none,
	// so reconnects resume.
	TLS *tls.Config
	// Addr overrides the address connected to (host:port), e.g. from a
	// script's wrk.thread.addr.
	Addr string

	Threads     int
	Connections int
	Duration    time.Duration // measured time, after Warmup
	Warmup      time.Duration // run at full rate first, excluded from every figure
	Timeout     time.Duration // a request unanswered this long is a timeout
	// Rate is the total constant request rate per second. Zero means closed
	// loop: every connection sends its next request as soon as it has the
	// response, as fast as the target allows (wrk without -R).
	Rate float64
	// HTTP2 speaks HTTP/2: h2 by ALPN for https://, h2c with prior
	// knowledge for http://; each connection carries Streams concurrent
	// streams, each on its own schedule as a connection is for HTTP/1.1.
	HTTP2   bool
	Streams int
	// Stages, instead of Rate, is an open-model ramp (--stages): each
	// request's intended send time comes from the rate curve. Duration must
	// be the stages' total; Rate is set to their mean rate.
	Stages []Stage
	// Requests, when positive, ends the run once this many responses have
	// completed in the measured window (split evenly between threads), or
	// at Duration, whichever comes first.
	Requests int64

	// NewRequester makes the request source of one thread; it is called once
	// per thread, before the run, from the goroutine that runs Run.
	NewRequester func(thread int) (Requester, error)

	// Progress, when set, is called once a second from a separate
	// goroutine with the figures so far.
	Progress func(Progress)
	// OnCalibrated, when set, is called once per thread at the end of the
	// warm-up with the thread's mean latency during it (wrk2's "Thread
	// calibration" line).
	OnCalibrated func(thread int, mean time.Duration)
}

// Progress is a live view of a run.
type Progress struct {
	Elapsed, Total time.Duration // since the start of the measured window; its length
	Warmup         bool          // still warming up
	Requests       int64
	Rate           float64       // achieved, over the measured window so far
	P99            time.Duration // of the last second
	Errors         int64
}

// Validate reports the first problem with c.
func (c *Config) Validate() error {
	switch {
	case c.URL == nil:
		return errors.New("no URL")
	case c.URL.Scheme != "http" && c.URL.Scheme != "https":
		return fmt.Errorf("unsupported URL scheme %q: want http:// or https://", c.URL.Scheme)
	case c.URL.Host == "":
		return fmt.Errorf("URL %q has no host", c.URL)
	case c.Threads < 1:
		return fmt.Errorf("threads must be at least 1, got %d", c.Threads)
	case c.Connections < c.Threads:
		return fmt.Errorf("connections (%d) must be at least threads (%d)", c.Connections, c.Threads)
	case c.Duration <= 0:
		return fmt.Errorf("duration must be positive, got %v", c.Duration)
	case c.Warmup < 0:
		return fmt.Errorf("warm-up must not be negative, got %v", c.Warmup)
	case c.Timeout <= 0:
		return fmt.Errorf("timeout must be positive, got %v", c.Timeout)
	case c.Rate < 0 || c.Rate != c.Rate:
		return fmt.Errorf("rate must be positive, got %v", c.Rate)
	case len(c.Stages) > 0 && c.Duration != StagesDuration(c.Stages):
		return fmt.Errorf("duration %v is not the stages' total %v", c.Duration, StagesDuration(c.Stages))
	case len(c.Stages) > 0 && c.Warmup > 0:
		return errors.New("stages have no warm-up: make the first stage one")
	case c.HTTP2 && c.Streams < 1:
		return fmt.Errorf("streams must be at least 1, got %d", c.Streams)
	case c.HTTP2 && c.Requests > 0:
		return errors.New("a request count is not supported with HTTP/2: use a duration")
	case c.Requests < 0:
		return fmt.Errorf("request count must not be negative, got %d", c.Requests)
	case c.NewRequester == nil:
		return errors.New("no request source")
	}
	return nil
}

// Errors counts failed requests by kind.
type Errors struct {
	Connect int64 `json:"connect"`
	Read    int64 `json:"read"`
	Write   int64 `json:"write"`
	Timeout int64 `json:"timeout"`
	// Handshake counts TLS handshakes that failed, Certificate those that
	// failed because a certificate did not verify (either side's).
	Handshake   int64 `json:"tls_handshake"`
	Certificate int64 `json:"tls_certificate"`
	// Status counts responses with status ≥ 400 by code.
	Status map[int]int64 `json:"status"`
}

// StatusTotal is the number of responses with status ≥ 400.
func (e Errors) StatusTotal() int64 {
	var n int64
	for _, v := range e.Status {
		n += v
	}
	return n
}

// Socket is the number of connect, read, write, timeout and TLS errors.
func (e Errors) Socket() int64 {
	return e.Connect + e.Read + e.Write + e.Timeout + e.Handshake + e.Certificate
}

// Total is every error of every kind.
func (e Errors) Total() int64 { return e.Socket() + e.StatusTotal() }

// String names the errors by kind, the ones that occurred only: socket
// errors first, then statuses in order, e.g. "timeout 2, 503 ×3317"; ""
// if none. A step that fails on errors says which (a 503 from the
// target's admission control is not a timeout).
func (e Errors) String() string {
	var parts []string
	for _, k := range []struct {
		name string
		n    int64
	}{{"connect", e.Connect}, {"read", e.Read}, {"write", e.Write}, {"timeout", e.Timeout},
		{"tls_handshake", e.Handshake}, {"tls_certificate", e.Certificate}} {
		if k.n > 0 {
			parts = append(parts, k.name+" "+strconv.FormatInt(k.n, 10))
		}
	}
	for _, code := range slices.Sorted(maps.Keys(e.Status)) {
		if n := e.Status[code]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d ×%d", code, n))
		}
	}
	return strings.Join(parts, ", ")
}

// Result is everything one run measured. Only the measured window counts:
// requests whose planned send time fell in the warm-up are in no figure.
type Result struct {
	URL         string
	Threads     int
	Connections int
	Rate        float64       // requested rate, 0 for closed loop (the mean rate of stages)
	Stages      []Stage       // the --stages ramp, if any
	Warmup      time.Duration // as configured
	Duration    time.Duration // as configured
	Elapsed     time.Duration // measured window actually run (shorter if interrupted)

	// Requests is the number of responses completed in the measured window
	// and Bytes their size; Requests/Elapsed is the achieved rate.
	Requests int64
	Bytes    int64
	Errors   Errors
	// InFlightAtEnd counts requests still unanswered when the run ended and
	// UnsentAtEnd those planned before the end that a busy connection could
	// not send yet. Both are in the latency histograms with the latency
	// they had reached, as timeouts are: a stalled server cannot hide.
	InFlightAtEnd int64
	UnsentAtEnd   int64

	// Latency is completion − planned send time (corrected for coordinated
	// omission), Uncorrected is completion − actual send time, SendLag is
	// how late the generator sent requests that were due and possible,
	// ReqPerSec holds each thread's request rate sampled every
	// SampleInterval. Latencies are in microseconds.
	Latency     *hdrhistogram.Histogram
	Uncorrected *hdrhistogram.Histogram
	SendLag     *hdrhistogram.Histogram
	ReqPerSec   *hdrhistogram.Histogram

	// TLS holds what https runs add: handshakes and their times.
	TLS *TLSResult
	// HTTP2 holds what HTTP/2 runs add.
	HTTP2 *H2Result

	// Series is the measured window second by second.
	Series []Second

	// Calibration is each thread's mean latency during the warm-up.
	Calibration []time.Duration
}

// TLSResult describes the TLS side of a run: the handshakes completed in
// the measured window, how many resumed a session, and their duration
// (TCP connect excluded), in microseconds.
type TLSResult struct {
	Version   string // of the probe connection, e.g. "TLS 1.3"
	ALPN      string // protocol the server selected ("" if none)
	Handshake *hdrhistogram.Histogram
	Resumed   int64
}

// Achieved is the completed request rate over the measured window.
func (r *Result) Achieved() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// Limits under which a constant-rate run counts as on schedule.
const (
	MinAchievedRatio = 0.99
	MaxSendLagP99    = time.Millisecond
)

// GeneratorLimited reports whether the generator failed to deliver the
// requested rate — it achieved less than 99% of it, or its own send lag had a
// p99 above 1 ms — and why. Closed-loop runs are never limited this way.
func (r *Result) GeneratorLimited() (limited bool, reasons []string) {
	if r.Rate <= 0 {
		return false, nil
	}
	if a := r.Achieved(); a < MinAchievedRatio*r.Rate {
		reasons = append(reasons, fmt.Sprintf("achieved %.2f req/s is below 99%% of the requested %s", a, formatRate(r.Rate)))
	}
	if late, lag := r.SendLagExceeded(); late {
		reasons = append(reasons, fmt.Sprintf("send lag p99 %s exceeds %s: the generator could not keep its schedule", lag, MaxSendLagP99))
	}
	return len(reasons) > 0, reasons
}

// minLateSends is how many sends must be late before a lag p99 above
// MaxSendLagP99 counts: in a short run one stall of the machine would
// otherwise be the p99 by itself.
const minLateSends = 5

// SendLagExceeded reports whether the generator's send lag p99 is above
// MaxSendLagP99 (with at least a few late sends), and the p99.
func (r *Result) SendLagExceeded() (bool, time.Duration) {
	p99 := time.Duration(r.SendLag.ValueAtPercentile(99)) * time.Microsecond
	if p99 <= MaxSendLagP99 {
		return false, p99
	}
	var late int64
	for _, b := range r.SendLag.Distribution() {
		if b.From > MaxSendLagP99.Microseconds() {
			late += b.Count
		}
	}
	return late >= minLateSends, p99
}

// ConnectionsNeeded is Little's law for the run: the connections busy at
// once at the requested rate and the observed p99 uncorrected latency. With
// one request in flight per connection, fewer connections than this make the
// generator queue requests that should have reached the server. Zero for
// closed-loop runs.
func (r *Result) ConnectionsNeeded() float64 {
	if r.Rate <= 0 || r.Uncorrected.TotalCount() == 0 {
		return 0
	}
	p99 := float64(r.Uncorrected.ValueAtPercentile(99)) / 1e6
	return r.Rate * p99
}

// Warnings lists what makes the result questionable, one line each.
func (r *Result) Warnings() []string {
	var w []string
	if _, reasons := r.GeneratorLimited(); len(reasons) > 0 {
		for _, s := range reasons {
			w = append(w, "generator-limited: "+s)
		}
	}
	if need := r.ConnectionsNeeded(); need > float64(r.Connections) {
		w = append(w, fmt.Sprintf("%d connections are too few for %s at the observed p99 latency (Little's law needs %.0f): use -c %d or more",
			r.Connections, formatRate(r.Rate), need, int(2*need)+1))
	}
	if r.Requests == 0 {
		w = append(w, "no request completed in the measured window")
	}
	return w
}

func formatRate(r float64) string {
	return strconv.FormatFloat(r, 'f', -1, 64) + " req/s"
}

// pacer is the run's open-model schedule.
func (c *Config) pacer() pacer {
	if len(c.Stages) > 0 {
		return newStagesPacer(c.Stages)
	}
	return constantPacer{rate: c.Rate}
}

func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(histMin, histMax, histDigits)
}

// Run runs the load described by c until its duration has passed or ctx is
// cancelled, and returns what it measured. An interrupted run still returns
// its result, covering the time it ran.
func Run(ctx context.Context, c Config) (*Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if len(c.Stages) > 0 {
		c.Rate = StagesRequests(c.Stages) / c.Duration.Seconds()
	}
	addr := c.Addr
	if addr == "" {
		port := c.URL.Port()
		if port == "" {
			port = "80"
			if c.URL.Scheme == "https" {
				port = "443"
			}
		}
		addr = net.JoinHostPort(c.URL.Hostname(), port)
	}
	tcp, err := net.DefaultResolver.LookupNetIP(ctx, "ip", hostOf(addr))
	if err != nil || len(tcp) == 0 {
		return nil, fmt.Errorf("resolve %s: %w", addr, err)
	}
	_, portStr, _ := net.SplitHostPort(addr)
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("bad port in %q", addr)
	}
	// Each thread is an OS thread that mostly waits in epoll_wait; when it
	// wakes it needs a P at once, or its sends go out late. Give every
	// thread one, plus one for the rest of the program.
	if prev := runtime.GOMAXPROCS(0); prev < c.Threads+1 {
		runtime.GOMAXPROCS(c.Threads + 1)
		defer runtime.GOMAXPROCS(prev)
	}
	ap := netip.AddrPortFrom(tcp[0].Unmap(), uint16(port))
	var tcfg *tls.Config
	var info *TLSResult
	if c.URL.Scheme == "https" {
		tcfg = c.tlsConfig()
		if c.HTTP2 {
			tcfg.NextProtos = []string{"h2"}
		}
		if info, err = probeTLS(ctx, ap.String(), tcfg, c.Timeout); err != nil {
			return nil, err
		}
		if c.HTTP2 && info.ALPN != "h2" {
			return nil, fmt.Errorf("%s did not negotiate h2 by ALPN (it chose %q): it does not speak HTTP/2 over TLS", ap, info.ALPN)
		}
	}
	// A request source is used by one goroutine: a thread of the HTTP/1.1
	// engine, a connection of the HTTP/2 one.
	sources := c.Threads
	if c.HTTP2 {
		sources = c.Connections
	}
	reqs := make([]Requester, sources)
	for i := range reqs {
		if reqs[i], err = c.NewRequester(i); err != nil {
			return nil, err
		}
	}
	run := runEngine
	if c.HTTP2 {
		run = runH2
	}
	res, err := run(ctx, &c, ap, tcfg, reqs)
	if res != nil {
		res.Stages = c.Stages
	}
	if res != nil && info != nil {
		res.TLS.Version, res.TLS.ALPN = info.Version, info.ALPN
	}
	return res, err
}

func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}
