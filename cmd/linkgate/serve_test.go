package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/syncbuf"
	"github.com/linkgate/linkgate/shortener/pebble"
)

// End-to-end tests of `linkgate serve`: the real run() on 127.0.0.1:0 in
// this process, and the real binary in child processes.

var listenRE = regexp.MustCompile(`"msg":"linkgate serve listening","addr":"([^"]+)"`)

// served is a `linkgate serve` running in-process.
type served struct {
	URL    string
	DB     string
	logs   *syncbuf.Buffer
	cancel context.CancelFunc
	done   chan error
}

// startServe runs run("serve", …) with a pebble store in a temporary
// directory, waits until it listens and /healthz answers, and stops it at
// cleanup.
func startServe(t *testing.T, env map[string]string, args ...string) *served {
	t.Helper()
	db := filepath.Join(t.TempDir(), "data", "links")
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{DB: db, logs: &syncbuf.Buffer{}, cancel: cancel, done: make(chan error, 1)}
	full := append([]string{"serve", "--addr", "127.0.0.1:0", "--store", "pebble:" + db, "--log-format", "json"}, args...)
	go func() {
		s.done <- run(ctx, full, func(k string) string { return env[k] }, strings.NewReader(""), io.Discard, s.logs)
	}()
	t.Cleanup(func() { s.stop(t) })
	eventually.True(t, 10*time.Second, "serve to listen", func() bool {
		select {
		case err := <-s.done:
			t.Fatalf("serve exited early: %v\n%s", err, s.logs)
		default:
		}
		m := listenRE.FindStringSubmatch(s.logs.String())
		if m != nil {
			s.URL = "http://" + m[1]
		}
		return m != nil
	})
	waitHealthy(t, s.URL)
	return s
}

// stop cancels run (as SIGTERM would) and returns its error; idempotent.
func (s *served) stop(t *testing.T) error {
	t.Helper()
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	s.cancel = nil
	select {
	case err := <-s.done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("serve did not stop:\n%s", s.logs)
		return nil
	}
}

