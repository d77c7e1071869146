package main

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/dynamodb"
	"github.com/linkgate/linkgate/shortener/geoip"
	"github.com/linkgate/linkgate/shortener/useragent"
	"github.com/linkgate/linkgate/shortener/visits"
)

// visitsConfig is the visit counting part of `linkgate serve`.
type visitsConfig struct {
	enabled bool
	cfg     visits.Config // FlushInterval, FlushLinks
	geoip   string
}

func (v visitsConfig) validate() error {
	if v.cfg.FlushInterval <= 0 {
		return fmt.Errorf("--visits-flush-interval must be positive")
	}
	if v.cfg.FlushLinks < 1 {
		return fmt.Errorf("--visits-flush-links must be at least 1")
	}
	return nil
}

// newVisits starts the visit aggregator over store, with the User-Agent
// classifier, the GeoIP database if one is configured, and its metrics on
// reg. The caller closes it (flushing everything) before the store, and
// closes geo, if not nil, after it.
func newVisits(logger *slog.Logger, v visitsConfig, store shortener.Store, reg prometheus.Registerer) (*visits.Aggregator, *geoip.DB, error) {
	cfg := v.cfg
	cfg.Store, cfg.Logger, cfg.Classifier = store, logger, useragent.New()
	var geo *geoip.DB
	if v.geoip != "" {
		var err error
		if geo, err = geoip.Open(v.geoip); err != nil {
			return nil, nil, fmt.Errorf("--geoip: %w", err)
		}
		cfg.Geo = geo
		logger.Info("GeoIP database loaded", "file", v.geoip)
	}
	a, err := visits.New(cfg)
	if err != nil {
		if geo != nil {
			geo.Close()
		}
		return nil, nil, err
	}
	m := func() visits.Metrics { return a.Metrics() }
	counter := func(name, help string, f func(visits.Metrics) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(m())) })
	}
	reg.MustRegister(
		counter("linkgate_visits_recorded_total", "Visits recorded by redirects.", func(m visits.Metrics) uint64 { return m.Recorded }),
		counter("linkgate_visits_dropped_total", "Visits dropped: the aggregator was full, or the store kept refusing a batch.", func(m visits.Metrics) uint64 { return m.Dropped }),
		counter("linkgate_visits_flushed_total", "Visits written to the store.", func(m visits.Metrics) uint64 { return m.FlushedVisits }),
		counter("linkgate_visits_flushes_total", "Batches of visits written to the store.", func(m visits.Metrics) uint64 { return m.Flushes }),
		counter("linkgate_visits_flush_errors_total", "Batch writes that failed (retried with the next batch).", func(m visits.Metrics) uint64 { return m.FlushErrors }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "linkgate_visits_pending_links", Help: "Links with visits not yet flushed."},
			func() float64 { return float64(m().PendingLinks) }),
	)
	return a, geo, nil
}

// registerVisitLogMetrics exports the counters of DynamoDB's visit log
// (docs/dynamodb.md): records written, their bytes (what they cost in
// write units, about one per KB), folds, migrated items of the old layout,
// and the links buffered.
func registerVisitLogMetrics(reg prometheus.Registerer, stats func() dynamodb.VisitLogStats) {
	counter := func(name, help string, f func(dynamodb.VisitLogStats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(stats())) })
	}
	reg.MustRegister(
		counter("linkgate_dynamodb_visit_records_total", "Visit log records written to DynamoDB.", func(s dynamodb.VisitLogStats) int64 { return s.Records }),
		counter("linkgate_dynamodb_visit_record_bytes_total", "Bytes of the visit log records written.", func(s dynamodb.VisitLogStats) int64 { return s.RecordBytes }),
		counter("linkgate_dynamodb_visit_write_errors_total", "Visit log record writes that failed (retried).", func(s dynamodb.VisitLogStats) int64 { return s.WriteErrors }),
		counter("linkgate_dynamodb_visit_folds_total", "Folds of the visit log into state items done by this process.", func(s dynamodb.VisitLogStats) int64 { return s.Folds }),
		counter("linkgate_dynamodb_visit_fold_errors_total", "Folds of the visit log that failed (retried).", func(s dynamodb.VisitLogStats) int64 { return s.FoldErrors }),
		counter("linkgate_dynamodb_visit_migrated_total", "Chunks of visit counters moved off link items of the old layout.", func(s dynamodb.VisitLogStats) int64 { return s.Migrated }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "linkgate_dynamodb_visit_buffered_links", Help: "Links with visits buffered for the next visit log record."},
			func() float64 { return float64(stats().BufferedLinks) }),
	)
}
