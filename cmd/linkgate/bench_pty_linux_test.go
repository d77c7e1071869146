package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: what is written to tty is read
// from ptm.
func openPTY(t *testing.T) (ptm, tty *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptm.Close() })
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	if tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	// No output processing: a \n stays a \n, so a \r is the live line's.
	tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Oflag &^= unix.OPOST
	if err := unix.IoctlSetTermios(int(tty.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	return ptm, tty
}

// On a terminal the live line is rewritten in place (\r) once a second of
// the run and erased before the report; the same run into a pipe (the
// other tests' buffers) has none of it.
func TestBenchLiveLineOnATerminal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	ptm, tty := openPTY(t)
	var mu sync.Mutex
	var got bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := ptm.Read(buf)
			mu.Lock()
			got.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	var errOut bytes.Buffer
	err := run(context.Background(), []string{"bench", "-t1", "-c2", "-d3s", "-R100", srv.URL + "/"},
		func(string) string { return "" }, strings.NewReader(""), tty, &errOut)
	if err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	tty.Close() // the master reads what is left, then EIO
	<-done
	mu.Lock()
	out := got.String()
	mu.Unlock()
	report := strings.Index(out, "Thread Stats")
	if report < 0 {
		t.Fatalf("no report on the terminal:\n%q", out)
	}
	live, erased := strings.LastIndex(out[:report], "\r\x1b[K["), strings.LastIndex(out[:report], "\r\x1b[K")
	if live < 0 || !strings.Contains(out[live:report], "p99 of the last second") || erased <= live {
		t.Errorf("terminal output has no live line, or it is not erased before the report:\n%q", out)
	}
}
