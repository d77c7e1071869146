//go:build !functiononly

package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkgate/linkgate/gateway"
)

var (
	descSkipped = prometheus.NewDesc("linkgate_gateway_skipped_resources",
		"Stored resources the gateway does not serve now, by reason (invalid, unknown_plugin, unsupported, missing_reference, plugin_error, panic)",
		[]string{"reason"}, nil)
	descReloadPanics = prometheus.NewDesc("linkgate_gateway_reload_panics_total",
		"Panics recovered while loading the configuration (each is logged with its stack)", nil, nil)
)

// reloadCollector exports the reloader's counts at scrape time.
type reloadCollector struct{ r *gateway.Reloader }

func (c reloadCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSkipped
	ch <- descReloadPanics
}

func (c reloadCollector) Collect(ch chan<- prometheus.Metric) {
	skipped := c.r.Skipped()
	for _, reason := range []string{gateway.SkipInvalid, gateway.SkipUnknownPlugin, gateway.SkipUnsupported,
		gateway.SkipMissingRef, gateway.SkipPluginError, gateway.SkipPanic} {
		ch <- prometheus.MustNewConstMetric(descSkipped, prometheus.GaugeValue, float64(skipped[reason]), reason)
	}
	ch <- prometheus.MustNewConstMetric(descReloadPanics, prometheus.CounterValue, float64(c.r.Panics()))
}
