package h2spec_test

import (
	"os"
	"testing"

	"github.com/linkgate/linkgate/internal/h2spec"
)

// TestParse reads h2spec reports: fail-rst.xml is the gateway's, on this
// machine while busy, before the RST_STREAM fix (issue 32 §7).
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		file   string
		failed []string // Section + " " + Name of each case not passed
	}{
		{"testdata/fail-rst.xml", []string{
			"http2/5.1 closed: Sends a DATA frame after sending RST_STREAM frame",
			"http2/5.1 closed: Sends a HEADERS frame after sending RST_STREAM frame",
		}},
		{"testdata/pass.xml", nil},
		// What a case received, written raw: NUL is no XML character.
		{"testdata/control-bytes.xml", []string{
			"http2/5.1 closed: Sends a DATA frame after sending RST_STREAM frame",
			"http2/5.1 closed: Sends a HEADERS frame after sending RST_STREAM frame",
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			f, err := os.Open(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cases, err := h2spec.Parse(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(cases) != h2spec.Cases {
				t.Errorf("%d cases, want %d", len(cases), h2spec.Cases)
			}
			var failed []string
			for _, c := range cases {
				if c.Outcome != "passed" {
					failed = append(failed, c.Section+" "+c.Name)
					if c.Detail == "" {
						t.Errorf("%s: no detail", c)
					}
				}
			}
			if len(failed) != len(tc.failed) {
				t.Fatalf("not passed: %q, want %q", failed, tc.failed)
			}
			for i := range failed {
				if failed[i] != tc.failed[i] {
					t.Errorf("not passed: %q, want %q", failed, tc.failed)
				}
			}
		})
	}
}
