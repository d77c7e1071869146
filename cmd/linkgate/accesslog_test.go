package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/internal/eventually"
)

// logrotate's flow against serve: the access log is renamed, SIGHUP, and
// from then on lines go to a new file at the path; on SIGTERM every
// request answered is in one of the two, once.
func TestServeAccessLogRotate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	s := startServe(t, nil, "--access-log", path)
	get := func(p string) {
		if st, _, _ := call(t, "GET", s.URL+p, ""); st != 404 {
			t.Errorf("GET %s: %d", p, st)
		}
	}
	for i := range 20 {
		get(fmt.Sprintf("/before%d", i))
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "the access log to be reopened", func() bool {
		return strings.Contains(s.logs.String(), `"msg":"access log reopened"`)
	})
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			for i := range 25 {
				get(fmt.Sprintf("/after%d-%d", c, i))
			}
		})
	}
	wg.Wait()
	if _, _, body := call(t, "GET", s.URL+"/metrics", ""); !strings.Contains(body, "linkgate_access_log_dropped_total 0") {
		t.Errorf("metrics: no linkgate_access_log_dropped_total 0")
	}
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	old, cur := requestPaths(t, path+".1"), requestPaths(t, path)
	if old["before"] != 20 || old["after"] != 0 || cur["before"] != 0 || cur["after"] != 100 {
		t.Errorf("renamed file: %v; new file: %v; want 20 before, 100 after", old, cur)
	}
}

// requestPaths counts a combined access log's requests for /before… and
// /after…, failing on a line not in the format.
func requestPaths(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[0] != "127.0.0.1" || !strings.HasPrefix(fields[3], "[") {
			t.Fatalf("not a combined line: %q", sc.Text())
		}
		for _, p := range []string{"before", "after"} {
			if strings.HasPrefix(fields[6], "/"+p) {
				n[p]++
			}
		}
	}
	return n
}

// What `linkgate help serve` says of the admin routes without
// --admin-key is what the server answers: 401 on a store that keeps API
// keys (pebble), for every admin route.
func TestServeAdminWithoutKeyAnswers401(t *testing.T) {
	var help strings.Builder
	runServe(t.Context(), []string{"-h"}, cli.Env{Getenv: func(string) string { return "" }, Stdout: &help, Stderr: &help})
	if !strings.Contains(strings.Join(strings.Fields(help.String()), " "), "a request without a valid one answers 401") {
		t.Fatalf("help serve does not say 401:\n%s", help.String())
	}
	s := startServe(t, nil)
	for _, r := range [][2]string{{"GET", "/api/v1/links"}, {"DELETE", "/api/v1/links/abc"}, {"GET", "/api/v1/keys"}, {"GET", "/api/v1/export"}} {
		if st, hdr, body := call(t, r[0], s.URL+r[1], ""); st != 401 || hdr.Get("WWW-Authenticate") == "" {
			t.Errorf("%s %s without a key: %d %q, want 401 with WWW-Authenticate", r[0], r[1], st, body)
		}
	}
}
