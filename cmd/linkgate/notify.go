package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// sdNotifier speaks systemd's notify protocol (sd_notify(3)) for serve and
// gateway under a Type=notify unit (deploy/systemd): READY=1 once the
// command listens with its store open, WATCHDOG=1 every half WatchdogSec
// while a request to its own listener is answered, STOPPING=1 when it
// starts draining. Not under systemd (no NOTIFY_SOCKET) it does nothing.
type sdNotifier struct {
	logger *slog.Logger
	stop   context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// notifyReady sends READY=1 with status as the unit's STATUS, then starts
// the watchdog pings if the unit asks for them (WATCHDOG_USEC). A ping is
// sent only when probe succeeds within a quarter of the interval, so a
// process that still runs but no longer serves is restarted by systemd.
func notifyReady(logger *slog.Logger, status string, probe func(context.Context) error) *sdNotifier {
	n := &sdNotifier{logger: logger, stop: func() {}}
	sent, err := daemon.SdNotify(false, daemon.SdNotifyReady+"\nSTATUS="+status)
	if err != nil {
		logger.Warn("systemd notify", "error", err)
	}
	if !sent {
		return n
	}
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		logger.Warn("systemd watchdog", "error", err)
	}
	if interval <= 0 {
		return n
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.stop, n.done = cancel, make(chan struct{})
	go n.watchdog(ctx, interval/2, probe)
	logger.Info("systemd watchdog on", "interval", interval)
	return n
}

func (n *sdNotifier) watchdog(ctx context.Context, every time.Duration, probe func(context.Context) error) {
	defer close(n.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, every/2)
		err := probe(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			n.logger.Warn("watchdog: own listener does not answer; not pinging systemd", "error", err)
			continue
		}
		if _, err := daemon.SdNotify(false, daemon.SdNotifyWatchdog); err != nil {
			n.logger.Warn("systemd watchdog", "error", err)
		}
	}
}

// Stopping stops the watchdog pings (systemd watches a stopping service
// with TimeoutStopSec instead) and sends STOPPING=1. It is idempotent.
func (n *sdNotifier) Stopping() {
	n.once.Do(func() {
		n.stop()
		if n.done != nil {
			<-n.done
		}
		if _, err := daemon.SdNotify(false, daemon.SdNotifyStopping); err != nil {
			n.logger.Warn("systemd notify", "error", err)
		}
	})
}

// probeHTTP returns a probe that sends GET path to the listener at addr
// (its loopback address if it listens on every interface) and succeeds on
// any response when status is 0, else on that status.
func probeHTTP(addr net.Addr, path string, status int) func(context.Context) error {
	host, port, _ := net.SplitHostPort(addr.String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	url := "http://" + net.JoinHostPort(host, port) + path
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if status != 0 && resp.StatusCode != status {
			return fmt.Errorf("GET %s: %d", url, resp.StatusCode)
		}
		return nil
	}
}
