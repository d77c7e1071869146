package visits_test

import (
	"strings"
	"testing"

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
