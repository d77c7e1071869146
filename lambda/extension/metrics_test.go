package extension_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/linkgate/linkgate/lambda/extension"
)

func TestMetricsPostRuntime(t *testing.T) {
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ready := base.Add(10*time.Millisecond + 500*time.Microsecond) // the extension asked for the next event at .0105
	tests := []struct {
		name       string
		doneTime   string // platform.runtimeDone time
		id         string
		readyAfter bool // the record arrives before the extension is ready
		want       string
	}{
		{name: "done after ready (ms stamp)", doneTime: "2026-01-02T03:04:05.010Z", id: "r1", want: "[0]"},
		{name: "done before ready (ms stamp: counts from the end of its millisecond)", doneTime: "2026-01-02T03:04:05.005Z", id: "r1", want: "[4.5]"},
		{name: "done before ready (µs stamp)", doneTime: "2026-01-02T03:04:05.010200Z", id: "r1", want: "[0.3]"},
		{name: "record before ready", doneTime: "2026-01-02T03:04:05.005Z", id: "r1", readyAfter: true, want: "[4.5]"},
		{name: "unknown request", doneTime: "2026-01-02T03:04:05.005Z", id: "other", want: "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			m := &extension.Metrics{Namespace: "linkgate/Lambda", FunctionName: "f", Out: &out}
			m.Received([]byte("r1"), ready.Add(-20*time.Microsecond))
			if !tt.readyAfter {
				m.Ready(ready)
			}
			batch := fmt.Sprintf(`[{"time":%q,"type":"platform.runtimeDone","record":{"requestId":%q,"status":"success"}}]`, tt.doneTime, tt.id)
			if err := m.HandleTelemetry([]byte(batch)); err != nil {
				t.Fatal(err)
			}
			if tt.readyAfter {
				m.Ready(ready)
			}
			m.Ready(ready.Add(time.Second)) // a retried request: not counted again
			m.Flush(time.Now())
			e := parseEMF(t, out.String())
			got := "none"
			if v, ok := e.values["PostRuntimeDuration"]; ok {
				got = fmt.Sprint(v)
			}
			if got != tt.want {
				t.Errorf("PostRuntimeDuration %s, want %s", got, tt.want)
			}
			if v := e.values["ExtensionProcessingTime"]; fmt.Sprint(v) != "[20]" {
				t.Errorf("ExtensionProcessingTime %v, want [20]", v)
			}
		})
	}
}

func TestMetricsLinesHoldAtMost100Values(t *testing.T) {
	var out bytes.Buffer
	m := &extension.Metrics{Namespace: "linkgate/Lambda", FunctionName: "f", Out: &out}
	now := time.Now()
	for i := 0; i < 250; i++ {
		m.Received([]byte(fmt.Sprintf("id-%d", i)), now)
		m.Ready(now.Add(time.Duration(i) * time.Microsecond))
	}
	if err := m.Flush(now); err != nil {
		t.Fatal(err)
	}
	if err := m.Flush(now); err != nil { // nothing new: no line
		t.Fatal(err)
	}
	e := parseEMF(t, out.String())
	if e.lines != 3 || len(e.values["ExtensionProcessingTime"]) != 250 || e.sum("Invokes") != 250 {
		t.Errorf("%d lines, %d values, %v invokes", e.lines, len(e.values["ExtensionProcessingTime"]), e.sum("Invokes"))
	}
}

func TestMetricsInitCountedOnce(t *testing.T) {
	var out bytes.Buffer
	m := &extension.Metrics{Namespace: "linkgate/Lambda", FunctionName: "f", Out: &out}
	in, err := os.ReadFile(filepath.Join("testdata", "telemetry-batch.json"))
	if err != nil {
		t.Fatal(err)
	}
	// initReport and the report's initDurationMs describe the same init.
	if err := m.HandleTelemetry(in); err != nil {
		t.Fatal(err)
	}
	m.Flush(time.Now())
	e := parseEMF(t, out.String())
	for metric, want := range map[string]string{
		"ColdStarts": "[1]", "InitDuration": "[125.33]", "Duration": "[201.52]", "BilledDuration": "[202]",
		"MaxMemoryUsed": "[30]", "ExtensionOverhead": "[0.42]", "TelemetryDropped": "[123]",
	} {
		if got := fmt.Sprint(e.values[metric]); got != want {
			t.Errorf("%s = %s, want %s", metric, got, want)
		}
	}
}

func BenchmarkBatch(b *testing.B) {
	in, err := os.ReadFile(filepath.Join("testdata", "telemetry-batch.json"))
	if err != nil {
		b.Fatal(err)
	}
	var batch extension.Batch
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		batch.Reset(in)
		for batch.Next() {
		}
		if batch.Err() != nil {
			b.Fatal(batch.Err())
		}
	}
}

// BenchmarkInvokeAndTelemetry is the extension's whole per-invoke work:
// note the INVOKE, then read the invoke's platform records.
func BenchmarkInvokeAndTelemetry(b *testing.B) {
	m := &extension.Metrics{Namespace: "linkgate/Lambda", FunctionName: "f", Out: discard{}}
	id := []byte("8476a536-e9f4-11e8-9739-2dfe598c3fcd")
	batch := []byte(telemetryFor(string(id), time.Now(), 3, 0))
	b.ReportAllocs()
	for b.Loop() {
		now := time.Now()
		m.Received(id, now)
		m.Ready(now)
		if err := m.HandleTelemetry(batch); err != nil {
			b.Fatal(err)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
