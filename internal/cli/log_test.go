package cli_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/cli"
)

func TestNewLogger(t *testing.T) {
	var b strings.Builder
	l, err := cli.NewLogger(&b, "json", "warn")
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hidden")
	l.Warn("shown", "k", 1)
	if strings.Contains(b.String(), "hidden") || !strings.Contains(b.String(), `"msg":"shown"`) {
		t.Errorf("json/warn logger wrote %q", b.String())
	}
	for _, c := range [][2]string{{"xml", "info"}, {"text", "loud"}} {
		if _, err := cli.NewLogger(&b, c[0], c[1]); cli.ExitCode(err) != 2 {
			t.Errorf("NewLogger(%q, %q) = %v, want a usage error", c[0], c[1], err)
		}
	}
}

// Durations are strings in both formats, in groups too: "10s", not
// 10000000000 nanoseconds.
func TestLoggerDurations(t *testing.T) {
	tests := []struct {
		format string
		want   []string
	}{
		{"json", []string{`"timeout":"10s"`, `"took":"1.5ms"`, `"g":{"wait":"250µs"}`, `"n":10`}},
		{"text", []string{`timeout=10s`, `took=1.5ms`, `g.wait=250µs`, `n=10`}},
	}
	for _, tt := range tests {
		var b strings.Builder
		l, err := cli.NewLogger(&b, tt.format, "info")
		if err != nil {
			t.Fatal(err)
		}
		l.Info("stopping", "timeout", 10*time.Second, slog.Duration("took", 1500*time.Microsecond),
			slog.Group("g", "wait", 250*time.Microsecond), "n", 10)
		for _, w := range tt.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: %q lacks %s", tt.format, b.String(), w)
			}
		}
	}
}

func TestListFlag(t *testing.T) {
	l := cli.ListFlag{"a"}
	if err := l.Set(" http, https ,,"); err != nil || l.String() != "http,https" {
		t.Errorf("Set: %v %q", err, l.String())
	}
	if err := l.Set(" , "); err == nil {
		t.Error("empty list accepted")
	}
}
