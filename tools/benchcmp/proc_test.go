package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and parentheses, as a process may set.
	line := "4242 (nginx: (worker) 1) S 4241 4241 4241 0 -1 4194624 100 0 0 0 1234 567 0 0 20 0 1 0 100 1000 10 18446744073709551615\n"
	s, err := parseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if s.ppid != 4241 || s.utime != 1234 || s.stime != 567 {
		t.Errorf("got %+v", s)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S a 1 1 0 -1 0 0 0 0 0 1 1 0 0"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) succeeded", bad)
		}
	}
}

func TestCPUTimeCountsChildren(t *testing.T) {
	proc := t.TempDir()
	write := func(pid, ppid, utime, stime string) {
		dir := filepath.Join(proc, pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		line := pid + " (p) S " + ppid + " 1 1 0 -1 0 0 0 0 0 " + utime + " " + stime + " 0 0 20 0 1 0\n"
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("10", "1", "100", "50")  // the master
	write("11", "10", "300", "50") // its worker
	write("12", "11", "1000", "0") // a grandchild: not counted
	write("13", "1", "1000", "0")  // unrelated
	got, err := cpuTime(proc, 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := 5 * time.Second; got != want {
		t.Errorf("cpuTime = %v, want %v (master + direct children)", got, want)
	}
	if _, err := cpuTime(proc, 99); err == nil {
		t.Error("cpuTime of a missing PID succeeded")
	}
}

func TestCPUTimeOfThisProcess(t *testing.T) {
	before, err := cpuTime("/proc", os.Getpid())
	if err != nil {
		t.Skip("no /proc here:", err)
	}
	deadline := time.Now().Add(300 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = x * x
	}
	after, _ := cpuTime("/proc", os.Getpid())
	if after <= before {
		t.Errorf("CPU time did not grow while spinning: %v → %v", before, after)
	}
}
