//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The command's exit code passes through; a process it leaves behind fails
// the run, named, and is killed. Without PR_SET_CHILD_SUBREAPER the orphaned
// sleep is re-parented elsewhere and the third case goes red.
func TestRun(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string // a substring of what is printed; "" for nothing
	}{
		{"clean", []string{"--", "sh", "-c", "exit 0"}, 0, ""},
		{"failing command", []string{"--", "sh", "-c", "exit 3"}, 3, ""},
		{"orphan left behind", []string{"-grace", "200ms", "--", "sh", "-c", "sleep 37 & exit 0"}, 1, "sleep 37"},
		{"orphan of a failing command", []string{"-grace", "200ms", "--", "sh", "-c", "sleep 38 & exit 4"}, 4, "sleep 38"},
		{"orphan that exits within the grace", []string{"-grace", "10s", "--", "sh", "-c", "sleep 0.2 & exit 0"}, 0, ""},
		{"no command", nil, 2, "usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Files, as in the test command: exec hands a file to the
			// command as is, where a buffer would wait for every holder of
			// the pipe, orphans included, to close it.
			stdout, errFile := tempFile(t), tempFile(t)
			code, err := run(tt.args, stdout, errFile)
			stderr := bytes.NewBuffer(readFile(t, errFile))
			if err != nil {
				stderr.WriteString(err.Error())
			}
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			if tt.stderr == "" && stderr.Len() > 0 {
				t.Errorf("stderr: %s", stderr.String())
			}
			if tt.stderr != "" && !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr %q does not name %q", stderr.String(), tt.stderr)
			}
			if left := survivors(0); len(left) > 0 {
				t.Errorf("processes still alive after the run: %v", left)
			}
		})
	}
}

func tempFile(t *testing.T) *os.File {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func readFile(t *testing.T, f *os.File) []byte {
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		in        string
		pid, ppid int
		state     byte
		ok        bool
	}{
		{"123 (sleep) S 45 123 45 0 -1", 123, 45, 'S', true},
		{"7 (a) b) (c) Z 1 7", 7, 1, 'Z', true},
		{"8 (x y) R 2", 8, 2, 'R', true},
		{"", 0, 0, 0, false},
		{"9 (x) S", 0, 0, 0, false},
		{"9 (x) SS 1", 0, 0, 0, false},
		{"x (y) S 1", 0, 0, 0, false},
		{"9 y) S 1", 0, 0, 0, false},
		{"9 (x) S q", 0, 0, 0, false},
	}
	for _, tt := range tests {
		pid, ppid, state, ok := parseStat(tt.in)
		if ok != tt.ok || ok && (pid != tt.pid || ppid != tt.ppid || state != tt.state) {
			t.Errorf("parseStat(%q) = %d %d %q %v, want %d %d %q %v", tt.in, pid, ppid, state, ok, tt.pid, tt.ppid, tt.state, tt.ok)
		}
	}
}

// Any line parses without a panic, and a line as the kernel writes it, with
// any command name (which may hold spaces and parentheses), parses back.
func FuzzParseStat(f *testing.F) {
	f.Add(uint32(123), "sleep", uint32(45))
	f.Add(uint32(7), "a) b) (c", uint32(1))
	f.Fuzz(func(t *testing.T, pid uint32, comm string, ppid uint32) {
		parseStat(comm)
		line := fmt.Sprintf("%d (%s) S %d 0 0", pid, strings.ReplaceAll(comm, "\n", ""), ppid)
		gotPid, gotPpid, state, ok := parseStat(line)
		if !ok || gotPid != int(pid) || gotPpid != int(ppid) || state != 'S' {
			t.Errorf("parseStat(%q) = %d %d %q %v", line, gotPid, gotPpid, state, ok)
		}
	})
}
