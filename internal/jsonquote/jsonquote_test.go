package jsonquote

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestAppend(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"plain", `"plain"`},
		{`q"b\`, `"q\"b\\"`},
		{"ctl\x00\x1f\n\r\t\x7f", `"ctl\u0000\u001f\n\r\t\u007f"`},
		{"é日本", `"é日本"`},
		{"bad\xff\xfeutf8", `"bad\ufffd\ufffdutf8"`},
		{"<>&\u2028\u2029", `"<>&\u2028\u2029"`},
	}
	for _, tt := range tests {
		if got := string(Append(nil, tt.in)); got != tt.want {
			t.Errorf("Append(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// Whatever s holds, Append writes one line of JSON that decodes to s,
// each byte not of UTF-8 as U+FFFD, as encoding/json has it.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{"", `q"b\`, "ctl\x00\x1f\n\x7f", "bad\xffutf8", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Append(nil, s)
		if strings.ContainsAny(string(got), "\n\r") {
			t.Fatalf("not one line: %q", got)
		}
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("Append(%q) = %s: not JSON: %v", s, got, err)
		}
		if want := string([]rune(s)); back != want {
			t.Errorf("Append(%q) decodes to %q, want %q", s, back, want)
		}
	})
}

func TestAppendAllocs(t *testing.T) {
	b := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { b = Append(b[:0], "Mozilla/5.0 \"x\" é\xff") }); n != 0 {
		t.Errorf("%v allocs", n)
	}
}
