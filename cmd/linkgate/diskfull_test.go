//go:build linux && !nopebble

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/testdep"
	"github.com/linkgate/linkgate/shortener/pebble"
)

// A full disk under `linkgate serve`: the store on a small tmpfs, which
// another file fills. Creates answer 503 with the JSON error body and
// Retry-After (never a process exit, as pebble's own reaction to a failed
// write would be), redirects go on, /metrics says why, creates succeed
// again once the space is back, and every 201 is in the store.
func TestServeDiskFull(t *testing.T) {
	// The read index takes a 64 MiB chunk of the file system.
	mnt := testdep.Tmpfs(t, 160<<20)
	dir := filepath.Join(mnt, "links")
	s := startServe(t, nil, "--store", "pebble:"+dir, "--store-min-free", "16", "--visits=false")
	var ids []string
	for i := range 20 {
		ids = append(ids, shorten(t, s.URL, fmt.Sprintf("https://example.com/before/%d", i)))
	}

	var st unix.Statfs_t
	if err := unix.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	// Leave 8 MiB: less than --store-min-free.
	err = unix.Fallocate(int(f.Fd()), 0, 0, int64(st.Bavail)*st.Bsize-8<<20)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}

	// The guard looks at the free space at most every 100 ms: creates in
	// that window still succeed (and are durable).
	var status int
	var hdr map[string][]string
	var body string
	eventually.True(t, 10*time.Second, "a create refused on a nearly full disk", func() bool {
		status, hdr, body = call(t, "POST", s.URL+"/shortenURL", `{"OriginalURL":"https://example.com/refused"}`, "Content-Type", "application/json")
		if status == 201 {
			var got struct{ ShortURL string }
			if json.Unmarshal([]byte(body), &got) == nil {
				ids = append(ids, got.ShortURL)
			}
		}
		return status != 201
	})
	var e struct {
		Error struct{ Code, Message string }
	}
	if status != 503 || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != "unavailable" || e.Error.Message == "" || len(hdr["Retry-After"]) == 0 {
		t.Fatalf("create on a nearly full disk: %d %v %q, want 503 unavailable with a JSON body and Retry-After", status, hdr, body)
	}
	status, _, body = call(t, "POST", s.URL+"/api/v1/links", `{"url":"https://example.com/refused2"}`)
	if status != 503 || !strings.Contains(body, `"unavailable"`) {
		t.Errorf("POST /api/v1/links on a nearly full disk: %d %q", status, body)
	}
	for _, id := range ids {
		if status, _, _ := call(t, "GET", s.URL+"/"+id, ""); status != 302 {
			t.Fatalf("redirect of %s on a nearly full disk: %d", id, status)
		}
	}
	if _, _, m := call(t, "GET", s.URL+"/metrics", ""); !strings.Contains(m, "linkgate_pebble_writes_refused 1") || !strings.Contains(m, "linkgate_pebble_disk_min_free_bytes 1.6777216e+07") {
		t.Errorf("/metrics does not say writes are refused:\n%s", grepLines(m, "linkgate_pebble_"))
	}
	if !strings.Contains(s.logs.String(), "nearly full") {
		t.Errorf("no log line says the disk is nearly full:\n%s", s.logs)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "a create once space is back", func() bool {
		status, _, body = call(t, "POST", s.URL+"/shortenURL", `{"OriginalURL":"https://example.com/after"}`, "Content-Type", "application/json")
		return status == 201
	})
	ids = append(ids, shorten(t, s.URL, "https://example.com/after/1"))
	if err := s.stop(t); err != nil {
		t.Fatalf("serve: %v\n%s", err, s.logs)
	}
	st2, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	for _, id := range ids {
		if _, err := st2.Get(t.Context(), id); err != nil {
			t.Errorf("acknowledged create %s: %v", id, err)
		}
	}
}
