package extension_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/linkgate/linkgate/lambda/extension"
)

var update = flag.Bool("update", false, "rewrite golden files")

// describe renders a record for golden files and comparisons.
func describe(r *extension.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s type=%q(%v)", r.Time.UTC().Format(time.RFC3339Nano), r.TypeName, r.Type)
	for _, s := range []struct {
		name string
		v    []byte
	}{{"requestId", r.RequestID}, {"status", r.Status}, {"phase", r.Phase}} {
		if s.v != nil {
			fmt.Fprintf(&b, " %s=%q", s.name, s.v)
		}
	}
	for _, n := range []struct {
		name string
		f    extension.Field
		v    float64
	}{
		{"durationMs", extension.FieldDuration, r.DurationMs},
		{"billedDurationMs", extension.FieldBilledDuration, r.BilledDurationMs},
		{"memorySizeMB", extension.FieldMemorySize, r.MemorySizeMB},
		{"maxMemoryUsedMB", extension.FieldMaxMemoryUsed, r.MaxMemoryUsedMB},
		{"initDurationMs", extension.FieldInitDuration, r.InitDurationMs},
		{"restoreDurationMs", extension.FieldRestoreDuration, r.RestoreDurationMs},
		{"producedBytes", extension.FieldProducedBytes, r.ProducedBytes},
		{"extensionOverheadMs", extension.FieldExtensionOverhead, r.ExtensionOverheadMs},
		{"droppedRecords", extension.FieldDroppedRecords, r.DroppedRecords},
		{"droppedBytes", extension.FieldDroppedBytes, r.DroppedBytes},
	} {
		if r.Has(n.f) {
			fmt.Fprintf(&b, " %s=%g", n.name, n.v)
		} else if n.v != 0 {
			fmt.Fprintf(&b, " %s=!%g(not set but nonzero)", n.name, n.v)
		}
	}
	return b.String()
}

func TestBatchGolden(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "telemetry-batch.json"))
	if err != nil {
		t.Fatal(err)
	}
	var b extension.Batch
	var out bytes.Buffer
	b.Reset(in)
	for b.Next() {
		fmt.Fprintln(&out, describe(b.Record()))
	}
	fmt.Fprintf(&out, "skipped=%d err=%v\n", b.Skipped(), b.Err())
	golden := filepath.Join("testdata", "telemetry-batch.golden")
	if *update {
		os.WriteFile(golden, out.Bytes(), 0o644)
	}
	want, _ := os.ReadFile(golden)
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("records differ from %s (go test -update to accept):\n%s", golden, out.Bytes())
	}
}

func TestBatchErrors(t *testing.T) {
	for _, in := range []string{``, `{}`, `null`, `[{"type":"platform.report"}`, `[{"type":1},]`, `[] []`, `"x"`} {
		var b extension.Batch
		b.Reset([]byte(in))
		for b.Next() {
		}
		if b.Err() == nil {
			t.Errorf("batch %q: no error", in)
		}
	}
}

