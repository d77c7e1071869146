package extension_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/syncbuf"
	"github.com/linkgate/linkgate/lambda/extension"
)

type running struct {
	done   chan error
	out    *syncbuf.Buffer // EMF lines
	logs   *syncbuf.Buffer
	cancel context.CancelFunc
}

func startExtension(t *testing.T, f *fakeAPI, mutate func(*extension.Config)) *running {
	t.Helper()
	r := &running{done: make(chan error, 1), out: &syncbuf.Buffer{}, logs: &syncbuf.Buffer{}}
	cfg := extension.Config{
		Name:               "linkgate-extension",
		RuntimeAPI:         f.addr(),
		TelemetryAddr:      "127.0.0.1:0",
		TelemetryTimeoutMs: 25,
		FlushInterval:      time.Hour,
		Namespace:          "linkgate/Lambda",
		Out:                r.out,
		Logger:             slog.New(slog.NewTextHandler(r.logs, nil)),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- extension.Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Error("extension did not stop")
		}
	})
	return r
}

func (r *running) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for Cleanup
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("extension did not return; logs:\n%s", r.logs)
		return nil
	}
}

// emf is what the EMF lines said, summed over lines.
type emf struct {
	lines    int
	function string
	values   map[string][]float64 // metric → values
	units    map[string]string
}

// parseEMF checks every line is a valid EMF document and sums them.
func parseEMF(t *testing.T, out string) emf {
	t.Helper()
	e := emf{values: map[string][]float64{}, units: map[string]string{}}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		e.lines++
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &doc); err != nil {
			t.Fatalf("EMF line %q: %v", sc.Text(), err)
		}
		var meta struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		}
		if err := json.Unmarshal(doc["_aws"], &meta); err != nil || len(meta.CloudWatchMetrics) != 1 {
			t.Fatalf("EMF _aws %s: %v", doc["_aws"], err)
		}
		if d := time.Since(time.UnixMilli(meta.Timestamp)); d < 0 || d > time.Minute {
			t.Errorf("EMF Timestamp %d is %v ago", meta.Timestamp, d)
		}
		dir := meta.CloudWatchMetrics[0]
		if dir.Namespace != "linkgate/Lambda" || fmt.Sprint(dir.Dimensions) != "[[FunctionName]]" {
			t.Errorf("EMF directive %+v", dir)
		}
		if err := json.Unmarshal(doc["FunctionName"], &e.function); err != nil {
			t.Errorf("EMF FunctionName %s: %v", doc["FunctionName"], err)
		}
		for _, m := range dir.Metrics {
			raw, ok := doc[m.Name]
			if !ok {
				t.Fatalf("EMF metric %s declared without a value: %s", m.Name, sc.Text())
			}
			var vs []float64
			if raw[0] == '[' {
				if err := json.Unmarshal(raw, &vs); err != nil || len(vs) == 0 || len(vs) > 100 {
					t.Fatalf("EMF %s = %s (%v)", m.Name, raw, err)
				}
			} else {
				var v float64
				if err := json.Unmarshal(raw, &v); err != nil {
					t.Fatalf("EMF %s = %s", m.Name, raw)
				}
				vs = []float64{v}
			}
			e.values[m.Name] = append(e.values[m.Name], vs...)
			e.units[m.Name] = m.Unit
		}
	}
	return e
}

func (e emf) sum(name string) float64 {
	var s float64
	for _, v := range e.values[name] {
		s += v
	}
	return s
}

