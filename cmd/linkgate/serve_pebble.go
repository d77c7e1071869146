//go:build !nopebble

package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/pebble"
)

// registerStoreMetrics exports the embedded store's own metrics (pebble's
// compactions, WAL fsyncs, cache, disk usage) on reg.
func registerStoreMetrics(raw shortener.Store, reg prometheus.Registerer) {
	if s, ok := raw.(*pebble.Store); ok {
		reg.MustRegister(pebble.NewCollector(s))
	}
}