// refBatch decodes a batch with encoding/json under the rules Batch
// follows: exact (case-sensitive) names, the last duplicate wins, a field of
// the wrong JSON type counts as absent, only the last extensionOverhead span
// counts.
func refBatch(data []byte) (recs []string, skipped int, ok bool) {
	var arr []json.RawMessage
	if i := bytes.IndexFunc(data, func(r rune) bool { return !strings.ContainsRune(" \t\r\n", r) }); i < 0 || data[i] != '[' {
		return nil, 0, false
	}
	if err := json.Unmarshal(data, &arr); err != nil {
		return nil, 0, false
	}
	for _, el := range arr {
		if el[0] != '{' {
			skipped++
			continue
		}
		var top map[string]json.RawMessage
		json.Unmarshal(el, &top)
		var r extension.Record
		if s, ok := str(top["time"]); ok {
			r.Time, _ = time.Parse(time.RFC3339Nano, s)
		}
		if s, ok := str(top["type"]); ok {
			r.TypeName = []byte(s)
		}
		r.Type = typeOf(string(r.TypeName))
		rec := top["record"]
		if len(rec) > 0 && rec[0] == '{' {
			var fields map[string]json.RawMessage
			json.Unmarshal(rec, &fields)
			for name, dst := range map[string]*[]byte{"requestId": &r.RequestID, "status": &r.Status, "phase": &r.Phase} {
				if s, ok := str(fields[name]); ok {
					*dst = []byte(s)
				}
			}
			refNum(&r, extension.FieldDroppedRecords, &r.DroppedRecords, fields["droppedRecords"])
			refNum(&r, extension.FieldDroppedBytes, &r.DroppedBytes, fields["droppedBytes"])
			if m := fields["metrics"]; len(m) > 0 && m[0] == '{' {
				var ms map[string]json.RawMessage
				json.Unmarshal(m, &ms)
				refNum(&r, extension.FieldDuration, &r.DurationMs, ms["durationMs"])
				refNum(&r, extension.FieldBilledDuration, &r.BilledDurationMs, ms["billedDurationMs"])
				refNum(&r, extension.FieldMemorySize, &r.MemorySizeMB, ms["memorySizeMB"])
				refNum(&r, extension.FieldMaxMemoryUsed, &r.MaxMemoryUsedMB, ms["maxMemoryUsedMB"])
				refNum(&r, extension.FieldInitDuration, &r.InitDurationMs, ms["initDurationMs"])
				refNum(&r, extension.FieldRestoreDuration, &r.RestoreDurationMs, ms["restoreDurationMs"])
				refNum(&r, extension.FieldProducedBytes, &r.ProducedBytes, ms["producedBytes"])
			}
			if sp := fields["spans"]; len(sp) > 0 && sp[0] == '[' {
				var spans []json.RawMessage
				json.Unmarshal(sp, &spans)
				for _, s := range spans {
					if s[0] != '{' {
						continue
					}
					var span map[string]json.RawMessage
					json.Unmarshal(s, &span)
					if name, ok := str(span["name"]); ok && name == "extensionOverhead" {
						refNum(&r, extension.FieldExtensionOverhead, &r.ExtensionOverheadMs, span["durationMs"])
					}
				}
			}
		}
		recs = append(recs, describe(&r))
	}
	return recs, skipped, true
}

func str(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// refNum sets a numeric field the way Batch does, through the exported
// surface: the record is rebuilt by describe, so only value and presence
// matter.
func refNum(r *extension.Record, f extension.Field, dst *float64, raw json.RawMessage) {
	*dst = 0
	extension.SetField(r, f, false)
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return
	}
	var v float64
	if json.Unmarshal(raw, &v) == nil {
		*dst = v
		extension.SetField(r, f, true)
	}
}

func typeOf(name string) extension.RecordType {
	for t := extension.RecordInitStart; t.String() != "other"; t++ {
		if t.String() == name {
			return t
		}
	}
	return extension.RecordOther
}

func FuzzBatch(f *testing.F) {
	seed, _ := os.ReadFile(filepath.Join("testdata", "telemetry-batch.json"))
	f.Add(seed)
	f.Add([]byte(`[{"type":"platform.report","record":{"requestId":"a","metrics":{"durationMs":1,"durationMs":"x"},"spans":[{"name":"extensionOverhead","durationMs":2}]}}]`))
	f.Add([]byte(`[{"time":"2022-10-12T00:00:15.812345+02:00","typ\u0065":"platform.runtimeDone","record":{"requestId":"\ud83d\ude00"}},1,"x",[]]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var b extension.Batch
		b.Reset(data)
		var got []string
		for b.Next() {
			got = append(got, describe(b.Record()))
		}
		want, skipped, ok := refBatch(data)
		if ok != (b.Err() == nil) {
			t.Fatalf("batch %q: err %v, encoding/json accepts: %v", data, b.Err(), ok)
		}
		if !ok || !utf8.Valid(data) {
			return // invalid UTF-8 strings: encoding/json substitutes U+FFFD, Batch passes bytes through
		}
		if skipped != b.Skipped() || strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("batch %q:\n got %q (skipped %d)\nwant %q (skipped %d)", data, got, b.Skipped(), want, skipped)
		}
	})
}
