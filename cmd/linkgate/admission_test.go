package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener/pebble"
)

// Issue 26 §1: the CPU the host does not give is not overload. A lone
// client sends creates one at a time while another sends redirects (the
// work the admission control protects), to a `linkgate serve` process
// with its default admission control, (a) while other processes keep
// every core busy, (b) inside a cgroup whose CPU quota is half a core.
// Not one request is shed. The controller of before (no floor, the
// scheduler's latency alone) shed creates in both.
func TestServeLoneClientUnderHostContention(t *testing.T) {
	bin, err := buildLinkgate()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		setup func(t *testing.T, pid int)
	}{
		{"other processes", func(t *testing.T, _ int) { hogs(t, 2*runtime.NumCPU()) }},
		{"cpu quota", func(t *testing.T, pid int) { cpuQuota(t, pid, 50_000, 100_000) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := startChild(t, []string{bin}, filepath.Join(t.TempDir(), "links"))
			t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait() })
			id := shorten(t, c.URL, "https://contention.example/")
			tt.setup(t, c.cmd.Process.Pid)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var redirects int
			wg.Go(func() { // redirects are served throughout
				cl := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
				for {
					select {
					case <-stop:
						return
					default:
					}
					resp, err := cl.Get(c.URL + "/" + id)
					if err != nil {
						t.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					redirects++
				}
			})
			statuses := map[int]int{}
			cl := &http.Client{Timeout: 10 * time.Second}
			for i := range 300 {
				resp, err := cl.Post(c.URL+"/api/v1/links", "application/json", strings.NewReader(fmt.Sprintf(`{"url":"https://contention.example/%d"}`, i)))
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				statuses[resp.StatusCode]++
			}
			close(stop)
			wg.Wait()
			if statuses[201] != 300 {
				t.Errorf("creates of a lone client: %v, want 300 × 201", statuses)
			}
			_, _, m := call(t, "GET", c.URL+"/metrics", "")
			if shed := metric(m, `linkgate_http_requests_shed_total{class="create"}`); shed != "0" {
				t.Errorf("%s creates shed", shed)
			}
			t.Logf("%d redirects meanwhile; create admission rate %s", redirects, metric(m, `linkgate_http_admission_rate{class="create"}`))
		})
	}
}

// metric returns the value of the series named exactly (with labels) in
// a Prometheus text exposition, or "".
func metric(exposition, series string) string {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(exposition)
	if m == nil {
		return ""
	}
	return m[1]
}

