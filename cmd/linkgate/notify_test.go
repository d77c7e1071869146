package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/syncbuf"
)

// notifySocket is a systemd notify socket: every datagram sent to it is
// delivered on msgs.
type notifySocket struct {
	path string
	msgs chan string
}

func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	dir, err := os.MkdirTemp("", "sd") // short: a unix socket path has 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &notifySocket{path: filepath.Join(dir, "notify"), msgs: make(chan string, 1024)}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: s.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(s.msgs)
				return
			}
			s.msgs <- string(buf[:n])
		}
	}()
	return s
}

// next returns the next message that starts with prefix, skipping others,
// and fails the test after timeout.
func (s *notifySocket) next(t *testing.T, prefix string, timeout time.Duration, logs func() string) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				t.Fatalf("notify socket closed before %q", prefix)
			}
			if strings.HasPrefix(m, prefix) {
				return m
			}
		case <-deadline:
			t.Fatalf("no %q on the notify socket within %v:\n%s", prefix, timeout, logs())
		}
	}
}

var statusAddrRE = regexp.MustCompile(`STATUS=\S+ on (127\.0\.0\.1:\d+)`)

// The binary under a Type=notify unit, as systemd runs it: READY=1 once it
// answers on its listener, WATCHDOG=1 pings while WatchdogSec is set,
// STOPPING=1 on SIGTERM, then a clean exit.
func TestSystemdNotify(t *testing.T) {
	bin, err := buildLinkgate()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		args  []string
		probe string // a path that must answer the moment READY=1 arrives
	}{
		{"serve", []string{"serve", "--addr", "127.0.0.1:0", "--store", "pebble:" + filepath.Join(dir, "links")}, "/healthz"},
		{"gateway", []string{"gateway", "--listen", "127.0.0.1:0", "--listen-tls", "127.0.0.1:0", "--prometheus-listen", "", "--config-store", "bolt:" + filepath.Join(dir, "gateway.db")}, "/apisix/admin/routes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := listenNotify(t)
			cmd := exec.Command(bin, tc.args...)
			// WATCHDOG_USEC as systemd sets it for WatchdogSec=0.4s.
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "NOTIFY_SOCKET=" + sock.path, "WATCHDOG_USEC=400000"}
			var logs syncbuf.Buffer
			cmd.Stdout, cmd.Stderr = &logs, &logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() { cmd.Process.Kill() })

			ready := sock.next(t, "READY=1", 60*time.Second, logs.String)
			m := statusAddrRE.FindStringSubmatch(ready)
			if m == nil {
				t.Fatalf("READY without the listen address in STATUS: %q", ready)
			}
			resp, err := http.Get("http://" + m[1] + tc.probe)
			if err != nil {
				t.Fatalf("READY=1 sent before the listener answers: %v", err)
			}
			resp.Body.Close()
			for range 2 {
				sock.next(t, "WATCHDOG=1", 10*time.Second, logs.String)
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			sock.next(t, "STOPPING=1", 20*time.Second, logs.String)
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no exit 30 s after SIGTERM:\n%s", logs.String())
			}
		})
	}
}

// The watchdog pings only while the probe succeeds: a process that runs
// but no longer serves is left for systemd to restart.
func TestWatchdogNeedsProbe(t *testing.T) {
	for _, tc := range []struct {
		name  string
		probe error
		pings bool
	}{{"probe answers", nil, true}, {"probe fails", errors.New("no answer"), false}} {
		t.Run(tc.name, func(t *testing.T) {
			sock := listenNotify(t)
			t.Setenv("NOTIFY_SOCKET", sock.path)
			t.Setenv("WATCHDOG_USEC", "100000")
			sd := notifyReady(slog.New(slog.NewTextHandler(io.Discard, nil)), "test", func(context.Context) error { return tc.probe })
			sock.next(t, "READY=1", 5*time.Second, func() string { return "" })
			got := false
			timeout := time.After(time.Second) // 20 intervals
		wait:
			for {
				select {
				case m := <-sock.msgs:
					if m == "WATCHDOG=1" {
						got = true
						break wait
					}
				case <-timeout:
					break wait
				}
			}
			sd.Stopping()
			if got != tc.pings {
				t.Errorf("watchdog pinged: %v, want %v", got, tc.pings)
			}
			sock.next(t, "STOPPING=1", 5*time.Second, func() string { return "" })
		})
	}
}

// Without NOTIFY_SOCKET (not under systemd) nothing is sent and nothing runs.
func TestNotifyOutsideSystemd(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	sd := notifyReady(slog.New(slog.NewTextHandler(io.Discard, nil)), "test", nil)
	if sd.done != nil {
		t.Error("watchdog started without systemd")
	}
	sd.Stopping()
}
