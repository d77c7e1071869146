//go:build !nopebble

package main

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/pebble"
)

// openPebble opens the embedded store in dir.
func openPebble(logger *slog.Logger, dir string) (shortener.Store, error) {
	return pebble.Open(dir, pebble.Options{Logger: logger})
}

// registerStoreMetrics exports the embedded store's own metrics (pebble's
// compactions, WAL fsyncs, cache, disk usage) on reg.
func registerStoreMetrics(raw shortener.Store, reg prometheus.Registerer) {
	if s, ok := raw.(*pebble.Store); ok {
		reg.MustRegister(pebble.NewCollector(s))
	}
}
