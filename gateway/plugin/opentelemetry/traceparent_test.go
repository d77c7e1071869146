package opentelemetry

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// parseTraceparent reads what the SDK's propagator reads, and
// appendTraceparent writes what it would write back.
func FuzzTraceparent(f *testing.F) {
	for _, s := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-04",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-extra",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"", "00", "0-1-2-3",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": h}))
		tp, ok := parseTraceparent(h)
		if ok != sc.IsValid() {
			t.Fatalf("%q: parsed %v, the SDK %v", h, ok, sc.IsValid())
		}
		if !ok {
			return
		}
		if tp.traceID != sc.TraceID() || tp.spanID != sc.SpanID() || tp.flags != byte(sc.TraceFlags()) {
			t.Fatalf("%q: %x %x %x, the SDK %v", h, tp.traceID, tp.spanID, tp.flags, sc)
		}
		carrier := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), carrier)
		if got := string(appendTraceparent(nil, tp.traceID, tp.spanID, tp.flags)); got != carrier["traceparent"] {
			t.Fatalf("%q: wrote %q, the SDK %q", h, got, carrier["traceparent"])
		}
	})
}
