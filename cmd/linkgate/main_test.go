package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/internal/syncbuf"
)

// runCLI runs the real run() in-process and returns its output and exit code.
func runCLI(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, func(k string) string { return env[k] }, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), cli.ExitCode(err)
}

// runCmd runs linkgate with args and stdin, and returns stdout, stderr
// and the error.
func runCmd(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut syncbuf.Buffer
	err := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestRunDispatch(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"no command", nil, 2, "", "Usage: linkgate <command>"},
		{"unknown", []string{"frobnicate"}, 2, "", "Commands:"},
		{"help", []string{"help"}, 0, "Commands:", ""},
		{"--help", []string{"--help"}, 0, "version", ""},
		{"version", []string{"version"}, 0, "linkgate dev commit unknown go", ""},
		{"--version", []string{"--version"}, 0, "linkgate dev", ""},
		{"version extra", []string{"version", "x"}, 2, "", ""},
		{"help version", []string{"help", "version"}, 0, "", "Usage: linkgate version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, nil, tt.args...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr %q", code, tt.wantCode, errOut)
			}
			if !strings.Contains(out, tt.wantOut) || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stdout %q stderr %q; want them to contain %q and %q", out, errOut, tt.wantOut, tt.wantErr)
			}
		})
	}
}

// Every command answers --help with exit status 0 and a usage line.
func TestEveryCommandAnswersHelp(t *testing.T) {
	for name := range commands {
		t.Run(name, func(t *testing.T) {
			_, errOut, code := runCLI(t, nil, name, "--help")
			if code != 0 || !strings.Contains(errOut, "Usage: linkgate "+name) {
				t.Errorf("%s --help: exit %d, stderr %q", name, code, errOut)
			}
		})
	}
}
