package httpapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// checkJSONText refuses a valid JSON text exactly when encoding/json would
// replace some of it with U+FFFD.
func FuzzCheckJSONText(f *testing.F) {
	for _, s := range []string{`{"url":"https://example.com/"}`, `"\ud800"`, `"\ud83d\ude00"`, `"\\ud800"`, `"a\"\udc00"`,
		"\"\xff\"", `{"k\ud800":1}`, `["\ud800\ud800"]`, `"\ufffd"`, "\"\uFFFD\"", `"\u00e9\"\\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := checkJSONText(b)
		if !json.Valid(b) {
			return
		}
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		out, _ := json.Marshal(v)
		// U+FFFD in the decoded value that the input did not spell itself.
		literal := bytes.Count(b, []byte("\uFFFD")) + strings.Count(strings.ToLower(string(b)), `\ufffd`)
		replaced := bytes.Count(out, []byte("\uFFFD")) > literal
		if (err != nil) != replaced {
			t.Fatalf("checkJSONText(%q) = %v, but encoding/json replaced characters: %v (decoded %s)", b, err, replaced, out)
		}
	})
}