func waitHealthy(t *testing.T, base string) {
	t.Helper()
	eventually.True(t, 10*time.Second, base+"/healthz to answer 200", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

var noRedirects = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// call sends a request and returns status, headers and body. A busy
// machine (-race, a loaded CI) can make the admission control shed a
// request: call asks again, as a client does after its Retry-After, for
// up to 10 s; what the request did is never in doubt, since a shed
// request was not started.
func call(t testing.TB, method, url, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	var status int
	var h http.Header
	var b string
	eventually.True(t, 10*time.Second, fmt.Sprintf("an answer to %s %s the admission control did not shed", method, url), func() bool {
		status, h, b = callOnce(t, method, url, body, hdr...)
		return !shed(status, b)
	})
	return status, h, b
}

// callOnce sends one request and returns status, headers and body.
func callOnce(t testing.TB, method, url, body string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1] // net/http sends req.Host, never Header["Host"]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// shorten does the seed's first command and returns the id.
func shorten(t testing.TB, base, target string) string {
	t.Helper()
	status, _, body := call(t, "POST", base+"/shortenURL", `{"OriginalURL":"`+target+`"}`, "Content-Type", "application/json")
	var got struct{ ShortURL, OriginalURL string }
	if err := json.Unmarshal([]byte(body), &got); status != 201 || err != nil || got.OriginalURL != target {
		t.Fatalf("POST /shortenURL: %d %q", status, body)
	}
	return got.ShortURL
}

// shed says whether an answer is the admission control's (a request shed
// while the machine is busy, as under -race), which says nothing about
// what a test checks: call asks again.
func shed(status int, body string) bool {
	return status == 503 && strings.Contains(body, `"overloaded"`)
}

func TestServeEndToEnd(t *testing.T) {
	s := startServe(t, nil, "--admin-key", "k3y", "--public-url", "https://sho.rt")
	// The seed's two commands.
	id := shorten(t, s.URL, "https://aws.amazon.com/ec2/graviton/")
	if status, _, body := call(t, "GET", s.URL+"/getFullURL/"+id, ""); status != 200 || body != `"https://aws.amazon.com/ec2/graviton/"` {
		t.Errorf("GET /getFullURL: %d %q", status, body)
	}
	if status, hdr, _ := call(t, "GET", s.URL+"/"+id, ""); status != 302 || hdr.Get("Location") != "https://aws.amazon.com/ec2/graviton/" {
		t.Errorf("redirect: %d %q", status, hdr.Get("Location"))
	}
	status, hdr, body := call(t, "POST", s.URL+"/api/v1/links", `{"url":"https://example.com/x","slug":"e2e-slug"}`)
	if status != 201 || hdr.Get("Location") != "/api/v1/links/e2e-slug" || !strings.Contains(body, `"short_url":"https://sho.rt/e2e-slug"`) {
		t.Errorf("POST /api/v1/links: %d %q %q", status, hdr.Get("Location"), body)
	}
	if status, _, body := call(t, "POST", s.URL+"/api/v1/links", `{"url":"https://sho.rt/loop"}`); status != 400 || !strings.Contains(body, "self_reference") {
		t.Errorf("self reference via --public-url: %d %q", status, body)
	}
	if status, _, _ := call(t, "GET", s.URL+"/api/v1/links", "", "Authorization", "Bearer k3y"); status != 200 {
		t.Errorf("admin list: %d", status)
	}
	if status, _, _ := call(t, "GET", s.URL+"/readyz", ""); status != 200 {
		t.Errorf("readyz: %d", status)
	}
	if _, _, body := call(t, "GET", s.URL+"/metrics", ""); !strings.Contains(body, `linkgate_store_operation_duration_seconds_count{backend="pebble",op="create",result="ok"} 2`) ||
		!strings.Contains(body, "process_resident_memory_bytes") || !strings.Contains(body, "go_goroutines") ||
		!strings.Contains(body, "linkgate_pebble_disk_usage_bytes") || !strings.Contains(body, "linkgate_pebble_wal_fsync_latency_seconds_bucket") {
		t.Errorf("/metrics lacks store, pebble, process or Go metrics")
	}
	if err := s.stop(t); err != nil {
		t.Fatalf("serve returned %v after shutdown\n%s", err, s.logs)
	}
	for _, want := range []string{"shutting down", `"msg":"stopped"`} {
		if !strings.Contains(s.logs.String(), want) {
			t.Errorf("logs lack %q", want)
		}
	}
	// The store was closed: the file opens again and holds the links.
	st, err := pebble.Open(s.DB, pebble.Options{})
	if err != nil {
		t.Fatalf("reopen after shutdown: %v", err)
	}
	defer st.Close()
	if l, err := st.Get(context.Background(), id); err != nil || l.URL != "https://aws.amazon.com/ec2/graviton/" {
		t.Errorf("link after restart: %+v %v", l, err)
	}
}

func TestServeEnvironment(t *testing.T) {
	// Environment equivalents of flags; a flag wins.
	s := startServe(t, map[string]string{"LINKGATE_REDIRECT_STATUS": "301", "LINKGATE_ALLOW_SCHEMES": "https", "LINKGATE_ADMIN_KEY": "from-env"})
	id := shorten(t, s.URL, "https://env.example/")
	if status, hdr, _ := call(t, "GET", s.URL+"/"+id, ""); status != 301 || hdr.Get("Cache-Control") != "private, max-age=90" {
		t.Errorf("LINKGATE_REDIRECT_STATUS=301: %d %q", status, hdr.Get("Cache-Control"))
	}
	if status, _, body := call(t, "POST", s.URL+"/shortenURL", `{"OriginalURL":"http://env.example/"}`); status != 400 || !strings.Contains(body, "scheme_not_allowed") {
		t.Errorf("LINKGATE_ALLOW_SCHEMES=https: %d %q", status, body)
	}
	if status, _, _ := call(t, "GET", s.URL+"/api/v1/links", "", "X-API-Key", "from-env"); status != 200 {
		t.Errorf("LINKGATE_ADMIN_KEY: %d", status)
	}
	f := startServe(t, map[string]string{"LINKGATE_REDIRECT_STATUS": "301"}, "--redirect-status", "307")
	id = shorten(t, f.URL, "https://env.example/")
	if status, _, _ := call(t, "GET", f.URL+"/"+id, ""); status != 307 {
		t.Errorf("flag over env: %d", status)
	}
}

func TestServeBlocklistFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "blocklist.txt")
	if err := os.WriteFile(file, []byte("# phishing\nevil.example\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, nil, "--blocklist", file)
	if status, _, body := call(t, "POST", s.URL+"/shortenURL", `{"OriginalURL":"https://login.evil.example/"}`); status != 400 || !strings.Contains(body, "blocked_domain") {
		t.Errorf("blocked domain: %d %q", status, body)
	}
}

func TestServeUsageErrors(t *testing.T) {
	tmp := t.TempDir()
	bad := filepath.Join(tmp, "bad.txt")
	os.WriteFile(bad, []byte("https://not a domain/\n"), 0o600)
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"redirect status", []string{"--redirect-status", "303"}, 2, "303"},
		{"store kind", []string{"--store", "mysql:x"}, 2, "unknown store"},
		{"store form", []string{"--store", "links.db"}, 2, "pebble:DIR"},
		{"log format", []string{"--log-format", "xml"}, 2, "log format"},
		{"log level", []string{"--log-level", "loud"}, 2, "log level"},
		{"public url", []string{"--public-url", "sho.rt"}, 2, "public URL"},
		{"not-found url", []string{"--not-found-url", "/missing"}, 2, "not-found URL"},
		{"expired url loops", []string{"--public-url", "https://sho.rt", "--expired-url", "https://sho.rt/gone"}, 2, "loop"},
		{"max url length", []string{"--max-url-length", "0"}, 2, "max-url-length"},
		{"schemes", []string{"--allow-schemes", "ht tp"}, 2, "scheme"},
		{"argument", []string{"extra"}, 2, "no arguments"},
		{"unknown flag", []string{"--nope"}, 2, "nope"},
		{"blocklist missing", []string{"--blocklist", filepath.Join(tmp, "missing")}, 1, "blocklist"},
		{"blocklist junk", []string{"--blocklist", bad}, 1, "not a domain"},
		{"port taken", []string{"--addr", "127.0.0.1:-1"}, 1, "listen"},
		{"access log format", []string{"--access-log", "stdout", "--access-log-format", "common"}, 2, "--access-log-format"},
		{"access log unwritable", []string{"--access-log", tmp}, 1, "access log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"serve", "--store", "pebble:" + filepath.Join(tmp, tt.name, "links")}, tt.args...)
			var errOut syncbuf.Buffer
			err := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), io.Discard, &errOut)
			if code := cli.ExitCode(err); code != tt.code || !strings.Contains(fmt.Sprint(err)+errOut.String(), tt.msg) {
				t.Errorf("exit %d (%v), want %d mentioning %q; stderr %q", code, err, tt.code, tt.msg, errOut.String())
			}
		})
	}
}

