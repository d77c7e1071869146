package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// startDebug serves Go's profiles (net/http/pprof: CPU, heap, goroutines,
// block and mutex profiles, execution traces) on addr, a listener of its
// own so that the API never exposes them; "" serves nothing. The returned
// function stops it.
func startDebug(logger *slog.Logger, addr string) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("debug listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("debug listener", "error", err)
		}
	}()
	logger.Info("profiles served", "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
	return func() { srv.Close() }, nil
}
