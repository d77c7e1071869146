//go:build linux

// Command leftovers runs a command and fails when it leaves a process
// behind: every process a test starts must be gone when the test ends,
// even when the test fails (issue 32: an orphaned nginx worker outlived a
// full test run by 80 minutes).
//
//	leftovers [-grace 5s] -- go test ./...
//
// It makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so a
// process whose parent exits (a daemon that double-forks, a child a test
// binary did not wait for) is re-parented to it instead of to init. When the
// command has exited it reaps zombies, waits up to -grace for the rest to
// exit on their own (a process killed in a test's cleanup may still be on
// its way out), then names each survivor, kills it and exits 1 (or the
// command's own non-zero exit code, when it failed too).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	code, err := run(os.Args[1:], os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "leftovers:", err)
	}
	os.Exit(code)
}

// run returns the exit code: the command's, or 1 when it left processes
// behind and itself succeeded, or 2 on a usage error.
func run(args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("leftovers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	grace := fs.Duration("grace", 5*time.Second, "how long processes left behind may take to exit on their own")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	if fs.NArg() == 0 {
		return 2, errors.New("usage: leftovers [-grace D] -- COMMAND [ARG…]")
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return 2, fmt.Errorf("prctl PR_SET_CHILD_SUBREAPER: %w", err)
	}
	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	// Pass an interrupt on to the command; it decides when to stop.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 2, err
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	code := 0
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return 2, err
		}
		code = ee.ExitCode()
		if code < 0 {
			code = 1
		}
	}
	left := survivors(*grace)
	if len(left) == 0 {
		return code, nil
	}
	fmt.Fprintf(stderr, "leftovers: %s left %d process(es) behind:\n", fs.Arg(0), len(left))
	for _, p := range left {
		fmt.Fprintf(stderr, "  pid %d: %s\n", p.pid, p.cmdline)
		_ = unix.Kill(p.pid, unix.SIGKILL)
	}
	reap()
	if code == 0 {
		code = 1
	}
	return code, nil
}

type proc struct {
	pid     int
	cmdline string
}

// survivors reaps this process's exited children and returns the ones still
// alive after grace, polling /proc every 50 ms; the children are the
// command's orphans re-parented here (the command itself has been waited
// for). Nothing signals an unrelated process's exit, so this polls.
func survivors(grace time.Duration) []proc {
	deadline := time.Now().Add(grace)
	for {
		reap()
		left := children(os.Getpid())
		if len(left) == 0 || !time.Now().Before(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// children lists the live processes whose parent is ppid, by pid.
func children(ppid int) []proc {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []proc
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // exited since the glob
		}
		pid, parent, state, ok := parseStat(string(b))
		if !ok || parent != ppid || state == 'Z' {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(f), "cmdline"))
		out = append(out, proc{pid: pid, cmdline: strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

// parseStat reads the pid, parent pid and state from /proc/PID/stat:
// "pid (comm) state ppid …", where comm may hold spaces and parentheses, so
// the fields after it are found from the last ')'.
func parseStat(s string) (pid, ppid int, state byte, ok bool) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 1 || end < open {
		return 0, 0, 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	if err != nil {
		return 0, 0, 0, false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	if err != nil {
		return 0, 0, 0, false
	}
	return pid, ppid, f[0][0], true
}
