// Package prometheus is APISIX's prometheus plugin: apisix_http_status,
// apisix_http_latency, apisix_bandwidth per route, service, consumer and
// node, plus the process gauges (connections, requests, etcd
// reachability, node info), exported at /apisix/prometheus/metrics.
//
// Metric handles are cached per label set, so the log phase is a
// comparison with the instance's last label set (else a map lookup) and a
// few atomic adds; a scrape reads one value per series and
// costs the same whatever the traffic was (APISIX #7353).
package prometheus

import (
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/linkgate/linkgate/gateway"
)

// Name, Priority and the export path as APISIX.
const (
	Name      = "prometheus"
	Priority  = 500
	ExportURI = "/apisix/prometheus/metrics"
	prefix    = "apisix_"
)

// Buckets of apisix_http_latency, in milliseconds.
var Buckets = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000}

// Factory is the plugin and its metric registry.
type Factory struct {
	reg       *prometheus.Registry
	status    *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	bandwidth *prometheus.CounterVec
	modify    atomic.Pointer[map[string]int64]

	mu    sync.RWMutex
	cache map[labels]*series
	v3    bool // Options.V3
}

// Options configure the plugin.
type Options struct {
	// V3 exports APISIX 3.x's labels: request_type, request_llm_model and
	// llm_model on every metric, response_source on apisix_http_status.
	V3 bool
}

type labels struct {
	code                                         int
	route, matchedURI, matchedHost, service, con string
	node                                         string
	source                                       string // response_source (v3)
}

// v3Labels are the labels 3.x adds to the latency and bandwidth metrics;
// linkgate has no AI proxy, so request_type is always traditional_http and
// the model labels are empty.
var v3Labels = []string{"request_type", "request_llm_model", "llm_model"}

type series struct {
	l                         labels
	status                    prometheus.Counter
	request, upstream, apisix prometheus.Observer
	ingress, egress           prometheus.Counter
}

var _ gateway.Factory = (*Factory)(nil)

// New returns the plugin with its own metric registry and APISIX 2.14's
// labels.
func New() *Factory { return NewWithOptions(Options{}) }

// NewWithOptions returns the plugin configured by o.
func NewWithOptions(o Options) *Factory {
	f := &Factory{reg: prometheus.NewRegistry(), cache: map[labels]*series{}, v3: o.V3}
	statusLabels := []string{"code", "route", "matched_uri", "matched_host", "service", "consumer", "node"}
	typeLabels := []string{"type", "route", "service", "consumer", "node"}
	if o.V3 {
		statusLabels = append(append(statusLabels, v3Labels...), "response_source")
		typeLabels = append(typeLabels, v3Labels...)
	}
	f.status = prometheus.NewCounterVec(prometheus.CounterOpts{Name: prefix + "http_status",
		Help: "HTTP status codes per service in APISIX"}, statusLabels)
	f.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: prefix + "http_latency",
		Help: "HTTP request latency in milliseconds per service in APISIX", Buckets: Buckets}, typeLabels)
	f.bandwidth = prometheus.NewCounterVec(prometheus.CounterOpts{Name: prefix + "bandwidth",
		Help: "Total bandwidth in bytes consumed per service in APISIX"}, typeLabels)
	f.reg.MustRegister(f.status, f.latency, f.bandwidth)
	return f
}

func (f *Factory) Name() string  { return Name }
func (f *Factory) Priority() int { return Priority }

var schema = &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{
	"prefer_name": {Type: "boolean", Default: false},
}}

// Schema is APISIX's: {prefer_name}.
func (f *Factory) Schema() *gateway.Schema { return schema }

type instance struct {
	f          *Factory
	preferName bool
	// last is the series this instance recorded last: a route's requests
	// nearly all share one label set, so most skip the factory's lock and
	// the hashing of seven labels.
	last atomic.Pointer[series]
}

// New makes an instance; every instance shares the factory's metrics.
func (f *Factory) New(raw json.RawMessage, _ gateway.Scope) (any, error) {
	var c struct {
		PreferName bool `json:"prefer_name"`
	}
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return &instance{f: f, preferName: c.PreferName}, nil
}

