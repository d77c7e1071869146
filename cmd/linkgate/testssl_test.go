package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/testdep"
)

// testsslFinding is one finding of testssl.sh's --jsonfile.
type testsslFinding struct {
	ID, Severity, Finding string
}

// testSSL runs testssl.sh (Debian's; a whole run, --fast) against url,
// trusting caFile, and fails on any finding rated HIGH or CRITICAL or a
// scan that could not run; lower ones are logged. Its JSON goes to
// $LINKGATE_TEST_ARTIFACTS/testssl-NAME.json when that is set.
func testSSL(t *testing.T, name, url, caFile string) {
	t.Helper()
	bin := testdep.Binary(t, "LINKGATE_TEST_TESTSSL", "testssl")
	out := filepath.Join(t.TempDir(), "testssl.json")
	if dir := os.Getenv("LINKGATE_TEST_ARTIFACTS"); dir != "" {
		out = filepath.Join(dir, "testssl-"+name+".json")
		os.Remove(out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--quiet", "--warnings", "off", "--color", "0", "--fast", "--nodns", "none",
		"--connect-timeout", "5", "--openssl-timeout", "5", "--add-ca", caFile,
		"--severity", "LOW", "--jsonfile", out, url)
	log, err := cmd.CombinedOutput()
	b, rerr := os.ReadFile(out)
	if rerr != nil {
		t.Fatalf("testssl wrote no JSON (%v, exit %v):\n%s", rerr, err, log)
	}
	var findings []testsslFinding
	if err := json.Unmarshal(b, &findings); err != nil {
		t.Fatalf("testssl JSON: %v", err)
	}
	if len(findings) == 0 {
		t.Fatalf("testssl reported nothing:\n%s", log)
	}
	bySeverity := map[string]int{}
	for _, f := range findings {
		bySeverity[f.Severity]++
		switch f.Severity {
		case "HIGH", "CRITICAL":
			t.Errorf("testssl %s %s: %s", f.Severity, f.ID, f.Finding)
		case "MEDIUM", "LOW", "WARN":
			t.Logf("testssl %s %s: %s", f.Severity, f.ID, f.Finding)
		}
		if f.ID == "scanProblem" {
			t.Errorf("testssl could not scan: %s", f.Finding)
		}
	}
	t.Logf("testssl findings by severity: %v (%s)", bySeverity, out)
}
