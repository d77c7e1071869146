package extension

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// valid reports whether data is one JSON document, by the scanner.
func valid(data []byte) bool {
	i := skipSpace(data, 0)
	_, end, err := scanValue(data, i, 0)
	return err == nil && skipSpace(data, end) == len(data)
}

func TestScanValue(t *testing.T) {
	tests := []string{
		`{}`, `[]`, ` [ ] `, `{"a":1}`, `{"a":[1,2,{"b":null}],"c":"d"}`, `"x"`, `"\u00e9\n\\"`, `-0.5e+10`, `0`, `true`, `false`, `null`,
		`{"a":1,}`, `[1,]`, `{"a" 1}`, `{a:1}`, `[1 2]`, `01`, `1.`, `.5`, `-`, `1e`, `"\x"`, `"\u12"`, "\"\x01\"", `"abc`, `[`, `{`, `]`, `{"a":1}}`,
		`nul`, `tru`, `[1]x`, ``, ` `, `{"a":{"b":[}}`, `[[[[]]]]`, `{"":""}`, `"\ud800"`, "\"\xff\"",
	}
	for _, tt := range tests {
		if got, want := valid([]byte(tt)), json.Valid([]byte(tt)); got != want {
			t.Errorf("valid(%q) = %v, json.Valid says %v", tt, got, want)
		}
	}
}

func TestScanDepth(t *testing.T) {
	for _, depth := range []int{maxDepth, maxDepth + 1} {
		doc := strings.Repeat("[", depth) + strings.Repeat("]", depth)
		if got, want := valid([]byte(doc)), json.Valid([]byte(doc)); got != want {
			t.Errorf("depth %d: valid %v, json.Valid %v", depth, got, want)
		}
	}
}

func FuzzScanValue(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e3,"x\u0041"],"b":{}}`, `[true,false,null]`, `"\ud83d\ude00"`, `-0`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := valid(data), json.Valid(data); got != want {
			t.Fatalf("valid(%q) = %v, json.Valid says %v", data, got, want)
		}
		// Every string the iterator hands out decodes like encoding/json.
		if !valid(data) || !utf8.Valid(data) {
			return
		}
		it := iterate(data, 0)
		for it.next() {
			var scratch []byte
			got, ok := it.m.str(&scratch)
			if !ok {
				continue
			}
			var want string
			if err := json.Unmarshal(it.m.value, &want); err != nil || string(got) != want {
				t.Fatalf("string %s: got %q, encoding/json %q (%v)", it.m.value, got, want, err)
			}
		}
	})
}

func TestParseEvent(t *testing.T) {
	tests := []struct {
		name, body string
		want       EventType
		id, reason string
		deadline   int64
		err        bool
	}{
		{name: "invoke", body: `{"eventType":"INVOKE","deadlineMs":1676051400000,"requestId":"3da1f2dc-3222-475e-9205-e2e6c6318895","invokedFunctionArn":"arn:aws:lambda:us-east-1:123456789012:function:f","tracing":{"type":"X-Amzn-Trace-Id","value":"Root=1"}}`,
			want: EventInvoke, id: "3da1f2dc-3222-475e-9205-e2e6c6318895", deadline: 1676051400000},
		{name: "shutdown", body: `{"eventType":"SHUTDOWN","shutdownReason":"SandboxTerminated","deadlineMs":42}`, want: EventShutdown, reason: "SandboxTerminated", deadline: 42},
		{name: "escaped", body: `{"eventType":"INV\u004fKE","requestId":"a\/b"}`, want: EventInvoke, id: "a/b"},
		{name: "unknown", body: `{"eventType":"RESTORE"}`, want: EventOther},
		{name: "not an object", body: `[1]`, err: true},
		{name: "junk", body: `{"eventType":`, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e Event
			var scratch []byte
			err := parseEvent([]byte(tt.body), &e, &scratch)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v", err)
			}
			if err != nil {
				return
			}
			if e.Type != tt.want || string(e.RequestID) != tt.id || string(e.ShutdownReason) != tt.reason || e.DeadlineMs != tt.deadline {
				t.Errorf("got %v %q %q %d", e.Type, e.RequestID, e.ShutdownReason, e.DeadlineMs)
			}
		})
	}
}

func FuzzParseEvent(f *testing.F) {
	f.Add([]byte(`{"eventType":"INVOKE","deadlineMs":1676051400000,"requestId":"3da1f2dc"}`))
	f.Add([]byte(`{"eventType":"SHUTDOWN","shutdownReason":"spindown","deadlineMs":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var e Event
		var scratch []byte
		err := parseEvent(body, &e, &scratch)
		var ref map[string]json.RawMessage
		refErr := json.Unmarshal(body, &ref)
		if (err == nil) != (refErr == nil && ref != nil) {
			t.Fatalf("parseEvent(%q) err %v, encoding/json err %v", body, err, refErr)
		}
		if err != nil || !utf8.Valid(body) {
			return
		}
		var typ, id string
		json.Unmarshal(ref["eventType"], &typ)
		json.Unmarshal(ref["requestId"], &id)
		want := map[string]EventType{"INVOKE": EventInvoke, "SHUTDOWN": EventShutdown}[typ]
		if e.Type != want || (string(e.RequestID) != id && isString(ref["requestId"])) {
			t.Fatalf("parseEvent(%q) = %v %q, want %v %q", body, e.Type, e.RequestID, want, id)
		}
	})
}

func isString(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '"' }
