//go:build nopebble

package main

// Built with -tags nopebble (the Lambda bootstrap, scripts/lambda-package.sh):
// no embedded store is linked, a function keeps its links in DynamoDB.

import (
	"context"
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkgate/linkgate/shortener"
)

func openPebble(ctx context.Context, logger *slog.Logger, dir, old string, minFree int64) (shortener.Store, error) {
	return nil, errors.New("this build has no embedded store (built with -tags nopebble, as the Lambda bootstrap is); use --store dynamodb:TABLE")
}

func registerStoreMetrics(shortener.Store, prometheus.Registerer) {}

func startStoreControl(context.Context, *slog.Logger, shortener.Store) (func(), func(string)) {
	return func() {}, func(string) {}
}
