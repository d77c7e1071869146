package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// Lines as the emulator (aws-lambda-rie) prints them.
func TestLogLines(t *testing.T) {
	tests := []struct {
		line, kind string
		ms         string
	}{
		{"30 Nov 2026 02:30:51,858 [INFO] (rapid) INIT REPORT(durationMs: 21.785000)", "init", "21.785000"},
		{"30 Nov 2026 02:30:52,120 [INFO] (rapid) INVOKE RTDONE(status: success, produced bytes: 0, duration: 262.044000ms)", "rtdone", "262.044000"},
		{"REPORT RequestId: 7e6ecd5c-3d22-43bd-b901-a26cc4f6fad4\tInit Duration: 0.03 ms\tDuration: 284.05 ms\tBilled Duration: 285 ms\tMemory Size: 3008 MB\tMax Memory Used: 3008 MB\t", "report", "284.05"},
		{"REPORT RequestId: e77af2b5-f0f0-457b-bc85-db0e5646bf32\tDuration: 1.37 ms\tBilled Duration: 2 ms\tMemory Size: 3008 MB\tMax Memory Used: 3008 MB\t", "report", "1.37"},
		{`{"msg":"REPORT RequestId: x\tDuration: 1 ms"}`, "", ""},
	}
	for _, tt := range tests {
		var kind, ms string
		for _, m := range []struct {
			re   interface{ FindStringSubmatch(string) []string }
			kind string
		}{{reInit, "init"}, {reRTDone, "rtdone"}, {reReport, "report"}} {
			if s := m.re.FindStringSubmatch(tt.line); s != nil {
				kind, ms = m.kind, s[1]
			}
		}
		if kind != tt.kind || ms != tt.ms {
			t.Errorf("%q: %s %s, want %s %s", tt.line, kind, ms, tt.kind, tt.ms)
		}
	}
}

func TestSummaryAndReport(t *testing.T) {
	base := result{Variant: "no extension", InitsMs: []float64{4, 6}, FunctionHWMKB: 16 << 10, FunctionBytes: 14e6}
	ext := result{Variant: "ext", InitsMs: []float64{5, 9}, FunctionHWMKB: 16 << 10, ExtensionHWMKB: 3 << 10,
		ExtensionCPUMs: 0.4, WarmInvokes: 100, FunctionBytes: 14e6, ExtensionBytes: 2.9e6}
	for i := 1; i <= 100; i++ {
		base.Invokes = append(base.Invokes, invoke{Cold: i == 1, ClientMs: float64(i), DurationMs: 2, RuntimeMs: 1.5, PostRuntimeMs: 0.5})
		ext.Invokes = append(ext.Invokes, invoke{Cold: i == 1, ClientMs: float64(i) + 0.1, DurationMs: 3, RuntimeMs: 1.5, PostRuntimeMs: 1.5})
	}
	s := summarize(ext)
	if s.clientP50 != 51.1 || s.clientP99 != 99.1 || s.initAvg != 7 || s.initMax != 9 || s.postAvg != 1.5 || s.extCPUPerInvokeUs != 4 {
		t.Errorf("summary %+v", s)
	}
	var out bytes.Buffer
	printReport(&out, config{invokes: 99, restarts: 2}, []result{base, ext})
	for _, want := range []string{"| ext | 3.00 / 3.00 | 2 | 7.0 / 9.0 | 1.50 / 1.50 | 51.10 / 99.10 | 16.0 + 3.0 | 4 | 14.0 / 2.9 |",
		"ext vs no extension: client p50 +0.100 ms (×1.00; per round, median +0.100 ms, range +0.100 to +0.100)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBaselineReport(t *testing.T) {
	cur := result{Variant: "no extension", InitsMs: []float64{10, 12, 9}, FunctionBytes: 15e6}
	base := result{Variant: "no extension, 096063f build", Baseline: true, InitsMs: []float64{8, 12, 10}, FunctionBytes: 14.4e6}
	for _, r := range []*result{&cur, &base} {
		r.Invokes = []invoke{{Cold: true, ClientMs: 1}, {ClientMs: 1}}
	}
	var out bytes.Buffer
	printReport(&out, config{invokes: 3, restarts: 3}, []result{cur, base})
	want := "- this build vs the 096063f build: init avg 10.00 → 10.33 ms (×1.033; per round, median ×1.000, range ×0.900 to ×1.250), bootstrap 14.40 → 15.00 MB (×1.042)."
	if !strings.Contains(out.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, out.String())
	}
	if strings.Contains(out.String(), "build vs no extension") {
		t.Errorf("the baseline build is compared as an extension:\n%s", out.String())
	}
}

func TestEMFTurnaround(t *testing.T) {
	line := `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[]},"FunctionName":"f","ExtensionProcessingTime":[6.1,8.5],"Invokes":2}`
	if got := emfTurnaround(line); len(got) != 2 || got[0] != 6.1 {
		t.Errorf("emfTurnaround = %v", got)
	}
	if got := emfTurnaround("REPORT RequestId: x"); got != nil {
		t.Errorf("non-EMF line gave %v", got)
	}
}

// The chart is one SVG of two panels, averages and maxima, with a bar per
// metric and variant.
func TestChart(t *testing.T) {
	path := t.TempDir() + "/chart.svg"
	rs := []result{{Variant: "no extension", InitsMs: []float64{4}}, {Variant: "ext <1>", InitsMs: []float64{9}}}
	for i := range rs {
		rs[i].Invokes = []invoke{{Cold: true, ClientMs: 9, DurationMs: 3}, {ClientMs: 2, DurationMs: 1, PostRuntimeMs: 0.5}}
	}
	if err := chart(path, rs); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	for _, want := range []string{"averages (ms)", "maxima (ms)", ">no extension</text>", ">ext &lt;1&gt;</text>", ">client p99</text>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	if n := strings.Count(svg, `stroke-width="0.5"/>`); n != 2*(2*4+2) {
		t.Errorf("%d bars and legend boxes, want %d", n, 2*(2*4+2))
	}
}
