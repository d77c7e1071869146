package proxy_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/testcert"
	"github.com/linkgate/linkgate/internal/testdep"
)

// gatewayBinary is the linkgate binary to run: $LINKGATE_TEST_GATEWAY_BINARY
// (the release build, in CI) or one built now.
func gatewayBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("LINKGATE_TEST_GATEWAY_BINARY"); b != "" {
		return b
	}
	out := filepath.Join(t.TempDir(), "linkgate")
	cmd := exec.Command("go", "build", "-o", out, "github.com/linkgate/linkgate/cmd/linkgate")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

var listeningLine = regexp.MustCompile(`msg="gateway listening" addr=(\S+) .* tls=(\S+) `)

// procGateway runs `linkgate gateway` as a process and returns its data
// and TLS addresses and PID.
func procGateway(t *testing.T) (addr, tlsAddr string, pid int) {
	t.Helper()
	cmd := exec.Command(gatewayBinary(t), "gateway", "--listen", "127.0.0.1:0", "--listen-tls", "127.0.0.1:0", "--prometheus-listen", "",
		"--admin-key", adminKeyForProc, "--config-store", "bolt:"+filepath.Join(t.TempDir(), "gw.db"), "--log-level", "info")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway stderr:\n%s", stderr.String())
		}
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	var m []string
	if !eventually.Within(20*time.Second, func() bool {
		m = listeningLine.FindStringSubmatch(stderr.String())
		return m != nil
	}) {
		t.Fatalf("gateway did not start:\n%s", stderr.String())
	}
	return m[1], m[2], cmd.Process.Pid
}

const adminKeyForProc = "edd1c9f034335f136f87ad84b625c8f1"

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// rss reads a process's resident set size in bytes (0 once it is gone).
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// peakGrowth runs fn while sampling pid's RSS and returns the largest
// growth over its RSS before fn.
func peakGrowth(t *testing.T, pid int, fn func()) int64 {
	base := rss(pid)
	if base == 0 {
		t.Fatal("no RSS for the gateway process")
	}
	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if r := rss(pid); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	defer func() {
		close(stop)
		<-done
	}()
	fn()
	return peak.Load() - base
}

// TestStreamingMemory: a large download and a large upload pass through
// the real gateway process with its RSS growing by less than 32 MiB
// (LINKGATE_TEST_STREAM_MIB sets the size: 1024 for the issue's 1 GiB;
// the default, 256 MiB — 64 MiB under the race detector, as make test
// runs it — is eight (two) times the bound, so buffering cannot pass). A route whose plugin must rewrite the body shows the
// measurement: its body is buffered and the growth is seen.
func TestStreamingMemory(t *testing.T) {
	mib := int64(256)
	if testdep.Race {
		mib = 64 // the race detector slows the in-process client and upstream; still twice the bound
	}
	if s := os.Getenv("LINKGATE_TEST_STREAM_MIB"); s != "" {
		mib, _ = strconv.ParseInt(s, 10, 64)
	}
	n := mib << 20
	const bound = 32 << 20
	addr, tlsAddr, pid := procGateway(t)
	node := bodyUpstream(t, nil)
	admin := func(path, body string) {
		req, _ := http.NewRequest("PUT", "http://"+addr+"/apisix/admin/"+path, strings.NewReader(body))
		req.Header.Set("X-API-KEY", adminKeyForProc)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("PUT %s: %d", path, resp.StatusCode)
		}
	}
	up := `"upstream":{"type":"roundrobin","nodes":{"` + node + `":1}}`
	admin("routes/1", `{"uri":"/down",`+up+`}`)
	admin("routes/2", `{"uri":"/up",`+up+`}`)
	ca := testcert.NewCA(t, "memory test CA")
	pair := ca.Issue(t, testcert.Options{DNS: []string{"test.com"}})
	ssl, _ := json.Marshal(map[string]any{"cert": pair.CertPEM, "key": pair.KeyPEM, "sni": "test.com"})
	admin("ssl/1", string(ssl))
	var h2 http.Protocols
	h2.SetHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: &h2, TLSClientConfig: &tls.Config{ServerName: "test.com", RootCAs: ca.Pool()}}}
	admin("routes/3", `{"uri":"/rewrite/down","plugins":{"response-rewrite":{"filters":[{"regex":"^x","replace":"y"}]}},`+up+`}`)
	base := "http://" + addr
	eventually.True(t, 5*time.Second, "the routes are served", func() bool {
		resp, err := http.Get(base + "/rewrite/down?n=1")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	for _, tc := range []struct {
		name    string
		chunked bool
		base    string
		c       *http.Client
	}{
		{"HTTP/1.1", false, base, http.DefaultClient},
		{"HTTP/1.1 chunked", true, base, http.DefaultClient},
		{"HTTP/2 over TLS", true, "https://" + tlsAddr, h2c},
	} {
		chunked, base := tc.chunked, tc.base
		growth := peakGrowth(t, pid, func() {
			url := fmt.Sprintf("%s/down?n=%d", base, n)
			if chunked {
				url += "&chunked=1"
			}
			resp, err := tc.c.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.Copy(io.Discard, bufio.NewReaderSize(resp.Body, 64<<10))
			resp.Body.Close()
			if err != nil || got != n {
				t.Fatalf("download: %d of %d bytes, %v", got, n, err)
			}
		})
		t.Logf("%s: download %d MiB: gateway RSS grew %.1f MiB", tc.name, mib, float64(growth)/(1<<20))
		if growth >= bound {
			t.Errorf("%s: download: RSS grew %d MiB, want < 32 MiB", tc.name, growth>>20)
		}
		growth = peakGrowth(t, pid, func() {
			var body io.Reader = io.LimitReader(&pattern{}, n)
			if chunked {
				body = io.MultiReader(body)
			}
			req, _ := http.NewRequest("POST", base+"/up", body)
			if !chunked {
				req.ContentLength = n
			}
			resp, err := tc.c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := fmt.Sprintf("n=%d err=<nil>", n); !strings.HasPrefix(string(got), want) {
				t.Fatalf("upload: %q, want %q", got, want)
			}
		})
		t.Logf("%s: upload %d MiB: gateway RSS grew %.1f MiB", tc.name, mib, float64(growth)/(1<<20))
		if growth >= bound {
			t.Errorf("%s: upload: RSS grew %d MiB, want < 32 MiB", tc.name, growth>>20)
		}
	}
	// The control: 64 MiB through a body filter is held whole.
	growth := peakGrowth(t, pid, func() {
		resp, err := http.Get(fmt.Sprintf("%s/rewrite/down?n=%d", base, 64<<20))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		io.Copy(h, resp.Body)
		resp.Body.Close()
	})
	t.Logf("control, 64 MiB through response-rewrite: gateway RSS grew %.1f MiB", float64(growth)/(1<<20))
	if growth < 48<<20 {
		t.Errorf("a buffered 64 MiB body grew the RSS by only %d MiB: the measurement does not see buffering", growth>>20)
	}
}
