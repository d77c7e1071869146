package cli_test

import (
	"strings"
	"testing"

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

func TestListFlag(t *testing.T) {
	l := cli.ListFlag{"a"}
	if err := l.Set(" http, https ,,"); err != nil || l.String() != "http,https" {
		t.Errorf("Set: %v %q", err, l.String())
	}
	if err := l.Set(" , "); err == nil {
		t.Error("empty list accepted")
	}
}
