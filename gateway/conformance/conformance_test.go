package conformance_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/linkgate/linkgate/gateway/conformance"
	"github.com/linkgate/linkgate/internal/etcdtest"
	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/testdep"
)

// binary returns the linkgate binary to test: $LINKGATE_TEST_GATEWAY_BINARY
// (the test command points it at the release build), else one built from
// this tree.
func binary(t *testing.T) string {
	if b := os.Getenv("LINKGATE_TEST_GATEWAY_BINARY"); b != "" {
		return b
	}
	out := filepath.Join(t.TempDir(), "linkgate")
	cmd := exec.Command("go", "build", "-o", out, "github.com/linkgate/linkgate/cmd/linkgate")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// TestAPISIX runs every case file under testdata; see the package comment.
func TestAPISIX(t *testing.T) {
	dir := "testdata"
	if d := os.Getenv("LINKGATE_CONFORMANCE_DIR"); d != "" {
		dir = d // drafts, while porting
	}
	conformance.AllowDrafts = os.Getenv("LINKGATE_CONFORMANCE_DRAFTS") == "1"
	files, err := conformance.LoadFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	up, err := conformance.StartUpstream()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	if !up.Fixed() {
		t.Logf("the test upstream is not on 127.0.0.1:1980-1983 (busy): chash cases may pick other nodes than APISIX's")
	}
	etcd := &testEtcd{t: t}
	defer func() {
		if etcd.cli != nil {
			etcd.cli.Close()
		}
	}()
	env := conformance.Env{Binary: binary(t), Upstream: up, TempDir: t.TempDir(), Etcd: etcd}
	// The redis files run one at a time on a redis-server of their own: each
	// starts on an empty database (FLUSHALL), which must not touch the
	// test command's redis that other packages use at the same time.
	needsRedis := func(f *conformance.File) bool { return strings.Contains(f.Source, "redis") }
	redis := &testRedis{t: t}
	defer redis.stop()

	var mu sync.Mutex
	sums := make([]conformance.FileSummary, len(files))
	sem := make(chan struct{}, max(2, runtime.NumCPU()))
	t.Run("files", func(t *testing.T) {
		for i, f := range files {
			t.Run(strings.TrimSuffix(f.Path, ".yaml"), func(t *testing.T) {
				t.Parallel()
				env := env
				if needsRedis(f) {
					env.Redis = redis.addr(t)
					redis.Lock()
					defer redis.Unlock()
				}
				sem <- struct{}{}
				results := conformance.RunFile(env, f)
				<-sem
				for _, r := range results {
					switch {
					case r.Skipped != "":
						t.Logf("%s: skipped: %s", r.Name, r.Skipped)
					case r.Err == nil && r.Differs != "":
						t.Errorf("%s passes but is marked differs (%s): remove the mark and its line in docs/gateway.md", r.Name, r.Differs)
					case r.Err != nil && r.Differs != "":
						t.Logf("%s: differs (deliberate): %s", r.Name, r.Differs)
					case r.Err == nil && r.Gap != "":
						t.Errorf("%s passes but is marked gap (%s): remove the mark", r.Name, r.Gap)
					case r.Err != nil && r.Gap != "":
						t.Logf("%s: gap (known, not deliberate): %s: %v", r.Name, r.Gap, r.Err)
					case r.Err != nil:
						t.Errorf("%s: %v", r.Name, r.Err)
					}
				}
				mu.Lock()
				sums[i] = conformance.Summarize(f, results)
				mu.Unlock()
			})
		}
	})
	table := conformance.Tables(sums)
	t.Logf("APISIX conformance (go test -v -run TestAPISIX ./gateway/conformance/):\n%s", table)
	if dir := os.Getenv("LINKGATE_TEST_ARTIFACTS"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "conformance.md"), []byte(table), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func TestTable(t *testing.T) {
	f := &conformance.File{Source: "t/admin/x.t", Cases: make([]conformance.Case, 4)}
	s := conformance.Summarize(f, []conformance.Result{
		{Name: "x.t:TEST 1"},
		{Name: "x.t:TEST 2", Skipped: "needs Lua"},
		{Name: "x.t:TEST 3", Differs: "d", Err: fmt.Errorf("e")},
		{Name: "x.t:TEST 4", Err: fmt.Errorf("e")},
	})
	want := conformance.FileSummary{Source: "t/admin/x.t", Blocks: 4, Ported: 3, Pass: 1, Differs: 1, Failed: 1, Skipped: 1}
	if s != want {
		t.Fatalf("Summarize = %+v, want %+v", s, want)
	}
	g := conformance.Summarize(&conformance.File{Source: "t/admin/y.t", Cases: make([]conformance.Case, 2)}, []conformance.Result{
		{Name: "y.t:TEST 1"}, {Name: "y.t:TEST 2", Gap: "g", Err: fmt.Errorf("e")},
	})
	if wg := (conformance.FileSummary{Source: "t/admin/y.t", Blocks: 2, Ported: 2, Pass: 1, Gaps: 1}); g != wg {
		t.Fatalf("Summarize = %+v, want %+v", g, wg)
	}
	if got := conformance.Table([]conformance.FileSummary{g}); !strings.Contains(got, "| t/admin/y.t | 2 | 2 | 1 | 0 | 1 | 0 | 0 |") {
		t.Errorf("table lacks the gap column:\n%s", got)
	}
	if s != want {
		t.Fatalf("Summarize = %+v, want %+v", s, want)
	}
	got := conformance.Table([]conformance.FileSummary{s})
	for _, line := range []string{
		"| t/admin/x.t | 4 | 3 | 1 | 1 | 1 | 1 |",
		"| **t/admin/** | 4 | 3 | 1 | 1 | 1 | 1 |",
		"| **total** | 4 | 3 | 1 | 1 | 1 | 1 |",
		"Pass rate: 1 of 3 ported cases (33.3 %); 1 TEST blocks skipped.",
	} {
		if !strings.Contains(got, line) {
			t.Errorf("table lacks %q:\n%s", line, got)
		}
	}
}

// testEtcd is an embedded etcd server for the files with store: etcd.
type testEtcd struct {
	sync.Mutex
	once sync.Once
	t    *testing.T
	srv  *etcdtest.Server
	cli  *clientv3.Client
	err  error
}

func (e *testEtcd) start() error {
	e.once.Do(func() {
		e.srv = etcdtest.Start(e.t)
		e.cli, e.err = clientv3.New(clientv3.Config{Endpoints: []string{e.srv.Endpoint()}, DialTimeout: 5 * time.Second})
	})
	return e.err
}

func (e *testEtcd) Endpoint() string { _ = e.start(); return e.srv.Endpoint() }

func (e *testEtcd) Reset() error {
	if err := e.start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := e.cli.Delete(ctx, "/apisix/", clientv3.WithPrefix())
	return err
}

func (e *testEtcd) Put(key, value string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := e.cli.Put(ctx, "/apisix"+key, value)
	return err
}

func (e *testEtcd) Delete(key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := e.cli.Delete(ctx, "/apisix"+key)
	return err
}

// testRedis is a redis-server of the conformance suite's own, on loopback,
// started for the first file that needs it.
type testRedis struct {
	sync.Mutex // held by the file using it
	once       sync.Once
	t          *testing.T
	cmd        *exec.Cmd
	address    string
	err        error
}

func (r *testRedis) addr(t *testing.T) string {
	bin := testdep.Binary(t, testdep.RedisServer, "redis-server")
	r.once.Do(func() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			r.err = err
			return
		}
		r.address = ln.Addr().String()
		_, port, _ := net.SplitHostPort(r.address)
		ln.Close()
		r.cmd = exec.Command(bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no")
		if r.err = r.cmd.Start(); r.err != nil {
			return
		}
		eventually.Within(10*time.Second, func() bool {
			c, err := net.Dial("tcp", r.address)
			if r.err = err; err == nil {
				c.Close()
			}
			return err == nil
		})
	})
	if r.err != nil {
		t.Fatalf("redis-server: %v", r.err)
	}
	return r.address
}

func (r *testRedis) stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
	}
}
