package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, which
// Linux fixes at 100 for every architecture's user-space ABI.
const userHZ = 100

// procStat is what this tool reads of /proc/PID/stat.
type procStat struct {
	ppid         int
	utime, stime int64 // clock ticks
}

// parseProcStat reads one /proc/PID/stat line. The command name (field 2)
// is in parentheses and may itself hold spaces and parentheses, so the
// fields are counted from the last ')'.
func parseProcStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("no command name")
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("only %d fields after the command name", len(f))
	}
	var s procStat
	var err error
	if s.ppid, err = strconv.Atoi(string(f[1])); err != nil {
		return procStat{}, fmt.Errorf("ppid: %w", err)
	}
	if s.utime, err = strconv.ParseInt(string(f[11]), 10, 64); err != nil {
		return procStat{}, fmt.Errorf("utime: %w", err)
	}
	if s.stime, err = strconv.ParseInt(string(f[12]), 10, 64); err != nil {
		return procStat{}, fmt.Errorf("stime: %w", err)
	}
	return s, nil
}

// cpuTime is the user + system CPU time of process pid and its direct
// children (nginx's master and its worker, say), read from proc (/proc).
func cpuTime(proc string, pid int) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, fmt.Errorf("CPU time of PID %d: %w", pid, err)
	}
	s, err := parseProcStat(b)
	if err != nil {
		return 0, fmt.Errorf("%s/%d/stat: %w", proc, pid, err)
	}
	ticks := s.utime + s.stime
	dirs, _ := filepath.Glob(filepath.Join(proc, "[0-9]*", "stat"))
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue // gone meanwhile
		}
		if c, err := parseProcStat(b); err == nil && c.ppid == pid {
			ticks += c.utime + c.stime
		}
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