// Log records one finished request, once: prometheus on the route and on
// a global rule counts it one time, with the route's configuration (the
// engine logs the route's plugins first), as APISIX's run_policy
// prefer_route.
func (in *instance) Log(c gateway.Ctx, e *gateway.LogEntry) {
	if _, done := c.Value(in.f); done {
		return
	}
	c.SetValue(in.f, 1)
	route, service := e.RouteID, e.ServiceID
	if in.preferName {
		if e.RouteName != "" {
			route = e.RouteName
		}
		if e.ServiceName != "" {
			service = e.ServiceName
		}
	}
	l := labels{code: e.Status, route: route, matchedURI: e.MatchedURI, matchedHost: e.MatchedHost,
		service: service, con: e.Consumer, node: e.Node}
	if in.f.v3 {
		l.source = responseSource(e)
	}
	s := in.last.Load()
	if s == nil || s.l != l {
		s = in.f.series(l)
		in.last.Store(s)
	}
	s.status.Inc()
	reqMs := float64(e.RequestTime.Nanoseconds()) / 1e6
	s.request.Observe(reqMs)
	if e.UpstreamTime > 0 {
		upMs := float64(e.UpstreamTime.Nanoseconds()) / 1e6
		s.upstream.Observe(upMs)
		s.apisix.Observe(max(reqMs-upMs, 0))
	} else {
		s.apisix.Observe(reqMs)
	}
	s.ingress.Add(float64(e.RequestLength))
	s.egress.Add(float64(e.BytesSent))
}

// responseSource is 3.x's response_source: "apisix" when no upstream was
// tried (a plugin or the router answered), "nginx" when the attempt
// failed before the upstream answered (502/504), else "upstream".
func responseSource(e *gateway.LogEntry) string {
	switch {
	case e.UpstreamStatus == 0:
		return "apisix"
	case e.UpstreamTime == 0:
		return "nginx"
	}
	return "upstream"
}

// series returns the cached metric handles of a label set.
func (f *Factory) series(l labels) *series {
	f.mu.RLock()
	s, ok := f.cache[l]
	f.mu.RUnlock()
	if ok {
		return s
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.cache[l]; ok {
		return s
	}
	// The labels are kept: copy them (a matched host is a view of the
	// request's buffer, reused by the next request).
	l = labels{code: l.code, route: strings.Clone(l.route), matchedURI: strings.Clone(l.matchedURI),
		matchedHost: strings.Clone(l.matchedHost), service: strings.Clone(l.service), con: strings.Clone(l.con),
		node: strings.Clone(l.node), source: l.source}
	status := []string{strconv.Itoa(l.code), l.route, l.matchedURI, l.matchedHost, l.service, l.con, l.node}
	typed := func(typ string) []string {
		v := []string{typ, l.route, l.service, l.con, l.node}
		if f.v3 {
			v = append(v, "traditional_http", "", "")
		}
		return v
	}
	if f.v3 {
		status = append(status, "traditional_http", "", "", l.source)
	}
	s = &series{
		l:        l,
		status:   f.status.WithLabelValues(status...),
		request:  f.latency.WithLabelValues(typed("request")...),
		upstream: f.latency.WithLabelValues(typed("upstream")...),
		apisix:   f.latency.WithLabelValues(typed("apisix")...),
		ingress:  f.bandwidth.WithLabelValues(typed("ingress")...),
		egress:   f.bandwidth.WithLabelValues(typed("egress")...),
	}
	f.cache[l] = s
	return s
}

// SetModifyIndexes records the highest modifiedIndex per resource key
// ("routes", "upstreams"…) of the config served; apisix_etcd_modify_indexes
// exports them with APISIX's keys and their maximum as max_modify_index.
func (f *Factory) SetModifyIndexes(m map[string]int64) { f.modify.Store(&m) }

// modifyKeys are the resource keys APISIX 2.14 exports, in its order;
// besides them it exports prev_index and x_etcd_index (the store's
// revision), which SetModifyIndexes may set too.
var modifyKeys = []string{"routes", "services", "ssls", "consumers", "global_rules", "upstreams", "stream_routes", "protos"}

// Register adds collectors of the gateway's own metrics to the registry
// Handler exports.
func (f *Factory) Register(cs ...prometheus.Collector) { f.reg.MustRegister(cs...) }

// ServerStats are the engine's connection and request counts.
type ServerStats struct {
	Active, Accepted, Handled, Reading, Writing, Waiting, Requests int64
	// WebSockets are the open WebSocket tunnels (linkgate's own gauge).
	WebSockets int64
}

// Handler serves the registry at ExportURI; stats and reachable are read
// at scrape time.
func (f *Factory) Handler(stats func() ServerStats, reachable func() bool) http.Handler {
	f.reg.MustRegister(&processCollector{stats: stats, reachable: reachable, modify: &f.modify})
	export := promhttp.HandlerFor(f.reg, promhttp.HandlerOpts{})
	mux := http.NewServeMux()
	// Only GET (and HEAD) is routed, as APISIX's: other methods find no route, 404.
	mux.HandleFunc(ExportURI, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.NotFound(w, r)
			return
		}
		export.ServeHTTP(w, r)
	})
	return mux
}

