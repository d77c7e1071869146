package cache

import (
	"fmt"

	"github.com/maypok86/otter/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the cache's Prometheus metrics. The counters exist (and
// count) whether or not they are registered, so the hot path has no
// branches for it.
type metrics struct {
	hits, negativeHits, misses prometheus.Counter
	refreshFailures            prometheus.Counter
	evictions                  *prometheus.CounterVec
	sizeEvictions, expirations prometheus.Counter
	reg                        prometheus.Registerer
	collectors                 []prometheus.Collector
}

func newMetrics() *metrics {
	m := &metrics{
		hits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "linkgate_cache_hits_total",
			Help: "Link lookups answered from the read cache with a link.",
		}),
		negativeHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "linkgate_cache_negative_hits_total",
			Help: "Link lookups answered from the read cache with a remembered miss (no such link).",
		}),
		misses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "linkgate_cache_misses_total",
			Help: "Link lookups the read cache passed to the store.",
		}),
		refreshFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "linkgate_cache_refresh_failures_total",
			Help: "Background reloads of cached links that failed (the cached link is served until its TTL).",
		}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "linkgate_cache_evictions_total",
			Help: "Entries the read cache dropped by itself, by cause: size (to make room) or expired (past the cache TTL).",
		}, []string{"cause"}),
	}
	m.sizeEvictions = m.evictions.WithLabelValues("size")
	m.expirations = m.evictions.WithLabelValues("expired")
	return m
}

func (m *metrics) hit(found bool) {
	if found {
		m.hits.Inc()
	} else {
		m.negativeHits.Inc()
	}
}

// deleted is the cache's OnAtomicDeletion: it runs under a bucket lock, so
// it only counts.
func (m *metrics) deleted(e otter.DeletionEvent[string, entry]) {
	switch e.Cause {
	case otter.CauseOverflow:
		m.sizeEvictions.Inc()
	case otter.CauseExpiration:
		m.expirations.Inc()
	}
}

func (m *metrics) register(reg prometheus.Registerer, entries func() float64) error {
	m.reg = reg
	m.collectors = []prometheus.Collector{m.hits, m.negativeHits, m.misses, m.refreshFailures, m.evictions,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "linkgate_cache_entries",
			Help: "Entries in the read cache (links and remembered misses), estimated.",
		}, entries),
	}
	for i, c := range m.collectors {
		if err := reg.Register(c); err != nil {
			for _, done := range m.collectors[:i] {
				reg.Unregister(done)
			}
			return fmt.Errorf("register cache metrics: %w", err)
		}
	}
	return nil
}

func (m *metrics) unregister() {
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
}