// SIGTERM while creates are in flight: they are drained, and every create
// that was answered 201 is in the store afterwards.
// A SIGTERM (run's context ending) while serve opens a store that needs a
// migration — a store of format 2 (written by 5a7c83a), a bbolt store of
// release 096063f — stops the migration between two batches: run returns
// at once, without listening, and says so; the next open finishes the
// migration. (Red when the migration does not look at the context: serve
// migrates, listens, and only then stops.)
func TestServeStopsWhileOpeningTheStore(t *testing.T) {
	for _, c := range []struct {
		name, fixture, store string // store: --store, %s the copy's directory
		pebbleDir, id        string // what the next open serves, a link it has
	}{
		{"format 2", "../../shortener/pebble/testdata/format2-5a7c83a", "pebble:%s", "%s", "f2-one"},
		{"bbolt", "../../shortener/bolt/testdata/release-096063f", "bolt:%s/links.db", "%s/links", "fix000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			if err := os.CopyFS(dir, os.DirFS(c.fixture)); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // the signal arrived as the store began to open
			var logs syncbuf.Buffer
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--store", fmt.Sprintf(c.store, dir), "--log-format", "json"},
					func(string) string { return "" }, strings.NewReader(""), io.Discard, &logs)
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("run: %v\n%s", err, &logs)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("serve did not stop while opening the store:\n%s", &logs)
			}
			if out := logs.String(); !strings.Contains(out, `"msg":"stopped while opening the store; the next start resumes what the open was doing"`) ||
				!strings.Contains(out, "context canceled") || listenRE.MatchString(out) {
				t.Errorf("serve's log does not say it stopped while opening the store, before listening:\n%s", out)
			}
			s, err := openPebble(context.Background(), slog.New(slog.DiscardHandler), fmt.Sprintf(c.pebbleDir, dir), dir+"/links.db", -1)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if l, err := s.Get(context.Background(), c.id); err != nil || l.ID != c.id {
				t.Errorf("%s after the next open: %+v, %v", c.id, l, err)
			}
		})
	}
}

