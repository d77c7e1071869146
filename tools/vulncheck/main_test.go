package main

import (
	"strings"
	"testing"
)

// A govulncheck -format json stream (v1.9.0's protocol), cut down.
const stream = `{"config":{"protocol_version":"v1.0.0","scanner_name":"govulncheck","db":"file:///db"}}
{"osv":{"id":"GO-2026-0001","summary":"Called in a module"}}
{"osv":{"id":"GO-2026-0002","summary":"Required only"}}
{"osv":{"id":"GO-2026-0003","summary":"Called in stdlib"}}
{"finding":{"osv":"GO-2026-0002","fixed_version":"v1.2.0","trace":[{"module":"example.com/dep","version":"v1.1.0"}]}}
{"finding":{"osv":"GO-2026-0001","fixed_version":"v0.39.0","trace":[{"module":"golang.org/x/image","version":"v0.30.0","package":"golang.org/x/image/tiff","function":"ReadAt","receiver":"*buffer"},{"module":"github.com/linkgate/linkgate","package":"github.com/linkgate/linkgate/bench/capacity","function":"Chart"}]}}
{"finding":{"osv":"GO-2026-0003","fixed_version":"v1.26.9","trace":[{"module":"stdlib","version":"v1.26.8","package":"net/http","function":"Get"},{"module":"github.com/linkgate/linkgate","package":"github.com/linkgate/linkgate/x","function":"main"}]}}
`

func TestReport(t *testing.T) {
	r, err := readFindings(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	if f := r.Findings["GO-2026-0002"]; f == nil || f.Called {
		t.Errorf("required-only advisory: %+v", f)
	}
	if f := r.Findings["GO-2026-0001"]; f == nil || !f.Called || f.Module != "golang.org/x/image" || f.Fixed != "v0.39.0" ||
		f.Example != "github.com/linkgate/linkgate/bench/capacity.Chart reaches golang.org/x/image/tiff.buffer.ReadAt" {
		t.Errorf("called advisory: %+v", f)
	}
	var out strings.Builder
	err = report(&out, r, map[string]string{"GO-2026-0003": "toolchain", "GO-2026-0009": "gone"})
	if err == nil || !strings.Contains(err.Error(), "GO-2026-0001") || strings.Contains(err.Error(), "GO-2026-0003") {
		t.Errorf("report error %v: want only the unaccepted called advisory", err)
	}
	if !strings.Contains(out.String(), "accepted GO-2026-0009 is no longer called") {
		t.Errorf("stale acceptance not reported:\n%s", out.String())
	}
	if err := report(&out, r, map[string]string{"GO-2026-0001": "x", "GO-2026-0003": "y"}); err != nil {
		t.Errorf("all called advisories accepted: %v", err)
	}
	if _, err := readAccepted("main_test.go"); err == nil {
		t.Error("a file of other lines was read as an accepted list")
	}
	if acc, err := readAccepted("accepted.txt"); err != nil || len(acc) == 0 {
		t.Errorf("accepted.txt: %v", err)
	}
}
