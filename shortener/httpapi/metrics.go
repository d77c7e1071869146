package httpapi

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkgate/linkgate/internal/overload"
)

// Metrics are the HTTP API's Prometheus metrics. They are registered on the
// registry passed to NewMetrics (never the global one). Per-request updates
// use counters and observers resolved in advance, so the redirect path
// does not hash label values.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	created  prometheus.Counter
	shed     [numClasses]prometheus.Counter
	panics   prometheus.Counter
	qrDraws  prometheus.Counter
	limited  prometheus.Counter
	inflight [numClasses]inflight
	reg      prometheus.Registerer
	followed atomic.Uint32 // redirects followed, for sampling their latency

	byRoute [numRoutes]perRoute
}

// inflight counts a class's requests in flight, and those started, on a
// cache line of its own, in one word (one atomic operation to start a
// request, one to end it): the requests in flight in the low 32 bits,
// those started (modulo 2³²) in the high ones.
type inflight struct {
	v atomic.Uint64
	_ [56]byte
}

// begin counts a request started and returns the requests now in flight.
func (in *inflight) begin() int64 { return int64(uint32(in.v.Add(1<<32 | 1))) }

// end counts a request ended.
func (in *inflight) end() { in.v.Add(^uint64(0)) }

// now returns the requests in flight.
func (in *inflight) now() int64 { return int64(uint32(in.v.Load())) }

// started returns the requests started, modulo 2³² (overload.Monitor.Watch
// only compares successive counts).
func (in *inflight) started() uint64 { return in.v.Load() >> 32 }

type perRoute struct {
	latency prometheus.Observer
	codes   [len(commonStatuses)]prometheus.Counter
}

// commonStatuses get a pre-resolved counter per route; others are looked up.
var commonStatuses = [...]int{200, 201, 204, 301, 302, 307, 308, 400, 401, 403, 404, 405, 409, 410, 413, 421, 429, 500, 503}

var statusIndex = func() (idx [600]int8) {
	for i := range idx {
		idx[i] = -1
	}
	for i, s := range commonStatuses {
		idx[s] = int8(i)
	}
	return idx
}()

// NewMetrics creates the API's metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "linkgate_http_requests_total",
			Help: "HTTP requests answered, by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "linkgate_http_request_duration_seconds",
			Help:    "Time from reading a request to handing its response to the server, by route (of followed redirects, one in 16).",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route"}),
		created: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "linkgate_links_created_total",
			Help: "Links created (durably stored).",
		}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "linkgate_http_panics_total",
			Help: "Requests whose handler panicked (answered 500).",
		}),
		limited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "linkgate_http_creates_rate_limited_total",
			Help: "Creates answered 429 rate_limited (--create-rate, --create-rate-key).",
		}),
		qrDraws: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "linkgate_qr_draws_total",
			Help: "QR images drawn (the others were served from the QR cache).",
		}),
	}
	shed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "linkgate_http_requests_shed_total",
		Help: "Requests answered 503 overloaded because their class's in-flight budget (--max-inflight*) or admission rate was used up, by class.",
	}, []string{"class"})
	reg.MustRegister(m.requests, m.latency, m.created, shed, m.panics, m.qrDraws, m.limited)
	for c := classRedirect; c < numClasses; c++ {
		m.shed[c] = shed.WithLabelValues(c.String())
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "linkgate_http_requests_in_flight",
			Help:        "Requests being handled now, by class.",
			ConstLabels: prometheus.Labels{"class": c.String()},
		}, func() float64 { return float64(m.inflight[c].now()) }))
	}
	for r := range numRoutes {
		name := route(r).String()
		rm := &m.byRoute[r]
		rm.latency = m.latency.WithLabelValues(name)
		for i, s := range commonStatuses {
			rm.codes[i] = m.requests.WithLabelValues(name, strconv.Itoa(s))
		}
	}
	return m
}

// adaptiveLimit exports an adaptive in-flight limit of class c.
func (m *Metrics) adaptiveLimit(c class, l *overload.Limit) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "linkgate_http_inflight_limit",
		Help:        "The in-flight budget of a class now, as --overload-delay adapts it to the CPU the server gets.",
		ConstLabels: prometheus.Labels{"class": c.String()},
	}, func() float64 { return float64(l.Load()) }))
}

// adaptiveRate exports an adaptive admission rate of class c.
func (m *Metrics) adaptiveRate(c class, r *overload.Rate) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "linkgate_http_admission_rate",
		Help:        "The requests per second a class may start now, as --overload-delay adapts it to the CPU the server gets (+Inf: no limit).",
		ConstLabels: prometheus.Labels{"class": c.String()},
	}, r.PerSecond))
}

// clockBase anchors request timing: time.Since(clockBase) reads the
// monotonic clock only, where time.Now also reads the wall clock.
var clockBase = time.Now()

// monotonic returns the time since clockBase; requests are timed with it.
func monotonic() time.Duration { return time.Since(clockBase) }

// wallClock gives the wall-clock time of a request from its monotonic
// start, so that counting a visit (by day) costs no clock read of its
// own: it adds the monotonic time since a wall-clock reading at most a
// second old, so a step of the system clock shows within a second.
type wallClock struct{ last atomic.Pointer[wallReading] }

// wallReading is a wall-clock reading and its monotonic time.
type wallReading struct {
	mono time.Duration
	wall time.Time
}

// at returns the wall-clock time at monotonic() == mono.
func (c *wallClock) at(mono time.Duration) time.Time {
	r := c.last.Load()
	if r == nil || mono-r.mono >= time.Second {
		now := time.Now()
		r = &wallReading{mono: now.Sub(clockBase), wall: now}
		c.last.Store(r)
	}
	return r.wall.Add(mono - r.mono)
}

// redirectSample: one followed redirect (a 30x of the redirect route) in
// redirectSample is timed in linkgate_http_request_duration_seconds;
// every other request is, and linkgate_http_requests_total counts them
// all. A followed redirect takes a few microseconds of the handler's
// CPU, of which the clock read and the observation were about 0.1 µs;
// a sample of one in 16 shows the same distribution.
const redirectSample = 16

// observe records one answered request, started at monotonic() == start.
func (m *Metrics) observe(r route, status int, start time.Duration) {
	rm := &m.byRoute[r]
	if r != routeRedirect || status < 300 || status >= 400 || (m.followed.Add(1)-1)%redirectSample == 0 {
		rm.latency.Observe((monotonic() - start).Seconds())
	}
	if status >= 0 && status < len(statusIndex) && statusIndex[status] >= 0 {
		rm.codes[statusIndex[status]].Inc()
		return
	}
	m.requests.WithLabelValues(r.String(), strconv.Itoa(status)).Inc()
}