func TestServeDrainsOnShutdown(t *testing.T) {
	s := startServe(t, nil)
	var mu sync.Mutex
	created := map[string]string{}
	var wg sync.WaitGroup
	stopAt := time.Now().Add(300 * time.Millisecond)
	for w := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				target := fmt.Sprintf("https://drain.example/%d/%d", w, i)
				resp, err := http.Post(s.URL+"/shortenURL", "application/json", strings.NewReader(`{"OriginalURL":"`+target+`"}`))
				if err != nil {
					return // the server is gone
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 201 {
					if resp.StatusCode != 503 {
						t.Errorf("create during shutdown: %d %q", resp.StatusCode, body)
					}
					return
				}
				var got struct{ ShortURL string }
				json.Unmarshal(body, &got)
				mu.Lock()
				created[got.ShortURL] = target
				mu.Unlock()
				if time.Now().After(stopAt.Add(5 * time.Second)) {
					return
				}
			}
		})
	}
	time.Sleep(time.Until(stopAt)) // deliberate: creates run for 300 ms before the SIGTERM
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	st, err := pebble.Open(s.DB, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if len(created) == 0 {
		t.Fatal("no create succeeded before shutdown")
	}
	for id, target := range created {
		if l, err := st.Get(context.Background(), id); err != nil || l.URL != target {
			t.Fatalf("201'd link %s: %+v %v", id, l, err)
		}
	}
}

// buildLinkgate builds the linkgate binary of this tree once per test run.
var buildLinkgate = sync.OnceValues(func() (string, error) { return goBuild("linkgate") })

// buildFunction builds the Lambda function's bootstrap as make lambda
// ships it (scripts/lambda-package.sh), once per test run.
var buildFunction = sync.OnceValues(func() (string, error) {
	return goBuild("bootstrap", "-tags", "lambda.norpc,nopebble,functiononly")
})

// goBuild builds this package as name, in a new temporary folder.
func goBuild(name string, flags ...string) (string, error) {
	dir, err := os.MkdirTemp("", "linkgate-e2e-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	out, err := exec.Command("go", append(append([]string{"build"}, flags...), "-o", bin, ".")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// child is a `linkgate serve` process.
type child struct {
	cmd  *exec.Cmd
	URL  string
	logs *syncbuf.Buffer
}

// startChild starts argv (a linkgate binary, possibly behind an emulator)
// with serve flags (plus extra) and waits for it to listen.
func startChild(t *testing.T, argv []string, db string, extra ...string) *child {
	t.Helper()
	args := append(argv[1:], "serve", "--addr", "127.0.0.1:0", "--store", "pebble:"+db, "--log-format", "json")
	args = append(args, extra...)
	cmd := exec.Command(argv[0], args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AWS_") { // localAWSEnv, for a child on DynamoDB Local
			cmd.Env = append(cmd.Env, kv)
		}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, logs: &syncbuf.Buffer{}}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			c.logs.Write(append(sc.Bytes(), '\n'))
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case addr := <-found:
		c.URL = "http://" + addr
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("%v did not start listening:\n%s", argv, c.logs)
	}
	waitHealthy(t, c.URL)
	return c
}
