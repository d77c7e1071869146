package extension

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
)

// Config configures Run.
type Config struct {
	// Name is the extension's name: its file name in /opt/extensions.
	Name string
	// RuntimeAPI is host:port of the Runtime API (AWS_LAMBDA_RUNTIME_API).
	RuntimeAPI string
	// TelemetryAddr is where the Telemetry API listener binds, e.g.
	// "sandbox.localdomain:0" in Lambda, "127.0.0.1:0" locally. Empty
	// disables telemetry. Deliveries are addressed to
	// http://sandbox.localdomain:PORT whatever the bind host.
	TelemetryAddr string
	// TelemetryTimeoutMs is the subscription's buffering timeout (25–30000):
	// how long Lambda holds records before delivering them.
	TelemetryTimeoutMs int
	// FlushInterval is how often metrics are written when they do not fill
	// a line first.
	FlushInterval time.Duration
	// Namespace is the CloudWatch namespace of the metrics.
	Namespace string
	// Out receives the EMF lines (stdout in Lambda).
	Out io.Writer
	// Logger receives human-readable messages (stderr in Lambda).
	Logger *slog.Logger
	// Invalid, if set, is a configuration problem found before Run: Run
	// registers, reports it to /extension/init/error as
	// Extension.ConfigInvalid and returns it.
	Invalid error
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.Invalid != nil {
		errs = append(errs, c.Invalid)
	}
	if c.TelemetryAddr != "" {
		if _, _, err := net.SplitHostPort(c.TelemetryAddr); err != nil {
			errs = append(errs, fmt.Errorf("telemetry address %q: %v", c.TelemetryAddr, err))
		}
	}
	if c.TelemetryTimeoutMs < 25 || c.TelemetryTimeoutMs > 30000 {
		errs = append(errs, fmt.Errorf("telemetry timeout %dms: must be 25–30000", c.TelemetryTimeoutMs))
	}
	if c.FlushInterval < time.Second {
		errs = append(errs, fmt.Errorf("flush interval %v: must be at least 1s", c.FlushInterval))
	}
	if c.Namespace == "" {
		errs = append(errs, errors.New("namespace must not be empty"))
	}
	return errors.Join(errs...)
}

// Error types reported to the Extensions API.
const (
	ErrorTypeConfig   = "Extension.ConfigInvalid"
	ErrorTypeProtocol = "Extension.ProtocolError"
)

// Telemetry subscription settings: the smallest buffers Lambda allows.
const (
	telemetryMaxItems = 1000
	telemetryMaxBytes = 256 << 10
	maxDelivery       = 4 << 20 // > 2×maxBytes plus metadata
)

// schemaVersions are tried in order: the newest first (required by Lambda
// Managed Instances), then the one every Lambda accepts.
var schemaVersions = []string{"2025-01-29", "2022-12-13"}

// shutdownBudget is how long SHUTDOWN may wait for the last telemetry; the
// platform allows about 2s for all extensions.
const shutdownBudget = 500 * time.Millisecond

