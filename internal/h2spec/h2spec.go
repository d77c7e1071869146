// Package h2spec runs h2spec (github.com/summerwind/h2spec), the HTTP/2
// conformance suite, against a server in a test and reads its JUnit
// report: a test fails on every case that did not pass, with h2spec's
// own words for it.
package h2spec

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/internal/testdep"
)

// Cases is the number of cases h2spec 2.2.1 runs without --strict.
const Cases = 145

// Case is one case of a report.
type Case struct {
	Section string // "http2/5.1"
	Name    string // "closed: Sends a DATA frame after sending RST_STREAM frame"
	Outcome string // "passed", "failed", "error" or "skipped"
	Detail  string // what h2spec expected and got, when not passed
}

func (c Case) String() string {
	s := c.Section + " " + c.Name + ": " + c.Outcome
	if c.Detail != "" {
		s += " (" + strings.ReplaceAll(strings.TrimSpace(c.Detail), "\n", "; ") + ")"
	}
	return s
}

type report struct {
	Suites []struct {
		Cases []struct {
			Package string    `xml:"package,attr"`
			Name    string    `xml:"classname,attr"`
			Failure *struct{} `xml:"failure"`
			Error   *struct {
				Text string `xml:",chardata"`
			} `xml:"error"`
			Skipped *struct{} `xml:"skipped"`
			Detail  string    `xml:",innerxml"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// Parse reads h2spec's JUnit report (--junit-report).
func Parse(r io.Reader) ([]Case, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("h2spec report: %w", err)
	}
	// h2spec writes what a case received as it came, control bytes
	// included, which XML does not allow.
	b = bytes.Map(func(r rune) rune {
		if r < ' ' && r != '\t' && r != '\n' && r != '\r' {
			return '?'
		}
		return r
	}, b)
	var rep report
	if err := xml.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("h2spec report: %w", err)
	}
	var cases []Case
	for _, s := range rep.Suites {
		for _, tc := range s.Cases {
			c := Case{Section: tc.Package, Name: tc.Name, Outcome: "passed"}
			switch {
			case tc.Failure != nil:
				c.Outcome, c.Detail = "failed", stripTags(tc.Detail)
			case tc.Error != nil:
				c.Outcome, c.Detail = "error", tc.Error.Text
			case tc.Skipped != nil:
				c.Outcome = "skipped"
			}
			cases = append(cases, c)
		}
	}
	return cases, nil
}

func stripTags(s string) string {
	var b strings.Builder
	in := false
	for _, r := range s {
		switch {
		case r == '<':
			in = true
		case r == '>':
			in = false
		case !in:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Binary is the path of h2spec: $LINKGATE_TEST_H2SPEC (scripts/test.sh
// sets it to what scripts/install-deps.sh built), else h2spec in PATH;
// missing, the test is skipped (failed in CI).
func Binary(tb testing.TB) string {
	tb.Helper()
	return testdep.Binary(tb, "LINKGATE_TEST_H2SPEC", "h2spec")
}

// Run runs every h2spec case against the server listening on addr
// (127.0.0.1:port), over TLS when tls, and fails tb on each case that did
// not pass, and when fewer than Cases ran. h2spec connects to
// localhost:port, so that its TLS ClientHello carries an SNI (localhost);
// it does not verify the certificate. The report is written to
// $LINKGATE_TEST_ARTIFACTS when that is set.
// A case waits up to 10 s for an answer: a busy machine delays answers,
// and a missing one is a failure however long the wait.
func Run(tb testing.TB, addr string, tls bool) []Case {
	tb.Helper()
	bin := Binary(tb)
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		tb.Fatal(err)
	}
	// The report is kept among the test command's artefacts.
	dir := os.Getenv("LINKGATE_TEST_ARTIFACTS")
	if dir == "" {
		dir = tb.TempDir()
	}
	out := filepath.Join(dir, "h2spec-"+strings.ReplaceAll(tb.Name(), "/", "-")+".xml")
	args := []string{"-h", "localhost", "-p", port, "-o", "10", "-j", out}
	if tls {
		args = append(args, "-t", "-k")
	}
	cmd := exec.Command(bin, args...)
	log, err := cmd.CombinedOutput()
	f, ferr := os.Open(out)
	if ferr != nil {
		tb.Fatalf("h2spec %s wrote no report (%v, exit %v):\n%s", strings.Join(args, " "), ferr, err, log)
	}
	defer f.Close()
	cases, err := Parse(f)
	if err != nil {
		tb.Fatal(err)
	}
	passed := 0
	for _, c := range cases {
		if c.Outcome == "passed" {
			passed++
			continue
		}
		tb.Errorf("h2spec %s", c)
	}
	if len(cases) < Cases {
		tb.Errorf("h2spec ran %d cases, want %d:\n%s", len(cases), Cases, log)
	}
	tb.Logf("h2spec %s: %d of %d cases passed", strings.Join(args[:4], " "), passed, len(cases))
	return cases
}