func TestRunWithTelemetry(t *testing.T) {
	f := newFakeAPI(t)
	f.chunked = true
	r := startExtension(t, f, nil)
	f.waitNext(1)
	if got := fmt.Sprint(f.registered); got != "[INVOKE,SHUTDOWN]" {
		t.Fatalf("registered %s, want [INVOKE,SHUTDOWN]", got)
	}
	if got := fmt.Sprint(f.schemas); got != "[2025-01-29]" {
		t.Errorf("schemas %s", got)
	}

	ids := []string{"8476a536-e9f4-11e8-9739-2dfe598c3fcd", "9476a536-e9f4-11e8-9739-2dfe598c3fcd", "a476a536-e9f4-11e8-9739-2dfe598c3fcd"}
	// Invoke 1, a cold start: the extension must ask for the next event
	// before the platform said anything about the runtime finishing.
	f.send(invokeEvent(ids[0]))
	f.waitNext(2)
	start := time.Now()
	if resp := f.deliver(telemetryFor(ids[0], start, 10, 120.5)); resp.StatusCode != 200 {
		t.Fatalf("delivery answered %d", resp.StatusCode)
	}
	// Invoke 2: the runtime was done 30 ms before the extension was ready
	// (an extension that kept the environment busy).
	f.send(invokeEvent(ids[1]))
	f.waitNext(3)
	f.deliver(telemetryFor(ids[1], time.Now().Add(-40*time.Millisecond), 10, 0))
	// Invoke 3: its telemetry arrives only after SHUTDOWN was sent.
	f.send(invokeEvent(ids[2]))
	f.waitNext(4)
	start3 := time.Now()
	f.send(shutdownEvent())
	time.Sleep(30 * time.Millisecond) // deliberate: the fake platform delivers this telemetry late, after SHUTDOWN
	f.deliver(telemetryFor(ids[2], start3, 10, 0))

	if err := r.wait(t); err != nil {
		t.Fatalf("Run: %v; logs:\n%s", err, r.logs)
	}
	e := parseEMF(t, r.out.String())
	if e.function != "shortener" {
		t.Errorf("FunctionName %q", e.function)
	}
	checks := []struct {
		metric string
		want   []float64
	}{
		{"Invokes", []float64{3}},
		{"ColdStarts", []float64{1}},
		{"InitDuration", []float64{120.5}},
		{"Duration", []float64{10.2, 10.2, 10.2}},
		{"BilledDuration", []float64{11, 11, 11}},
		{"MaxMemoryUsed", []float64{31, 31, 31}},
	}
	for _, c := range checks {
		if got := e.values[c.metric]; !slices.Equal(got, c.want) {
			t.Errorf("%s = %v, want %v\n%s", c.metric, got, c.want, r.out)
		}
	}
	post := e.values["PostRuntimeDuration"]
	if len(post) != 3 || post[0] != 0 || post[2] != 0 || post[1] < 19 || post[1] > 1000 {
		t.Errorf("PostRuntimeDuration = %v, want [0, ≥19, 0]", post)
	}
	if n := len(e.values["ExtensionProcessingTime"]); n != 3 || e.units["ExtensionProcessingTime"] != "Microseconds" {
		t.Errorf("ExtensionProcessingTime: %d values, unit %q", n, e.units["ExtensionProcessingTime"])
	}
	if _, ok := e.values["TelemetryJunk"]; ok {
		t.Errorf("junk counted: %v", e.values["TelemetryJunk"])
	}
}

