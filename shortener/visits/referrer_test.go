package visits_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/linkgate/linkgate/shortener/visits"
)

func TestReferrerHost(t *testing.T) {
	tests := []struct {
		ref  string
		want string // "<nil>" for invalid
	}{
		{"", ""},
		{"https://news.example.com/item?id=1", "news.example.com"},
		{"http://WWW.Example.COM:8080", "www.example.com"},
		{"https://user:pw@host.example/p", "host.example"},
		{"https://[2001:db8::1]:443/x", "[2001:db8::1]"},
		{"android-app://com.slack/", "com.slack"},
		{"https://host.example#frag", "host.example"},
		{"https://host.example?q", "host.example"},
		{"https://", "<nil>"},
		{"not a url", "<nil>"},
		{"//host.example/", "<nil>"},
		{"https://ho st.example/", "<nil>"},
		{"https://hôst.example/", "<nil>"},
		{"https://[::1/", "<nil>"},
		{"https://" + strings.Repeat("a", visits.MaxHostLength+1) + "/", "<nil>"},
	}
	for _, tt := range tests {
		var buf [visits.MaxHostLength]byte
		got := visits.ReferrerHost([]byte(tt.ref), buf[:])
		s := string(got)
		if got == nil {
			s = "<nil>"
		}
		if s != tt.want {
			t.Errorf("ReferrerHost(%q) = %q, want %q", tt.ref, s, tt.want)
		}
	}
}

func FuzzReferrerHost(f *testing.F) {
	for _, s := range []string{"", "https://a.example/", "http://[::1]:80", "x://u@h:1?#", "https://A.B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		var buf [visits.MaxHostLength]byte
		got := visits.ReferrerHost([]byte(ref), buf[:])
		if len(got) > visits.MaxHostLength {
			t.Fatalf("host longer than the bound: %q", got)
		}
		for _, c := range got {
			if c >= 'A' && c <= 'Z' || c <= ' ' || c >= 0x7f || c == '/' || c == '@' {
				t.Fatalf("ReferrerHost(%q) = %q contains %q", ref, got, c)
			}
		}
		if len(got) > 0 && !strings.Contains(strings.ToLower(ref), string(got)) {
			t.Fatalf("ReferrerHost(%q) = %q is not part of the header", ref, got)
		}
	})
}

func TestUTMValues(t *testing.T) {
	tests := []struct {
		query string
		want  [3]string // "-": absent; "!": invalid
	}{
		{"", [3]string{"-", "-", "-"}},
		{"utm_source=news&utm_medium=email&utm_campaign=launch", [3]string{"news", "email", "launch"}},
		{"a=1&utm_campaign=Black+Friday%20%E2%9C%93&b", [3]string{"-", "-", "Black Friday ✓"}},
		{"utm_source=first&utm_source=second", [3]string{"first", "-", "-"}},
		{"utm_source=&utm_medium", [3]string{"-", "-", "-"}},
		{"utm_source=%ZZ&utm_medium=%0a&utm_campaign=%ff", [3]string{"!", "!", "!"}},
		{"utm_source=" + strings.Repeat("x", visits.MaxUTMLength), [3]string{strings.Repeat("x", visits.MaxUTMLength), "-", "-"}},
		{"utm_source=" + strings.Repeat("x", visits.MaxUTMLength+1), [3]string{"!", "-", "-"}},
		{"UTM_SOURCE=caps&utm_sourcex=y", [3]string{"-", "-", "-"}},
	}
	for _, tt := range tests {
		var bufs [3][visits.MaxUTMLength]byte
		got := visits.UTMValues([]byte(tt.query), &bufs)
		for i, w := range tt.want {
			g := string(got[i])
			switch {
			case got[i] == nil:
				g = "-"
			case len(got[i]) == 0:
				g = "!"
			}
			if g != w {
				t.Errorf("UTMValues(%q)[%d] = %q, want %q", tt.query, i, g, w)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		var bufs [3][visits.MaxUTMLength]byte
		visits.UTMValues([]byte("utm_source=a%20b&utm_medium=c"), &bufs)
	}); n != 0 {
		t.Errorf("UTMValues allocates %v times", n)
	}
}

func FuzzUTMValues(f *testing.F) {
	f.Add("utm_source=news&utm_medium=email&utm_campaign=x%20y")
	f.Add("utm_campaign=%")
	f.Fuzz(func(t *testing.T, q string) {
		var bufs [3][visits.MaxUTMLength]byte
		for _, v := range visits.UTMValues([]byte(q), &bufs) {
			if len(v) > visits.MaxUTMLength || !utf8.Valid(v) {
				t.Fatalf("UTMValues(%q): %q", q, v)
			}
			for _, c := range v {
				if c < 0x20 || c == 0x7f {
					t.Fatalf("UTMValues(%q): control byte in %q", q, v)
				}
			}
		}
	})
}
