//go:build !nopebble

package main

import (
	"context"
	"github.com/prometheus/client_golang/prometheus"
	"log/slog"

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

// startStoreControl answers backups of the embedded store on its control
// socket while serving; the returned function stops it.
func startStoreControl(ctx context.Context, logger *slog.Logger, raw shortener.Store) func() {
	s, ok := raw.(*pebble.Store)
	if !ok {
		return func() {}
	}
	stop, err := serveControl(ctx, logger, s)
	if err != nil {
		logger.Warn("no control socket: linkgate store backup cannot reach this server", "error", err)
		return func() {}
	}
	return stop
}