var (
	descConns     = prometheus.NewDesc(prefix+"nginx_http_current_connections", "Number of HTTP connections", []string{"state"}, nil)
	descRequests  = prometheus.NewDesc(prefix+"http_requests_total", "The total number of client requests since APISIX started", nil, nil)
	descReachable = prometheus.NewDesc(prefix+"etcd_reachable", "Config server etcd reachable from APISIX, 0 is unreachable", nil, nil)
	descModify    = prometheus.NewDesc(prefix+"etcd_modify_indexes", "Etcd modify index for APISIX keys", []string{"key"}, nil)
	descNodeInfo  = prometheus.NewDesc(prefix+"node_info", "Info of APISIX node", []string{"hostname"}, nil)
	descErrors    = prometheus.NewDesc(prefix+"nginx_metric_errors_total", "Number of nginx-lua-prometheus errors", nil, nil)
	descTunnels   = prometheus.NewDesc("linkgate_websocket_tunnels", "Number of open WebSocket tunnels (each is also counted in apisix_http_status with code 101 when it ends)", nil, nil)
)

// processCollector reads the gauges that are not per request.
type processCollector struct {
	stats     func() ServerStats
	reachable func() bool
	modify    *atomic.Pointer[map[string]int64]
}

func (c *processCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descConns, descRequests, descReachable, descModify, descNodeInfo, descErrors, descTunnels} {
		ch <- d
	}
}

func (c *processCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	for _, st := range []struct {
		name string
		v    int64
	}{{"active", s.Active}, {"accepted", s.Accepted}, {"handled", s.Handled}, {"reading", s.Reading}, {"writing", s.Writing}, {"waiting", s.Waiting}} {
		ch <- prometheus.MustNewConstMetric(descConns, prometheus.GaugeValue, float64(st.v), st.name)
	}
	ch <- prometheus.MustNewConstMetric(descRequests, prometheus.GaugeValue, float64(s.Requests))
	reach := 0.0
	if c.reachable() {
		reach = 1
	}
	ch <- prometheus.MustNewConstMetric(descReachable, prometheus.GaugeValue, reach)
	var idx map[string]int64
	if p := c.modify.Load(); p != nil {
		idx = *p
	}
	var top int64
	for _, k := range modifyKeys {
		top = max(top, idx[k])
		ch <- prometheus.MustNewConstMetric(descModify, prometheus.GaugeValue, float64(idx[k]), k)
	}
	ch <- prometheus.MustNewConstMetric(descModify, prometheus.GaugeValue, float64(top), "max_modify_index")
	for _, k := range []string{"prev_index", "x_etcd_index"} {
		if v, ok := idx[k]; ok {
			ch <- prometheus.MustNewConstMetric(descModify, prometheus.GaugeValue, float64(v), k)
		}
	}
	host, _ := os.Hostname()
	ch <- prometheus.MustNewConstMetric(descNodeInfo, prometheus.GaugeValue, 1, host)
	ch <- prometheus.MustNewConstMetric(descErrors, prometheus.CounterValue, 0)
	ch <- prometheus.MustNewConstMetric(descTunnels, prometheus.GaugeValue, float64(s.WebSockets))
}
