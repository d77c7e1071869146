package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// 64 clients asking at once for 2048-pixel QR codes of 64 links keep the
// real server's peak RSS under 256 MiB (drawn the obvious way, each cost
// ~31 MiB: about 2 GB in all).
func TestQRMemory(t *testing.T) {
	bin, err := buildLinkgate()
	if err != nil {
		t.Fatal(err)
	}
	c := startChild(t, []string{bin}, filepath.Join(t.TempDir(), "links.db"), "--max-inflight-qr", "64")
	t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait() })
	var ids []string
	for i := range 64 {
		_, _, body := call(t, "POST", c.URL+"/api/v1/links", fmt.Sprintf(`{"url":"https://example.com/qr/%d"}`, i))
		var l struct{ ID string }
		if err := json.Unmarshal([]byte(body), &l); err != nil || l.ID == "" {
			t.Fatalf("create: %q", body)
		}
		ids = append(ids, l.ID)
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			if status, hdr, body := call(t, "GET", c.URL+"/api/v1/links/"+id+"/qr?size=2048", ""); status != 200 || hdr.Get("Content-Type") != "image/png" {
				t.Errorf("QR of %s: %d %.100q", id, status, body)
			}
		})
	}
	wg.Wait()
	peak := peakRSS(t, c.cmd.Process.Pid)
	t.Logf("peak RSS after 64 concurrent 2048-px QR codes: %d MiB", peak>>20)
	if peak >= 256<<20 {
		t.Errorf("peak RSS %d MiB, want < 256 MiB", peak>>20)
	}
}

// peakRSS reads a process's VmHWM (peak resident set size) in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q", v)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

// --create-access key: creates need a key with links:create, made with
// linkgate keys create; a non-loopback listener with public creates warns.
func TestKeysCommandAndCreateAccess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "links")
	var out, errOut strings.Builder
	env := func(string) string { return "" }
	if err := run(t.Context(), []string{"keys", "--store", "pebble:" + dir, "create", "--name", "ci", "--scopes", "links:create"}, env, strings.NewReader(""), &out, &errOut); err != nil {
		t.Fatalf("keys create: %v\n%s", err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	token := lines[len(lines)-1]
	if !strings.HasPrefix(token, "lgk_") {
		t.Fatalf("keys create printed %q", out.String())
	}
	out.Reset()
	if err := run(t.Context(), []string{"keys", "--store", "pebble:" + dir, "list"}, env, strings.NewReader(""), &out, &errOut); err != nil || !strings.Contains(out.String(), " ci ") || strings.Contains(out.String(), "lgk_") {
		t.Fatalf("keys list: %v %q", err, out.String())
	}
	if err := run(t.Context(), []string{"keys", "create", "--store", "pebble:" + dir, "--name", "x", "--scopes", "links:everything"}, env, strings.NewReader(""), &out, &errOut); err == nil {
		t.Error("a key with an unknown scope was created")
	}
	// --help of a subcommand prints its usage and opens no store.
	untouched := filepath.Join(t.TempDir(), "untouched")
	for _, sub := range []string{"list", "revoke", "create"} {
		if err := run(t.Context(), []string{"keys", sub, "--store", "pebble:" + untouched, "--help"}, env, strings.NewReader(""), &out, &errOut); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("keys %s --help: %v", sub, err)
		}
	}
	if _, err := os.Stat(untouched); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("keys … --help opened the store: %v", err)
	}
	s := startServe(t, nil, "--store", "pebble:"+dir, "--create-access", "key")
	body := `{"url":"https://example.com/k"}`
	if status, _, _ := call(t, "POST", s.URL+"/api/v1/links", body); status != 401 {
		t.Errorf("anonymous create with --create-access key: %d", status)
	}
	if status, _, b := call(t, "POST", s.URL+"/api/v1/links", body, "Authorization", "Bearer "+token); status != 201 {
		t.Errorf("create with the key: %d %s", status, b)
	}
	if strings.Contains(s.logs.String(), "open link relay") {
		t.Error("a loopback listener warned")
	}
}

func TestLoopbackAddr(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:8080": true, "[::1]:80": true, "0.0.0.0:8080": false, "[::]:80": false, "192.0.2.1:80": false} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := loopbackAddr(a); got != want {
			t.Errorf("loopbackAddr(%s) = %v, want %v (a public listener with public creates must warn)", addr, got, want)
		}
	}
}

// --domain: requests must name a configured domain; links to any of them
// are refused as self-references.
func TestServeDomains(t *testing.T) {
	s := startServe(t, nil, "--domain", "sho.rt", "--domain", "http://go.example.com:8080")
	status, _, body := call(t, "POST", s.URL+"/api/v1/links", `{"url":"https://example.com/d"}`, "Host", "go.example.com:8080")
	if status != 201 || !strings.Contains(body, `"short_url":"http://go.example.com:8080/`) {
		t.Errorf("create on a domain: %d %s", status, body)
	}
	if status, _, body := call(t, "POST", s.URL+"/shortenURL", `{"OriginalURL":"https://example.com/d"}`, "Host", "evil.example"); status != 421 {
		t.Errorf("create with an unknown Host: %d %s", status, body)
	}
	for _, target := range []string{"https://sho.rt/x", "https://GO.example.com/y", "http://sho.rt./z"} {
		if status, _, body := call(t, "POST", s.URL+"/api/v1/links", `{"url":"`+target+`"}`, "Host", "sho.rt"); status != 400 || !strings.Contains(body, "self_reference") {
			t.Errorf("link to %s: %d %s", target, status, body)
		}
	}
	if status, _, _ := call(t, "GET", s.URL+"/healthz", ""); status != 200 {
		t.Errorf("healthz with the listener's address as Host: %d", status)
	}
}
