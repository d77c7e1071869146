package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkgate/linkgate/internal/accesslog"
)

// openAccessLog opens --access-log; nil when it is not set.
func openAccessLog(logger *slog.Logger, c serveConfig) (*accesslog.Log, error) {
	format, _ := accesslog.ParseFormat(c.accessLogFormat) // validated
	opts := accesslog.Options{Format: format, Logger: logger}
	switch c.accessLog {
	case "":
		return nil, nil
	case "stdout":
		return accesslog.New(c.stdout, opts), nil
	case "stderr":
		return accesslog.New(c.stderr, opts), nil
	}
	return accesslog.Open(c.accessLog, opts)
}

// closeAccessLog writes out what the access log holds and closes it.
func closeAccessLog(logger *slog.Logger, l *accesslog.Log) {
	if err := l.Close(); err != nil {
		logger.Error("close the access log", "error", err)
	}
}

// reopenOnHUP opens the access log's file again on every SIGHUP (after
// logrotate renamed it) until the returned function is called.
func reopenOnHUP(logger *slog.Logger, l *accesslog.Log) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				if err := l.Reopen(); err == nil {
					logger.Info("access log reopened")
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}

// registerAccessLogMetrics exports the access log's counters.
func registerAccessLogMetrics(reg prometheus.Registerer, stats func() accesslog.Stats) {
	counter := func(name, help string, f func(accesslog.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f(stats())) })
	}
	reg.MustRegister(
		counter("linkgate_access_log_lines_total", "Access log lines written (handed to the output).", func(s accesslog.Stats) uint64 { return s.Lines }),
		counter("linkgate_access_log_dropped_total", "Access log lines dropped: the buffer was full (the output is behind), never waited for.", func(s accesslog.Stats) uint64 { return s.Dropped }),
		counter("linkgate_access_log_write_errors_total", "Failed writes to the access log's output; the lines they held are lost.", func(s accesslog.Stats) uint64 { return s.WriteErrors }),
	)
}
