//go:build !nopebble

package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// A command on a store that a running server holds says which process
// holds it, and how to get on, but never what that process's command
// line holds: a server started with --admin-key SECRET must not have its
// key printed by anyone's `linkgate keys list` (issue 26: it was).
func TestLockedStoreMessage(t *testing.T) {
	bin, err := buildLinkgate()
	if err != nil {
		t.Fatal(err)
	}
	const secret = "s3cret-admin-key-do-not-print"
	db := filepath.Join(t.TempDir(), "links")
	c := startChild(t, []string{bin}, db, "--admin-key", secret)
	t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait() })
	pid := fmt.Sprintf("process %d", c.cmd.Process.Pid)
	for _, args := range [][]string{
		{"keys", "list", "--store", "pebble:" + db},
		{"store", "export", "--store", "pebble:" + db},
		{"store", "import", "--store", "pebble:" + db},
		{"links", "list", "--store", "pebble:" + db},
	} {
		out, errOut, err := runCmd(t, "", args...)
		if err == nil {
			t.Fatalf("%v on a held store succeeded: %s", args, out)
		}
		msg := err.Error() + out + errOut
		for _, leak := range []string{secret, "--admin-key", "serve --addr", bin} {
			if strings.Contains(msg, leak) {
				t.Errorf("%v: the message shows %q of the holder's command line:\n%s", args, leak, msg)
			}
		}
		if !strings.Contains(msg, pid) || !strings.Contains(msg, "--server "+c.URL) {
			t.Errorf("%v: the message does not name %s and how to get on:\n%s", args, pid, msg)
		}
	}
}
