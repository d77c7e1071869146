package cli

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// NewLogger returns the logger a command writes to w: format "text" (for
// people) or "json" (for log pipelines), at level debug, info, warn or
// error. Durations are written as Go writes them, "10s", "1.5ms", in both
// formats (slog's JSON handler alone writes nanoseconds: 10000000000).
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, Usagef("invalid log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: durationString}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, Usagef("invalid log format %q: want text or json", format)
}

// durationString writes a time.Duration attribute as its string.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// ListFlag is a comma-separated list flag: "http,https".
type ListFlag []string

func (l *ListFlag) String() string { return strings.Join(*l, ",") }

// Set replaces the list with the comma-separated items of v, trimmed; empty
// items are dropped.
func (l *ListFlag) Set(v string) error {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return fmt.Errorf("empty list")
	}
	*l = out
	return nil
}
