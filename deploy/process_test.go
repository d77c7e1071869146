package deploy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/syncbuf"
)

// proc is a linkgate process (possibly behind a wrapper such as strace)
// started by a test.
type proc struct {
	cmd    *exec.Cmd
	url    string // http://ADDR of its listener
	logs   syncbuf.Buffer
	exited chan error
}

var listeningRE = regexp.MustCompile(`listening"(?: addr=|,"addr":")([0-9.:\[\]]+)`)

// startLogged starts argv with env added to a minimal environment and
// waits until it logs its listen address.
func startLogged(t *testing.T, argv0 string, args ...string) *proc {
	t.Helper()
	return startEnv(t, nil, argv0, args...)
}

func startEnv(t *testing.T, env []string, argv0 string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(argv0, args...), exited: make(chan error, 1)}
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.logs, &p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() { p.cmd.Process.Kill() })
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m := listeningRE.FindStringSubmatch(p.logs.String()); m != nil {
			p.url = "http://" + m[1]
			return p
		}
		select {
		case err := <-p.exited:
			t.Fatalf("%s %v exited: %v\n%s", argv0, args, err, p.logs.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("%s %v did not listen within 60 s:\n%s", argv0, args, p.logs.String())
	return nil
}

// stop sends SIGTERM to linkgate (the wrapper's child, if it has one) and
// waits for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	pid := p.cmd.Process.Pid
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)); err == nil && len(strings.Fields(string(data))) > 0 {
		pid, _ = strconv.Atoi(strings.Fields(string(data))[0])
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit 30 s after SIGTERM:\n%s", p.logs.String())
	}
}

var noRedirect = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       10 * time.Second,
}

// do sends a request and checks its status (0: any 2xx); it returns the body.
func do(t *testing.T, method, url, body string, want int, hdr ...string) string {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if want == 0 && resp.StatusCode/100 == 2 {
		return string(b)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, url, resp.StatusCode, want, b)
	}
	return string(b)
}

func get(t *testing.T, url string, want int) string { t.Helper(); return do(t, "GET", url, "", want) }

// put writes an admin API resource.
func put(t *testing.T, url, key, body string) {
	t.Helper()
	do(t, "PUT", url, body, 0, "X-API-KEY", key)
}

// shorten creates a link through the seed's API and returns its id.
func shorten(t *testing.T, base, target string) string {
	t.Helper()
	body := do(t, "POST", base+"/shortenURL", `{"OriginalURL":"`+target+`"}`, http.StatusCreated, "Content-Type", "application/json")
	var created struct{ ShortURL string }
	if err := json.Unmarshal([]byte(body), &created); err != nil || created.ShortURL == "" {
		t.Fatalf("POST /shortenURL: %q %v", body, err)
	}
	return created.ShortURL
}
