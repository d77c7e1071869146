package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/testdep"
)

// The linux/arm64 binary (make cross) under qemu-user: serve, shorten,
// getFullURL, redirect, then a clean stop on SIGTERM.
func TestArm64Smoke(t *testing.T) {
	qemu := testdep.Binary(t, testdep.QEMUArm64, "qemu-aarch64-static")
	bin := testdep.Binary(t, testdep.Arm64Binary, "linkgate_linux_arm64")
	c := startChild(t, []string{qemu, bin}, filepath.Join(t.TempDir(), "links"))
	id := shorten(t, c.URL, "https://aws.amazon.com/ec2/graviton/")
	if status, _, body := call(t, "GET", c.URL+"/getFullURL/"+id, ""); status != 200 || body != `"https://aws.amazon.com/ec2/graviton/"` {
		t.Errorf("getFullURL on arm64: %d %q", status, body)
	}
	if status, hdr, _ := call(t, "GET", c.URL+"/"+id, ""); status != 302 || hdr.Get("Location") != "https://aws.amazon.com/ec2/graviton/" {
		t.Errorf("redirect on arm64: %d %q", status, hdr.Get("Location"))
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("arm64 serve exited with %v:\n%s", err, c.logs)
		}
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		t.Fatalf("arm64 serve did not stop on SIGTERM:\n%s", c.logs)
	}
	if !strings.Contains(c.logs.String(), `"msg":"stopped"`) {
		t.Errorf("no clean stop in the logs:\n%s", c.logs)
	}
}
