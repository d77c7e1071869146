package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/bench/agent"
)

func TestHandle(t *testing.T) {
	a := agent.NewAgent(slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now)
	step := func(start time.Time, d time.Duration) string {
		b, _ := json.Marshal(agent.Request{Version: agent.Version, Kind: agent.KindRun, Step: &agent.Step{
			URL: "http://127.0.0.1:1/", Threads: 1, Connections: 1, Rate: 10, Duration: agent.Duration(d),
			Timeout: agent.Duration(time.Second), StartAt: start}})
		return string(b)
	}
	tests := []struct {
		name, payload string
		deadline      time.Duration
		want          string
	}{
		{"clock", `{"version":1,"kind":"clock"}`, time.Minute, `"clock":{"unix_nano":`},
		{"not the protocol", `{"Records":[]}`, time.Minute, `"error":"decode: json: unknown field`},
		{"past the deadline", step(time.Now().Add(time.Second), 15*time.Minute), 14 * time.Minute, "after this invocation's deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tt.deadline)
			defer cancel()
			if got := string(handle(ctx, a, []byte(tt.payload))); !strings.Contains(got, tt.want) {
				t.Errorf("handle: %s, want %q in it", got, tt.want)
			}
		})
	}
}
