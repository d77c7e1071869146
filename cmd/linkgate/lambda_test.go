package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/internal/cli"
)

func TestLambdaMode(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"bare under Lambda refuses bolt", map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9", "LINKGATE_STORE": "bolt:/tmp/links.db"}, nil, 2, "embedded store"},
		{"bare under Lambda refuses pebble", map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9", "LINKGATE_STORE": "pebble:/tmp/links"}, nil, 2, "embedded store"},
		{"explicit, bad store", map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9"}, []string{"lambda", "--store", "redis:x"}, 2, "unknown store"},
		{"outside Lambda", nil, []string{"lambda"}, 2, "AWS_LAMBDA_RUNTIME_API is not set"},
		{"bad setting", map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9", "LINKGATE_REDIRECT_STATUS": "200"}, nil, 2, "redirect status 200"},
		{"no command outside Lambda is help", nil, nil, 2, "Usage: linkgate <command>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), tt.args, func(k string) string { return tt.env[k] }, strings.NewReader(""), &out, &errOut)
			cli.Exit(err, "linkgate", &errOut)
			if code := cli.ExitCode(err); code != tt.wantCode || !strings.Contains(errOut.String(), tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut.String(), tt.wantCode, tt.wantErr)
			}
		})
	}
}
