package bench_test

import (
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/bench"
)

func TestFormatUnits(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{bench.FormatTimeUS(812), "812.00us"},
		{bench.FormatTimeUS(849.99), "849.99us"},
		{bench.FormatTimeUS(850), "0.85ms"},
		{bench.FormatTimeUS(309250), "309.25ms"},
		{bench.FormatTimeUS(4.41e6), "4.41s"},
		{bench.FormatTimeUS(90e6), "1.50m"},
		{bench.FormatTimeS(20), "20s"},
		{bench.FormatTimeS(3600), "60m"}, // wrk never reaches its last unit
		{bench.FormatMetric(2500), "2.50k"},
		{bench.FormatMetric(12), "12.00"},
		{bench.FormatBinary(11471000), "10.94M"},
		{bench.FormatBinary(1023), "1.00K"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30", 30 * time.Second, true},
		{"30s", 30 * time.Second, true},
		{"5m", 5 * time.Minute, true},
		{"1h", time.Hour, true},
		{"1H", time.Hour, true},
		{"250ms", 250 * time.Millisecond, true},
		{"1m30s", 90 * time.Second, true},
		{"1.5s", 1500 * time.Millisecond, true},
		{"", 0, false},
		{"-5s", 0, false},
		{"5x", 0, false},
		{"99999999999999999999h", 0, false},
	}
	for _, tt := range tests {
		got, err := bench.ParseDuration(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v", tt.in, got, err)
		}
	}
}

func TestParseMetric(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"100", 100, true},
		{"1k", 1000, true},
		{"1.5K", 1500, true},
		{"2M", 2e6, true},
		{"2m", 2e6, true},
		{"0", 0, true},
		{"", 0, false},
		{"-1", 0, false},
		{"abc", 0, false},
		{"1kk", 0, false},
	}
	for _, tt := range tests {
		got, err := bench.ParseMetric(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseMetric(%q) = %v, %v", tt.in, got, err)
		}
	}
}

func TestParseHeader(t *testing.T) {
	h, err := bench.ParseHeader("Content-Type:  application/json ")
	if err != nil || h.Name != "Content-Type" || h.Value != "application/json" {
		t.Errorf("%+v %v", h, err)
	}
	for _, bad := range []string{"nocolon", ": x", "A B: c", "X: a\r\nY: b"} {
		if _, err := bench.ParseHeader(bad); err == nil {
			t.Errorf("ParseHeader(%q) accepted", bad)
		}
	}
}

func TestAppendRequest(t *testing.T) {
	got := string(bench.AppendRequest(nil, "POST", "/shortenURL",
		bench.Fields{{Name: "Content-Type", Value: "application/json"}, {Name: "Host", Value: "h:1"}, {Name: "Content-Length", Value: "99"}},
		[]byte(`{"a":1}`)))
	want := "POST /shortenURL HTTP/1.1\r\nHost: h:1\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"30", "5m", "1h", "250ms", "1m30s", "-1s", "9999999999999h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := bench.ParseDuration(s)
		if err == nil && d < 0 {
			t.Fatalf("ParseDuration(%q) = %v: negative", s, d)
		}
	})
}

func FuzzParseMetric(f *testing.F) {
	for _, s := range []string{"100", "1k", "2.5M", "1e3", ".", "1kk"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := bench.ParseMetric(s)
		if err == nil && (v < 0 || v != v) {
			t.Fatalf("ParseMetric(%q) = %v", s, v)
		}
	})
}

// FuzzParseHeader: a -H value is accepted only as one header line that
// cannot split the request (no CR or LF, a name without spaces), and the
// request built with it frames as one request.
func FuzzParseHeader(f *testing.F) {
	for _, s := range []string{"X-Test: yes", "Host:h", ":x", "A B: c", "X: a\r\nY: b", "X:", "  X  :  v  "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := bench.ParseHeader(s)
		if err != nil {
			return
		}
		if h.Name == "" || strings.ContainsAny(h.Name+h.Value, "\r\n") || strings.ContainsAny(h.Name, " \t:") {
			t.Fatalf("ParseHeader(%q) = %+v", s, h)
		}
		req := bench.AppendRequest(nil, "GET", "/", bench.Fields{h}, nil)
		if n := strings.Count(string(req), "\r\n\r\n"); n != 1 || !strings.HasSuffix(string(req), "\r\n\r\n") {
			t.Fatalf("-H %q: request %q", s, req)
		}
	})
}

// FuzzParseScenario: a scenario parses to a known name with a redirect
// share within 0–100%.
func FuzzParseScenario(f *testing.F) {
	for _, s := range []string{"shorten", "redirect", "mixed", "mixed:90", "mixed:101", "mixed:-1", "redirect:5", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc, err := bench.ParseScenario(s)
		if err == nil && (sc.RedirectPercent < 0 || sc.RedirectPercent > 100 ||
			(sc.Name != "shorten" && sc.Name != "redirect" && sc.Name != "mixed")) {
			t.Fatalf("ParseScenario(%q) = %+v", s, sc)
		}
	})
}