// Run is the extension: it registers for INVOKE and SHUTDOWN, subscribes to
// platform telemetry, then loops on /event/next until SHUTDOWN, recording
// per-invoke metrics and writing them as EMF lines. On INVOKE it does
// nothing but note the time before asking for the next event: it never
// waits for telemetry, never touches the network on the invoke path.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	c := NewClient(cfg.RuntimeAPI)
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	defer c.Close()

	events, onlyShutdown := []string{"INVOKE", "SHUTDOWN"}, false
	err := c.Register(ctx, cfg.Name, events...)
	var ae *APIError
	if errors.As(err, &ae) && ae.Type == "Extension.InvalidEventType" {
		// Lambda Managed Instances let external extensions register only
		// for SHUTDOWN; per-invoke figures then come from telemetry alone.
		events, onlyShutdown = events[1:], true
		err = c.Register(ctx, cfg.Name, events...)
	}
	if err != nil {
		return err // without an identifier there is nobody to tell
	}
	if err := cfg.Validate(); err != nil {
		if rerr := c.InitError(ctx, ErrorTypeConfig, err); rerr != nil {
			log.Error("reporting init error", "error", rerr)
		}
		return fmt.Errorf("configuration: %w", err)
	}
	log.Info("registered", "name", cfg.Name, "function", c.FunctionName, "events", strings.Join(events, ","))

	m := &Metrics{Namespace: cfg.Namespace, FunctionName: c.FunctionName, Out: cfg.Out}
	srv := startTelemetry(ctx, c, cfg, m)
	if srv != nil {
		defer srv.Close()
	}

	flushCtx, stopFlush := context.WithCancel(ctx)
	defer stopFlush()
	go func() {
		t := time.NewTicker(cfg.FlushInterval)
		defer t.Stop()
		for {
			select {
			case <-flushCtx.Done():
				return
			case now := <-t.C:
				m.Flush(now)
			}
		}
	}()

	// Record when the request for the next event is on the wire: the
	// extension's real turnaround, and when Lambda counts it ready.
	ready := m.Ready
	for {
		ev, err := c.Next(ready)
		if err != nil {
			if ctx.Err() != nil {
				m.Flush(time.Now())
				return ctx.Err()
			}
			m.Flush(time.Now())
			err = fmt.Errorf("event loop: %w", err)
			if rerr := c.ExitError(context.Background(), ErrorTypeProtocol, err); rerr != nil {
				log.Error("reporting exit error", "error", rerr)
			}
			return err
		}
		switch ev.Type {
		case EventInvoke:
			m.Received(ev.RequestID, time.Now())
		case EventShutdown:
			if srv != nil {
				wait := shutdownBudget
				if d := time.Until(ev.Deadline()) - 200*time.Millisecond; !ev.Deadline().IsZero() && d < wait {
					wait = d
				}
				if wait > 0 && !m.WaitLastReport(wait) {
					log.Warn("shutdown: last platform.report did not arrive in time", "waited", wait)
				}
			}
			err := m.Flush(time.Now())
			log.Info("shutdown", "reason", string(ev.ShutdownReason), "telemetry_deliveries", deliveries(srv), "telemetry_junk", junk(srv), "only_shutdown", onlyShutdown)
			return err
		}
	}
}

func deliveries(s *TelemetryServer) int64 {
	if s == nil {
		return 0
	}
	return s.Deliveries()
}

func junk(s *TelemetryServer) int64 {
	if s == nil {
		return 0
	}
	return s.Junk()
}

// startTelemetry binds the listener and subscribes. Any failure leaves the
// extension running without telemetry, said once in the log: the function
// must keep working whatever happens to its observer.
func startTelemetry(ctx context.Context, c *Client, cfg Config, m *Metrics) *TelemetryServer {
	log := cfg.Logger
	if cfg.TelemetryAddr == "" {
		log.Info("telemetry disabled by configuration")
		return nil
	}
	ln, err := net.Listen("tcp", cfg.TelemetryAddr)
	if err != nil {
		log.Warn("running without telemetry: cannot listen (locally, set LINKGATE_EXTENSION_TELEMETRY_ADDR=127.0.0.1:0)", "error", err)
		return nil
	}
	srv := &TelemetryServer{Handle: m.HandleTelemetry, OnJunk: m.CountJunk, MaxBody: maxDelivery, MaxConns: 16}
	go srv.Serve(ln)
	port := ln.Addr().(*net.TCPAddr).Port
	sub := TelemetrySubscription{
		Types:     []string{"platform"},
		MaxItems:  telemetryMaxItems,
		MaxBytes:  telemetryMaxBytes,
		TimeoutMs: cfg.TelemetryTimeoutMs,
		URI:       "http://sandbox.localdomain:" + strconv.Itoa(port),
	}
	for _, v := range schemaVersions {
		sub.SchemaVersion = v
		err = c.SubscribeTelemetry(ctx, sub)
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != 400 {
			break
		}
	}
	switch {
	case err == nil:
		log.Info("subscribed to platform telemetry", "schema", sub.SchemaVersion, "listen", ln.Addr().String(), "timeout_ms", sub.TimeoutMs)
		return srv
	case errors.Is(err, ErrTelemetryNotSupported):
		log.Warn("running without telemetry: the Runtime API answered Telemetry.NotSupported (the runtime interface emulator does)")
	default:
		log.Warn("running without telemetry: subscription failed", "error", err)
	}
	srv.Close()
	return nil
}