func TestRunTelemetryNotSupported(t *testing.T) {
	f := newFakeAPI(t)
	f.telemetry = "notsupported"
	r := startExtension(t, f, nil)
	f.send(invokeEvent("8476a536-e9f4-11e8-9739-2dfe598c3fcd"))
	f.send(invokeEvent("9476a536-e9f4-11e8-9739-2dfe598c3fcd"))
	f.send(shutdownEvent())
	if err := r.wait(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := fmt.Sprint(f.schemas); got != "[2025-01-29]" {
		t.Errorf("subscriptions %s, want one", got)
	}
	if n := strings.Count(r.logs.String(), "Telemetry.NotSupported"); n != 1 ||
		!strings.Contains(r.logs.String(), "running without telemetry: the Runtime API answered Telemetry.NotSupported") {
		t.Errorf("NotSupported said %d times, want once:\n%s", n, r.logs)
	}
	if c, err := net.Dial("tcp", f.listener); err == nil {
		c.Close()
		t.Errorf("telemetry listener %s still open without a subscription", f.listener)
	}
	e := parseEMF(t, r.out.String())
	if e.sum("Invokes") != 2 || len(e.values["ExtensionProcessingTime"]) != 2 {
		t.Errorf("EMF %v", e.values)
	}
	if _, ok := e.values["Duration"]; ok {
		t.Errorf("Duration without telemetry: %v", e.values["Duration"])
	}
}

func TestRunSchemaFallback(t *testing.T) {
	f := newFakeAPI(t)
	f.telemetry = "validation-first"
	r := startExtension(t, f, nil)
	f.waitNext(1)
	if got := fmt.Sprint(f.schemas); got != "[2025-01-29 2022-12-13]" {
		t.Errorf("schemas tried %s", got)
	}
	f.send(invokeEvent("8476a536-e9f4-11e8-9739-2dfe598c3fcd"))
	f.waitNext(2)
	f.deliver(telemetryFor("8476a536-e9f4-11e8-9739-2dfe598c3fcd", time.Now(), 3, 0))
	f.send(shutdownEvent())
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	if e := parseEMF(t, r.out.String()); len(e.values["Duration"]) != 1 {
		t.Errorf("Duration %v", e.values["Duration"])
	}
}

// Lambda Managed Instances refuse INVOKE for external extensions.
func TestRunShutdownOnlyFallback(t *testing.T) {
	f := newFakeAPI(t)
	f.registerErrors = []string{"Extension.InvalidEventType"}
	r := startExtension(t, f, nil)
	f.waitNext(1)
	if got := fmt.Sprint(f.registered); got != "[INVOKE,SHUTDOWN SHUTDOWN]" {
		t.Errorf("registered %s", got)
	}
	f.deliver(telemetryFor("8476a536-e9f4-11e8-9739-2dfe598c3fcd", time.Now(), 3, 50))
	f.send(shutdownEvent())
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	e := parseEMF(t, r.out.String())
	if len(e.values["Duration"]) != 1 || e.sum("ColdStarts") != 1 || e.sum("Invokes") != 0 {
		t.Errorf("EMF %v", e.values)
	}
}

func TestRunConfigInvalid(t *testing.T) {
	f := newFakeAPI(t)
	r := startExtension(t, f, func(c *extension.Config) { c.TelemetryTimeoutMs = 5 })
	err := r.wait(t)
	if err == nil || !strings.Contains(err.Error(), "telemetry timeout") {
		t.Fatalf("Run = %v, want a configuration error", err)
	}
	if got := fmt.Sprint(f.errorsPosted); got != "[init/error Extension.ConfigInvalid]" {
		t.Errorf("errors posted %s", got)
	}
	if f.nextCalls != 0 {
		t.Errorf("asked for events after a failed init")
	}
}

func TestRunProtocolError(t *testing.T) {
	f := newFakeAPI(t)
	r := startExtension(t, f, func(c *extension.Config) { c.TelemetryAddr = "" })
	f.send("this is not an event")
	err := r.wait(t)
	if err == nil {
		t.Fatal("Run returned nil after a malformed event")
	}
	if got := fmt.Sprint(f.errorsPosted); got != "[exit/error Extension.ProtocolError]" {
		t.Errorf("errors posted %s", got)
	}
}

func TestRunCancel(t *testing.T) {
	f := newFakeAPI(t)
	r := startExtension(t, f, func(c *extension.Config) { c.TelemetryAddr = "" })
	f.send(invokeEvent("8476a536-e9f4-11e8-9739-2dfe598c3fcd"))
	f.waitNext(2)
	r.cancel()
	if err := r.wait(t); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if e := parseEMF(t, r.out.String()); e.sum("Invokes") != 1 {
		t.Errorf("not flushed on cancel: %q", r.out)
	}
}

func TestRunTelemetryJunk(t *testing.T) {
	f := newFakeAPI(t)
	r := startExtension(t, f, nil)
	f.waitNext(1)
	raw := func(s string) string {
		c, err := net.Dial("tcp", f.listener)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte(s))
		c.(*net.TCPConn).CloseWrite()
		var b bytes.Buffer
		b.ReadFrom(c)
		return b.String()
	}
	if got := raw("GARBAGE\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 400") {
		t.Errorf("garbage answered %q", got)
	}
	if resp := f.deliver(`[{"time":`); resp.StatusCode != 400 {
		t.Errorf("bad JSON answered %d", resp.StatusCode)
	}
	resp, err := http.Get("http://" + f.listener + "/")
	if err != nil || resp.StatusCode != 405 {
		t.Errorf("GET answered %v %v", resp, err)
	}
	f.send(invokeEvent("8476a536-e9f4-11e8-9739-2dfe598c3fcd"))
	f.waitNext(2)
	if resp := f.deliver(telemetryFor("8476a536-e9f4-11e8-9739-2dfe598c3fcd", time.Now(), 3, 0)); resp.StatusCode != 200 {
		t.Errorf("good batch after junk answered %d", resp.StatusCode)
	}
	f.send(shutdownEvent())
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	e := parseEMF(t, r.out.String())
	if e.sum("TelemetryJunk") != 3 || len(e.values["Duration"]) != 1 {
		t.Errorf("junk %v, durations %v", e.values["TelemetryJunk"], e.values["Duration"])
	}
}
