package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// nodeHealth is one node's health within one upstream. It lives in pools,
// outside config snapshots, so a reload does not forget a dead node.
type nodeHealth struct {
	down atomic.Bool

	mu                                          sync.Mutex
	successes, httpFailures, tcpFailures, tmout int
}

func (h *nodeHealth) healthy() bool { return !h.down.Load() }

// outcome of one attempt against a node.
type outcome int

const (
	outcomeHTTP    outcome = iota // got a response with a status
	outcomeTCP                    // could not connect or the connection broke
	outcomeTimeout                // timed out
)

// record counts an outcome against thresholds and flips the node's state
// when one is reached; it reports whether the state changed.
func (h *nodeHealth) record(o outcome, status int, healthyStatuses, unhealthyStatuses []int, successes, httpFailures, tcpFailures, timeouts int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	wasDown := h.down.Load()
	switch {
	case o == outcomeTCP:
		h.successes = 0
		h.tcpFailures++
		if tcpFailures > 0 && h.tcpFailures >= tcpFailures {
			h.down.Store(true)
		}
	case o == outcomeTimeout:
		h.successes = 0
		h.tmout++
		if timeouts > 0 && h.tmout >= timeouts {
			h.down.Store(true)
		}
	case slices.Contains(unhealthyStatuses, status):
		h.successes = 0
		h.httpFailures++
		if httpFailures > 0 && h.httpFailures >= httpFailures {
			h.down.Store(true)
		}
	case slices.Contains(healthyStatuses, status):
		h.httpFailures, h.tcpFailures, h.tmout = 0, 0, 0
		h.successes++
		if successes > 0 && h.successes >= successes {
			h.down.Store(false)
		}
	}
	if h.down.Load() != wasDown {
		h.successes, h.httpFailures, h.tcpFailures, h.tmout = 0, 0, 0, 0
		return true
	}
	return false
}

func (h *nodeHealth) resetHealthy() {
	h.mu.Lock()
	h.down.Store(false)
	h.successes, h.httpFailures, h.tcpFailures, h.tmout = 0, 0, 0, 0
	h.mu.Unlock()
}

// passive records the outcome of a proxied attempt when the upstream has
// passive checks.
func (rt *upstreamRT) passive(n *nodeRT, o outcome, status int) {
	if rt.checks == nil || rt.checks.Passive == nil {
		return
	}
	p := rt.checks.Passive
	if p.Type == "tcp" && o == outcomeHTTP {
		status = 200
		n.health.record(o, status, []int{200}, nil, p.Healthy.Successes, 0, p.Unhealthy.TCPFailures, p.Unhealthy.Timeouts)
		return
	}
	n.health.record(o, status, p.Healthy.HTTPStatuses, p.Unhealthy.HTTPStatuses,
		p.Healthy.Successes, p.Unhealthy.HTTPFailures, p.Unhealthy.TCPFailures, p.Unhealthy.Timeouts)
}

// checker probes one upstream's nodes actively. Checkers are keyed by the
// upstream key and its checks configuration: a reload that changes neither
// keeps the checker (and its counters) running.
type checker struct {
	cancel context.CancelFunc
	done   chan struct{}
}

type checkerKey struct {
	upstream string
	conf     string
}

// runChecker probes every node of rt until ctx ends.
func runChecker(ctx context.Context, rt *upstreamRT, logger *slog.Logger) {
	a := rt.checks.Active
	interval := time.Duration(min(a.Healthy.Interval, a.Unhealthy.Interval) * float64(time.Second))
	if interval <= 0 {
		interval = time.Second
	}
	timeout := seconds(a.Timeout)
	if timeout <= 0 {
		timeout = time.Second
	}
	// One probe client per node, made before probing starts: probes run
	// concurrently.
	clients := make([]*fasthttp.HostClient, len(rt.nodes))
	for i, n := range rt.nodes {
		addr := n.addr
		if a.Port > 0 {
			addr = net.JoinHostPort(n.host, strconv.Itoa(a.Port))
		}
		clients[i] = &fasthttp.HostClient{Addr: addr, IsTLS: a.Type == "https", MaxConns: 2,
			TLSConfig:                &tls.Config{InsecureSkipVerify: !a.HTTPSVerifyCertificate}, //nolint:gosec // as configured
			NoDefaultUserAgentHeader: true, MaxIdemponentCallAttempts: 1}
	}
	probe := func(i int) {
		n, c := rt.nodes[i], clients[i]
		var o outcome
		status := 0
		if a.Type == "tcp" {
			conn, err := net.DialTimeout("tcp", c.Addr, timeout)
			if err != nil {
				o = classify(err)
			} else {
				_ = conn.Close()
				o, status = outcomeHTTP, 200
			}
		} else {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			req.SetRequestURI(a.HTTPPath)
			host := a.Host
			if host == "" {
				host = n.host
			}
			req.Header.SetHost(host)
			req.Header.Set("User-Agent", "linkgate-healthcheck")
			for _, h := range a.ReqHeaders {
				if k, v, ok := cutHeader(h); ok {
					req.Header.Set(k, v)
				}
			}
			err := c.DoTimeout(req, resp, timeout)
			if err != nil {
				o = classify(err)
			} else {
				o, status = outcomeHTTP, resp.StatusCode()
			}
			fasthttp.ReleaseRequest(req)
			fasthttp.ReleaseResponse(resp)
		}
		healthyStatuses := a.Healthy.HTTPStatuses
		if a.Type == "tcp" {
			healthyStatuses = []int{200}
		}
		if n.health.record(o, status, healthyStatuses, a.Unhealthy.HTTPStatuses,
			a.Healthy.Successes, a.Unhealthy.HTTPFailures, a.Unhealthy.TCPFailures, a.Unhealthy.Timeouts) {
			logger.Info("upstream node health changed", "upstream", rt.key, "node", n.addr, "healthy", n.health.healthy())
		}
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		sem := make(chan struct{}, max(a.Concurrency, 1))
		var wg sync.WaitGroup
		for i := range rt.nodes {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				probe(i)
			}()
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func classify(err error) outcome {
	var ne net.Error
	if errors.Is(err, fasthttp.ErrTimeout) || errors.Is(err, fasthttp.ErrDialTimeout) || (errors.As(err, &ne) && ne.Timeout()) {
		return outcomeTimeout
	}
	return outcomeTCP
}

func cutHeader(h string) (string, string, bool) {
	for i := 0; i < len(h); i++ {
		if h[i] == ':' {
			k, v := h[:i], h[i+1:]
			for len(v) > 0 && v[0] == ' ' {
				v = v[1:]
			}
			return k, v, k != ""
		}
	}
	return "", "", false
}