// hogs starts n processes that spin until the test ends.
func hogs(t *testing.T, n int) {
	t.Helper()
	for range n {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHog$")
		cmd.Env = append(os.Environ(), "LINKGATE_TEST_HOG=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
}

// TestHog is the process hogs starts: it spins on every P until killed,
// or until its parent is gone.
func TestHog(t *testing.T) {
	if os.Getenv("LINKGATE_TEST_HOG") != "1" {
		t.Skip("a helper process of TestServeLoneClientUnderHostContention")
	}
	parent := os.Getppid()
	go func() { // a hog outlives no test, even one killed
		for os.Getppid() == parent {
			// Polls: a parent's death sends a child no event it can wait on
			// (Pdeathsig follows the thread that forked it, not the process).
			time.Sleep(100 * time.Millisecond)
		}
		os.Exit(0)
	}()
	for range runtime.GOMAXPROCS(0) - 1 {
		go func() {
			//lint:ignore SA5002 a hog spins on purpose
			for {
			}
		}()
	}
	//lint:ignore SA5002 a hog spins on purpose
	for {
	}
}

// cpuQuota moves process pid into a new cgroup whose CPU quota is quota
// µs per period µs: cgroup v2's cpu.max where the unified hierarchy has
// the cpu controller, else cgroup v1's cpu.cfs_quota_us. It skips the
// test where neither can be made (not root, no cgroup file system, no
// cpu controller), saying why. At cleanup the process goes back to its
// parent group and the group is removed.
func cpuQuota(t *testing.T, pid int, quota, period int) {
	t.Helper()
	name := fmt.Sprintf("linkgate-test-%d", os.Getpid())
	type layout struct{ root, file, value string }
	var tried []string
	for _, l := range []layout{
		{"/sys/fs/cgroup", "cpu.max", fmt.Sprintf("%d %d", quota, period)},
		{"/sys/fs/cgroup/unified", "cpu.max", fmt.Sprintf("%d %d", quota, period)},
		{"/sys/fs/cgroup/cpu", "cpu.cfs_quota_us", strconv.Itoa(quota)},
	} {
		if l.file == "cpu.max" {
			b, err := os.ReadFile(filepath.Join(l.root, "cgroup.controllers"))
			if err != nil || !strings.Contains(" "+strings.TrimSpace(string(b))+" ", " cpu ") {
				tried = append(tried, l.root+": no cgroup v2 cpu controller")
				continue
			}
			// Children get the controller only if the root delegates it.
			os.WriteFile(filepath.Join(l.root, "cgroup.subtree_control"), []byte("+cpu"), 0)
		} else if _, err := os.Stat(filepath.Join(l.root, l.file)); err != nil {
			tried = append(tried, l.root+": no cgroup v1 cpu controller")
			continue
		}
		dir := filepath.Join(l.root, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", l.root, err))
			continue
		}
		write := func(file, v string) error { return os.WriteFile(filepath.Join(dir, file), []byte(v), 0) }
		var err error
		if l.file == "cpu.cfs_quota_us" {
			err = write("cpu.cfs_period_us", strconv.Itoa(period))
		}
		if err == nil {
			err = write(l.file, l.value)
		}
		if err == nil {
			err = write("cgroup.procs", strconv.Itoa(pid))
		}
		if err != nil {
			os.Remove(dir)
			tried = append(tried, fmt.Sprintf("%s: %v", dir, err))
			continue
		}
		t.Cleanup(func() {
			// Back to the parent, so that the group is empty.
			os.WriteFile(filepath.Join(l.root, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
			if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("remove cgroup: %v", err)
			}
		})
		t.Logf("process %d in %s, %s = %s", pid, dir, l.file, l.value)
		return
	}
	t.Skipf("no cgroup with a CPU quota can be made here: %s", strings.Join(tried, "; "))
}

// Issue 26 §2: SIGTERM while 32 keep-alive clients create links, each
// sending its next request as soon as it has an answer, or, for half of
// them, up to 4 ms after it. Every request
// sent is answered (the last one of each connection with Connection:
// close), no connection is closed on a client waiting for an answer, and
// every create answered 201 is in the store once the process has exited.
func TestServeDrainLosesNoAnswer(t *testing.T) {
	bin, err := buildLinkgate()
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "links")
	c := startChild(t, []string{bin}, db)
	t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait() })
	addr := strings.TrimPrefix(c.URL, "http://")
	const clients = 32
	var (
		mu      sync.Mutex
		created = map[string]string{}
		closes  int
		wg      sync.WaitGroup
		warm    sync.WaitGroup
	)
	warm.Add(clients)
	for w := range clients {
		wg.Go(func() {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				warm.Done()
				return
			}
			defer conn.Close()
			br := bufio.NewReader(conn)
			for i := 0; ; i++ {
				if i == 5 {
					warm.Done()
				}
				if w%2 == 1 { // half the clients think a little between requests
					time.Sleep(time.Duration(i%5) * time.Millisecond) // deliberate: a client's think time
				}
				body := fmt.Sprintf(`{"OriginalURL":"https://drain.example/%d/%d"}`, w, i)
				if _, err := fmt.Fprintf(conn, "POST /shortenURL HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
					t.Errorf("client %d: request %d: %v", w, i, err)
					return
				}
				conn.SetReadDeadline(time.Now().Add(30 * time.Second))
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Errorf("client %d: closed without an answer to request %d: %v", w, i, err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 201:
					var got struct{ ShortURL string }
					json.Unmarshal(b, &got)
					mu.Lock()
					created[got.ShortURL[strings.LastIndex(got.ShortURL, "/")+1:]] = fmt.Sprintf("https://drain.example/%d/%d", w, i)
					mu.Unlock()
				case 503: // shed: answered all the same
				default:
					t.Errorf("client %d: request %d: %d %s", w, i, resp.StatusCode, b)
				}
				if resp.Close {
					mu.Lock()
					closes++
					mu.Unlock()
					return
				}
			}
		})
	}
	warm.Wait()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, c.logs)
	}
	if closes != clients {
		t.Errorf("%d of %d connections ended with Connection: close", closes, clients)
	}
	st, err := pebble.Open(db, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for id, target := range created {
		if l, err := st.Get(context.Background(), id); err != nil || l.URL != target {
			t.Errorf("created %s (201) for %s: in the store %+v, %v", id, target, l, err)
		}
	}
	t.Logf("%d creates acknowledged", len(created))
}
