package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeWrk writes an executable that logs its arguments and prints a wrk
// report whose rate is the URL's port, so runs can be told apart.
func fakeWrk(t *testing.T, log string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "wrk")
	script := `#!/bin/sh
echo "$*" >>` + log + `
for a; do url=$a; done
port=${url##*:}; port=${port%%/*}
cat <<EOF
Running 1s test @ $url
  1 threads and 10 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   100.00us   10.00us   1.00ms   90.00%
  Latency Distribution
     50%  100.00us
     99%    1.00ms
  $((port * 2)) requests in 2.00s, 1.00KB read
Requests/sec: $port.00
EOF
`
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunInterleavesAndRecords(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "argv")
	hook := filepath.Join(dir, "hooks")
	out := filepath.Join(dir, "res.jsonl")
	args := []string{"run", "-o", out, "-rounds", "3", "-order", "alternate", "-wrk", fakeWrk(t, log), "-d", "1s",
		"-target", "a http://127.0.0.1:1000/ pid=" + strconv.Itoa(os.Getpid()),
		"-target", "b http://127.0.0.1:2000/x c=8 t=2 lua=s.lua prewarm=1s arg=-H arg=Connection:%20close",
		"-before", "b=echo b >>" + hook,
	}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), args, nil, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	argv, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(argv)), "\n")
	var order []string
	for _, l := range lines {
		order = append(order, l[strings.LastIndex(l, ":")+1:])
	}
	// Round 1 a, (b's warm-up), b; round 2 reversed; round 3 as given.
	want := "1000/ 2000/x 2000/x 2000/x 1000/ 1000/ 2000/x"
	if got := strings.Join(order, " "); got != want {
		t.Errorf("runs in order %s, want %s", got, want)
	}
	if !strings.Contains(lines[1], "-t2 -c8 -d1s --latency -s s.lua -H Connection: close") {
		t.Errorf("per-target keys not applied: %q", lines[1])
	}
	if h, _ := os.ReadFile(hook); string(h) != "b\nb\nb\n" {
		t.Errorf("before hook ran %q, want once per measured run of b", h)
	}
	recs, err := readRecords([]string{out})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 6 {
		t.Fatalf("%d records, want 6 (the warm-up is not one)", len(recs))
	}
	r := group(recs)
	if got, _ := r.values("b", "rps"); len(got) != 3 || got[0] != 2000 {
		t.Errorf("b rps %v", got)
	}
	for _, rec := range r["a"] {
		if _, ok := rec.Values["cpu"]; !ok {
			t.Errorf("a has no CPU figure: %v", rec.Values)
		}
		if rec.Values["requests"] != 2000 || rec.Values["p99"] != 1 {
			t.Errorf("a figures %v", rec.Values)
		}
	}
	if _, ok := r["b"][0].Values["cpu"]; ok {
		t.Error("b has a CPU figure without a pid")
	}
	// A second invocation appends: one report over both.
	if err := run(context.Background(), []string{"run", "-o", out, "-rounds", "1", "-wrk", fakeWrk(t, log), "-target", "c http://127.0.0.1:3000/"}, nil, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := run(context.Background(), []string{"report", "-t", `{{printf "%.1f" (div (med "c" "rps") (med "a" "rps"))}}`, out}, nil, &table, &stderr); err != nil {
		t.Fatal(err)
	}
	if table.String() != "3.0" {
		t.Errorf("report over appended runs: %q", table.String())
	}
}

func TestRunUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"run", "-target", "a http://x/"},
		{"run", "-o", "f"},
		{"run", "-o", "f", "-rounds", "0", "-target", "a http://x/"},
		{"run", "-o", "f", "-target", "a"},
		{"run", "-o", "f", "-target", "a http://x/ bogus=1"},
		{"run", "-o", "f", "-target", "a http://x/ gen=nope"},
		{"run", "-o", "f", "-target", "a http://x/ R=100"},
		{"run", "-o", "f", "-target", "a http://x/ c=0"},
		{"run", "-o", "f", "-target", "a http://x/", "-before", "b=true"},
		{"run", "-o", "f", "-order", "random", "-target", "a http://x/"},
		{"nope"},
		{},
	} {
		if err := run(context.Background(), args, nil, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

func TestRunFailingGenerator(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "wrk")
	if err := os.WriteFile(bad, []byte("#!/bin/sh\necho 'unable to connect' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"run", "-o", filepath.Join(dir, "r"), "-wrk", bad, "-target", "a http://127.0.0.1:1/"}, nil, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "unable to connect") {
		t.Errorf("error %v, want the generator's message", err)
	}
}
