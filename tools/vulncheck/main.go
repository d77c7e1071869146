// Command vulncheck runs govulncheck over the module with a vulnerability
// database on disk and decides: it fails when code calls a vulnerable
// symbol, unless that advisory is on the accepted list with a reason.
// Advisories in modules that are required but not called are reported,
// not fatal (govulncheck's own default). scripts/test.sh runs it; the
// database is built by scripts/install-deps.sh from the Go module proxy's
// golang.org/x/vulndb (docs/security.md, "Dependencies").
//
//	vulncheck -govulncheck .cache/bin/govulncheck -db .cache/vulndb/DB -accepted tools/vulncheck/accepted.txt ./...
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "vulncheck:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("vulncheck", flag.ContinueOnError)
	bin := fs.String("govulncheck", "govulncheck", "govulncheck `binary`")
	db := fs.String("db", "", "vulnerability database `directory` (index/db.json inside)")
	acceptedFile := fs.String("accepted", "", "`file` of accepted advisories: ID, then the reason")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *db == "" {
		return errors.New("-db is required")
	}
	accepted, err := readAccepted(*acceptedFile)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(*db)
	if err != nil {
		return err
	}
	patterns := fs.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	cmd := exec.Command(*bin, append([]string{"-db", "file://" + abs, "-format", "json"}, patterns...)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	r, perr := readFindings(stdout)
	r.DB = filepath.Base(abs)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("govulncheck: %w", err)
	}
	if perr != nil {
		return perr
	}
	return report(out, r, accepted)
}

// finding is one advisory's findings, summed up.
type finding struct {
	ID, Summary, Module, Version, Fixed string
	Called                              bool // a vulnerable symbol is reachable from our code
	Example                             string
}

type result struct {
	DB       string // which database
	Findings map[string]*finding
}

// govulncheck -format json writes a stream of messages (x/vuln's
// internal/govulncheck): config, progress, osv, finding. Only the fields
// used here are decoded.
type message struct {
	OSV *struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
	} `json:"osv"`
	Finding *struct {
		OSV          string `json:"osv"`
		FixedVersion string `json:"fixed_version"`
		Trace        []struct {
			Module   string `json:"module"`
			Version  string `json:"version"`
			Package  string `json:"package"`
			Function string `json:"function"`
			Receiver string `json:"receiver"`
		} `json:"trace"`
	} `json:"finding"`
}

func readFindings(r io.Reader) (result, error) {
	res := result{Findings: map[string]*finding{}}
	summaries := map[string]string{}
	dec := json.NewDecoder(bufio.NewReader(r))
	for {
		var m message
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return res, fmt.Errorf("read govulncheck's output: %w", err)
		}
		switch {
		case m.OSV != nil:
			summaries[m.OSV.ID] = m.OSV.Summary
		case m.Finding != nil && len(m.Finding.Trace) > 0:
			f := res.Findings[m.Finding.OSV]
			if f == nil {
				top := m.Finding.Trace[0]
				f = &finding{ID: m.Finding.OSV, Module: top.Module, Version: top.Version, Fixed: m.Finding.FixedVersion}
				res.Findings[f.ID] = f
			}
			if top := m.Finding.Trace[0]; top.Function != "" {
				f.Called = true
				if f.Example == "" {
					last := m.Finding.Trace[len(m.Finding.Trace)-1]
					f.Example = fmt.Sprintf("%s.%s reaches %s.%s", last.Package, last.Function, top.Package, symbol(top.Receiver, top.Function))
				}
			}
		}
	}
	for id, f := range res.Findings {
		f.Summary = summaries[id]
	}
	return res, nil
}

func symbol(recv, fn string) string {
	if recv != "" {
		return strings.TrimPrefix(recv, "*") + "." + fn
	}
	return fn
}

// readAccepted reads "ID reason…" lines; # starts a comment.
func readAccepted(name string) (map[string]string, error) {
	acc := map[string]string{}
	if name == "" {
		return acc, nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, reason, _ := strings.Cut(line, " ")
		if !strings.HasPrefix(id, "GO-") || strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("%s:%d: want an advisory ID (GO-…) and a reason", name, i+1)
		}
		acc[id] = strings.TrimSpace(reason)
	}
	return acc, nil
}

// report prints every finding and fails on called ones not accepted.
func report(out io.Writer, r result, accepted map[string]string) error {
	ids := make([]string, 0, len(r.Findings))
	for id := range r.Findings {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	fmt.Fprintf(out, "vulnerability database %s\n", r.DB)
	var failed []string
	for _, id := range ids {
		f := r.Findings[id]
		state := "required, not called"
		switch {
		case f.Called && accepted[id] != "":
			state = "CALLED, accepted: " + accepted[id]
		case f.Called:
			state = "CALLED"
			failed = append(failed, id)
		}
		fmt.Fprintf(out, "%-14s %s@%s (fixed in %s): %s\n    %s\n", id, f.Module, f.Version, orNone(f.Fixed), f.Summary, state)
		if f.Example != "" {
			fmt.Fprintf(out, "    e.g. %s\n", f.Example)
		}
	}
	for id := range accepted {
		if f := r.Findings[id]; f == nil || !f.Called {
			fmt.Fprintf(out, "note: accepted %s is no longer called: remove it from the accepted list\n", id)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d vulnerable symbols called and not accepted: %s (update the module, or accept with a reason)", len(failed), strings.Join(failed, ", "))
	}
	fmt.Fprintf(out, "%d advisories, none called that is not accepted\n", len(ids))
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "no fix yet"
	}
	return s
}
