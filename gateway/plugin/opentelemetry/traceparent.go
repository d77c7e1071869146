package opentelemetry

import (
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// traceparent is a W3C Trace Context traceparent header.
type traceparent struct {
	traceID trace.TraceID
	spanID  trace.SpanID
	flags   byte // sampled (0x01) and random (0x02) only
}

const traceparentLen = 55 // 00-<32 hex>-<16 hex>-<2 hex>

// parseTraceparent reads a traceparent header as the SDK's
// propagation.TraceContext does (FuzzTraceparent compares them), without
// allocating: lowercase hex parts, version ff refused, version 00 with no
// extra part and no reserved flag, neither id all zero.
func parseTraceparent(h string) (traceparent, bool) {
	var tp traceparent
	var ver, flags [1]byte
	if h == "" || !cutHex(ver[:], &h) || ver[0] == 0xff || !cutHex(tp.traceID[:], &h) || !cutHex(tp.spanID[:], &h) || !cutHex(flags[:], &h) {
		return traceparent{}, false
	}
	if ver[0] == 0 && (h != "" || flags[0] > 3) {
		return traceparent{}, false
	}
	tp.flags = flags[0] & 3
	if !tp.traceID.IsValid() || !tp.spanID.IsValid() {
		return traceparent{}, false
	}
	return tp, true
}

// cutHex decodes the part of *h before the next '-' into dst and leaves
// the rest in *h.
func cutHex(dst []byte, h *string) bool {
	part, rest, _ := strings.Cut(*h, "-")
	*h = rest
	if len(part) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := unhex(part[2*i])
		lo, ok2 := unhex(part[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

const hexDigits = "0123456789abcdef"

// appendTraceparent appends a version 00 traceparent.
func appendTraceparent(b []byte, tid trace.TraceID, sid trace.SpanID, flags byte) []byte {
	b = append(b, "00"...)
	for _, part := range [][]byte{tid[:], sid[:], {flags}} {
		b = append(b, '-')
		for _, x := range part {
			b = append(b, hexDigits[x>>4], hexDigits[x&0xf])
		}
	}
	return b
}
