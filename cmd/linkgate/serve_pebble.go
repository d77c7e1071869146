//go:build !nopebble

package main

import (
	"context"
	"log/slog"
	"sync/atomic"

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

// startStoreControl answers backups of the embedded store on its control
// socket while serving, and the server's address once it is set (for a
// command that finds the store held: lockedHint); the returned functions
// stop it and set the address.
func startStoreControl(ctx context.Context, logger *slog.Logger, raw shortener.Store) (stop func(), setURL func(string)) {
	s, ok := raw.(*pebble.Store)
	if !ok {
		return func() {}, func(string) {}
	}
	var url atomic.Pointer[string]
	stop, err := serveControl(ctx, logger, s, func() string {
		if u := url.Load(); u != nil {
			return *u
		}
		return ""
	})
	if err != nil {
		logger.Warn("no control socket: linkgate store backup cannot reach this server", "error", err)
		return func() {}, func(string) {}
	}
	return stop, func(u string) { url.Store(&u) }
}
