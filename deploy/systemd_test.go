package deploy

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/internal/testdep"
)

var units = []string{"linkgate.service", "linkgate-gateway.service"}

// systemdRoot lays out a root directory for systemd-analyze: the units
// under etc/, the system's own units (which they depend on) under usr/lib,
// and an executable at ExecStart's path.
func systemdRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	sys := filepath.Join(root, "usr/lib/systemd")
	if err := os.MkdirAll(sys, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", "/lib/systemd/system", sys).CombinedOutput(); err != nil {
		t.Fatalf("copy the system's units: %v\n%s", err, out)
	}
	etc := filepath.Join(root, "etc/systemd/system")
	bin := filepath.Join(root, "usr/local/bin")
	for _, d := range []string{etc, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("cp", linkgate(t), filepath.Join(bin, "linkgate")).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, u := range units {
		data, err := os.ReadFile(filepath.Join("systemd", u))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(etc, u), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// systemd-analyze verify exits 0 on unknown keys and bad values, printing
// a warning: any output is a failure here.
func TestSystemdUnitsVerify(t *testing.T) {
	analyze := testdep.Binary(t, "LINKGATE_TEST_SYSTEMD_ANALYZE", "systemd-analyze")
	root := systemdRoot(t)
	for _, u := range units {
		cmd := exec.Command(analyze, "verify", "--root="+root, "--man=no", "--generators=no", "etc/systemd/system/"+u)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", u, err, out)
		}
	}
}

var exposureRE = regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+) (\S+)`)

// systemd-analyze security scores each unit's sandboxing; the goal is "OK"
// or better (PERFECT, SAFE, OK; then MEDIUM, EXPOSED, UNSAFE).
func TestSystemdUnitsSecurity(t *testing.T) {
	analyze := testdep.Binary(t, "LINKGATE_TEST_SYSTEMD_ANALYZE", "systemd-analyze")
	root := systemdRoot(t)
	var report strings.Builder
	for _, u := range units {
		cmd := exec.Command(analyze, "security", "--offline=yes", "--root="+root, "--no-pager", "etc/systemd/system/"+u)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		m := exposureRE.FindStringSubmatch(string(out))
		if err != nil || m == nil {
			t.Fatalf("systemd-analyze security %s: %v\n%s", u, err, out)
		}
		switch m[2] {
		case "PERFECT", "SAFE", "OK":
		default:
			t.Errorf("%s: exposure %s %s, want OK or better:\n%s", u, m[1], m[2], out)
		}
		report.WriteString(u + ": " + m[1] + " " + m[2] + "\n")
	}
	t.Logf("systemd-analyze security --offline=yes:\n%s", report.String())
	if dir := os.Getenv("LINKGATE_TEST_ARTIFACTS"); dir != "" {
		os.WriteFile(filepath.Join(dir, "systemd-security.txt"), []byte(report.String()), 0o644)
	}
}

// What the units run exists: ExecStart is a linkgate command, Type=notify
// (linkgate speaks the protocol), and every LINKGATE_* variable they set
// is one the command reads.
func TestSystemdUnitsRunLinkgate(t *testing.T) {
	bin := linkgate(t)
	for _, u := range units {
		keys := unitKeys(t, filepath.Join("systemd", u))
		exec0 := strings.Fields(keys["ExecStart"])
		if len(exec0) < 2 || exec0[0] != "/usr/local/bin/linkgate" {
			t.Fatalf("%s: ExecStart=%q", u, keys["ExecStart"])
		}
		help, err := exec.Command(bin, "help", exec0[1]).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: linkgate help %s: %v\n%s", u, exec0[1], err, help)
		}
		if keys["Type"] != "notify" || keys["WatchdogSec"] == "" {
			t.Errorf("%s: Type=%s WatchdogSec=%s", u, keys["Type"], keys["WatchdogSec"])
		}
		if env := keys["Environment"]; env != "" {
			name, _, _ := strings.Cut(env, "=")
			if !strings.Contains(string(help), "[$"+name+"]") {
				t.Errorf("%s sets %s, which linkgate %s does not read", u, name, exec0[1])
			}
		}
		for _, k := range []string{"DynamicUser", "StateDirectory", "ProtectSystem", "NoNewPrivileges", "CapabilityBoundingSet",
			"SystemCallFilter", "MemoryDenyWriteExecute", "LimitNOFILE"} {
			if _, ok := keys[k]; !ok {
				t.Errorf("%s: no %s=", u, k)
			}
		}
	}
}

// unitKeys returns a unit file's keys; a repeated key keeps its first value.
func unitKeys(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		if _, ok := keys[k]; !ok {
			keys[k] = v
		}
	}
	return keys
}

// syscallSet expands systemd's syscall groups (systemd-analyze
// syscall-filter) into the names they allow.
func syscallSet(t *testing.T, analyze string, groups ...string) map[string]bool {
	t.Helper()
	set := map[string]bool{}
	seen := map[string]bool{}
	var expand func(string)
	expand = func(group string) {
		if seen[group] {
			return
		}
		seen[group] = true
		out, err := exec.Command(analyze, "syscall-filter", "--no-pager", group).CombinedOutput()
		if err != nil {
			t.Fatalf("systemd-analyze syscall-filter %s: %v\n%s", group, err, out)
		}
		for i, line := range strings.Split(string(out), "\n") {
			name := strings.TrimSpace(line)
			switch {
			case i == 0, name == "", strings.HasPrefix(name, "#"):
			case strings.HasPrefix(name, "@"):
				expand(name)
			default:
				set[name] = true
			}
		}
	}
	for _, g := range groups {
		expand(g)
	}
	return set
}

// The units' SystemCallFilter= answers EPERM to any other call: every
// system call linkgate makes while serving (start, creates, redirects,
// visit flushes, a clean stop), traced with strace, must be allowed.
func TestSystemdSyscallFilter(t *testing.T) {
	analyze := testdep.Binary(t, "LINKGATE_TEST_SYSTEMD_ANALYZE", "systemd-analyze")
	strace := testdep.Binary(t, "LINKGATE_TEST_STRACE", "strace")
	for _, u := range units {
		allow, deny := []string{}, []string{}
		f, err := os.Open(filepath.Join("systemd", u))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			v, ok := strings.CutPrefix(sc.Text(), "SystemCallFilter=")
			switch {
			case !ok:
			case strings.HasPrefix(v, "~"):
				deny = append(deny, strings.Fields(v[1:])...)
			default:
				allow = append(allow, strings.Fields(v)...)
			}
		}
		f.Close()
		allowed := syscallSet(t, analyze, allow...)
		for name := range syscallSet(t, analyze, deny...) {
			delete(allowed, name)
		}
		t.Run(u, func(t *testing.T) {
			used := traceSyscalls(t, strace, u)
			var refused []string
			for _, name := range used {
				if !allowed[name] {
					refused = append(refused, name)
				}
			}
			if len(refused) > 0 {
				t.Errorf("%s's SystemCallFilter= refuses system calls linkgate makes: %v", u, refused)
			}
			t.Logf("%d distinct system calls, all allowed", len(used))
		})
	}
}

// traceSyscalls runs the unit's command under strace -f on loopback,
// exercises it, stops it with SIGTERM and returns the system calls made.
func traceSyscalls(t *testing.T, strace, unit string) []string {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "strace.txt")
	args := []string{"-f", "-qq", "-c", "-o", out, linkgate(t)}
	var exercise func(base string)
	switch unit {
	case "linkgate.service":
		args = append(args, "serve", "--addr", "127.0.0.1:0", "--store", "pebble:"+filepath.Join(dir, "links"), "--visits-flush-interval", "100ms")
		exercise = func(base string) {
			id := shorten(t, base, "https://example.com/traced")
			for range 3 {
				get(t, base+"/"+id, 302)
			}
			get(t, base+"/getFullURL/"+id, 200)
			get(t, base+"/healthz", 200)
			get(t, base+"/metrics", 200)
		}
	default:
		args = append(args, "gateway", "--listen", "127.0.0.1:0", "--listen-tls", "127.0.0.1:0", "--prometheus-listen", "", "--admin-key", "k",
			"--config-store", "bolt:"+filepath.Join(dir, "gateway.db"))
		exercise = func(base string) {
			put(t, base+"/apisix/admin/routes/1", "k", `{"uri":"/nowhere","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1":1}}}`)
			eventually(t, base+"/nowhere", http.StatusBadGateway) // the route reaches the router asynchronously
			get(t, base+"/apisix/admin/routes/1", 401)
		}
	}
	p := startLogged(t, strace, args...)
	exercise(p.url)
	p.stop(t)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) < 5 || strings.HasPrefix(f[0], "%") || strings.HasPrefix(f[0], "-") || f[len(f)-1] == "total" {
			continue
		}
		names = append(names, f[len(f)-1])
	}
	if len(names) < 10 {
		t.Fatalf("strace saw %d system calls:\n%s", len(names), data)
	}
	return names
}
