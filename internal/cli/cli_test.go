package cli_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/cli"
)

func TestEnvName(t *testing.T) {
	tests := []struct{ flag, want string }{
		{"addr", "LINKGATE_ADDR"},
		{"max-url-length", "LINKGATE_MAX_URL_LENGTH"},
		{"R", "LINKGATE_R"},
	}
	for _, tt := range tests {
		if got := cli.EnvName(tt.flag); got != tt.want {
			t.Errorf("EnvName(%q) = %q, want %q", tt.flag, got, tt.want)
		}
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		wantAddr string
		wantWait time.Duration
		wantCode int // exit code of the returned error
		wantRest []string
	}{
		{name: "defaults", wantAddr: ":8080", wantWait: time.Second},
		{name: "flag", args: []string{"--addr", ":1"}, wantAddr: ":1", wantWait: time.Second},
		{name: "env", env: map[string]string{"LINKGATE_ADDR": ":2", "LINKGATE_SHUTDOWN_WAIT": "3s"}, wantAddr: ":2", wantWait: 3 * time.Second},
		{name: "flag wins over env", args: []string{"-addr=:1"}, env: map[string]string{"LINKGATE_ADDR": ":2"}, wantAddr: ":1", wantWait: time.Second},
		{name: "empty env is unset", env: map[string]string{"LINKGATE_ADDR": ""}, wantAddr: ":8080", wantWait: time.Second},
		{name: "positional kept", args: []string{"--addr", ":1", "x", "y"}, wantAddr: ":1", wantWait: time.Second, wantRest: []string{"x", "y"}},
		{name: "bad env value", env: map[string]string{"LINKGATE_SHUTDOWN_WAIT": "soon"}, wantCode: 2},
		{name: "unknown flag", args: []string{"--nope"}, wantCode: 2},
		{name: "help", args: []string{"--help"}, wantCode: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			fs := cli.NewFlagSet("test", "test [flags]", "A test command.", &out)
			addr := fs.String("addr", ":8080", "listen `address`")
			wait := fs.Duration("shutdown-wait", time.Second, "how long to wait")
			err := cli.Parse(fs, tt.args, func(k string) string { return tt.env[k] })
			if got := cli.ExitCode(err); got != tt.wantCode {
				t.Fatalf("exit code %d (err %v), want %d", got, err, tt.wantCode)
			}
			if err != nil {
				if !strings.Contains(out.String(), "Usage: test [flags]") {
					t.Errorf("usage not printed on error; output %q", out.String())
				}
				return
			}
			if *addr != tt.wantAddr || *wait != tt.wantWait {
				t.Errorf("addr=%q wait=%v, want %q %v", *addr, *wait, tt.wantAddr, tt.wantWait)
			}
			if strings.Join(fs.Args(), " ") != strings.Join(tt.wantRest, " ") {
				t.Errorf("rest %q, want %q", fs.Args(), tt.wantRest)
			}
		})
	}
}

func TestUsageListsEnvironment(t *testing.T) {
	var out bytes.Buffer
	fs := cli.NewFlagSet("serve", "linkgate serve [flags]", "Serve links.", &out)
	fs.String("max-url-length", "2048", "longest accepted `URL` in bytes")
	fs.Bool("L", false, "print latency distribution")
	if err := cli.Parse(fs, []string{"-h"}, nil); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"Usage: linkgate serve [flags]", "Serve links.", "--max-url-length URL", "(default 2048)", "[$LINKGATE_MAX_URL_LENGTH]", "  -L\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, out.String())
		}
	}
}

func TestExit(t *testing.T) {
	tests := []struct {
		err      error
		wantCode int
		wantOut  string
	}{
		{nil, 0, ""},
		{flag.ErrHelp, 0, ""},
		{fmt.Errorf("wrapped: %w", cli.Usagef("bad -R %q", "x")), 2, "linkgate: wrapped: bad -R \"x\"\n"},
		{errors.New("boom"), 1, "linkgate: boom\n"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		if got := cli.Exit(tt.err, "linkgate", &out); got != tt.wantCode || out.String() != tt.wantOut {
			t.Errorf("Exit(%v) = %d %q, want %d %q", tt.err, got, out.String(), tt.wantCode, tt.wantOut)
		}
	}
}
