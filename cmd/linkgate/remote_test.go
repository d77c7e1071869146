//go:build !nopebble

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/internal/syncbuf"
	"github.com/linkgate/linkgate/shortener/pebble"
)

// runEnv runs the linkgate command line args in-process with the
// environment env.
func runEnv(t *testing.T, env map[string]string, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut syncbuf.Buffer
	err := run(context.Background(), args, func(k string) string { return env[k] }, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

// The keys, links and store commands work against a running server
// through its API (--server, LINKGATE_SERVER; the key from
// LINKGATE_API_KEY or --key-file), with the key's scopes, and print for
// people or, with --json, the API's JSON.
func TestCLIAgainstServer(t *testing.T) {
	s := startServe(t, nil, "--admin-key", "adm1n-key")
	admin := map[string]string{"LINKGATE_SERVER": s.URL, "LINKGATE_API_KEY": "adm1n-key"}
	mustRun := func(env map[string]string, stdin string, args ...string) string {
		t.Helper()
		out, errOut, err := runEnv(t, env, stdin, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s%s", args, err, out, errOut)
		}
		return out
	}

	// keys
	out := mustRun(admin, "", "keys", "create", "--name", "ci", "--scopes", "links:create,links:read", "--json")
	var key struct{ ID, Token string }
	if err := json.Unmarshal([]byte(out), &key); err != nil || !strings.HasPrefix(key.Token, "lgk_") {
		t.Fatalf("keys create --json: %q %v", out, err)
	}
	if out := mustRun(admin, "", "keys", "list"); !strings.Contains(out, key.ID) || !strings.Contains(out, "links:create,links:read") || strings.Contains(out, key.Token) {
		t.Errorf("keys list:\n%s", out)
	}
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(key.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ci := map[string]string{"LINKGATE_SERVER": s.URL}

	// links, with the ci key from a file
	out = mustRun(ci, "", "links", "create", "https://cli.example/one", "--slug", "cli-one", "--tags", "b,a", "--max-visits", "5", "--key-file", keyFile)
	if !strings.Contains(out, "created "+s.URL+"/cli-one → https://cli.example/one") || !strings.Contains(out, "a,b") {
		t.Errorf("links create:\n%s", out)
	}
	out = mustRun(ci, "", "links", "get", "cli-one", "--json", "--key-file", keyFile)
	var l struct {
		URL       string `json:"url"`
		MaxVisits int    `json:"max_visits"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil || l.URL != "https://cli.example/one" || l.MaxVisits != 5 {
		t.Errorf("links get --json: %q %v", out, err)
	}
	if out := mustRun(ci, "", "links", "--key-file", keyFile, "list", "--tag", "a"); !strings.Contains(out, "cli-one") || !strings.Contains(out, "https://cli.example/one") {
		t.Errorf("links list:\n%s", out)
	}
	if _, errOut, err := runEnv(t, ci, "", "links", "edit", "cli-one", "--url", "https://cli.example/x", "--key-file", keyFile); err == nil || !strings.Contains(err.Error(), "lacks the scope links:write") {
		t.Errorf("links edit with a key without links:write: %v %s", err, errOut)
	}
	out = mustRun(admin, "", "links", "edit", "cli-one", "--url", "https://cli.example/edited", "--max-visits", "0", "--tags", "")
	if !strings.Contains(out, "edited") || !strings.Contains(out, "https://cli.example/edited") || !strings.Contains(out, "max visits  -") {
		t.Errorf("links edit:\n%s", out)
	}
	mustRun(admin, "", "links", "delete", "cli-one")
	if _, _, err := runEnv(t, admin, "", "links", "get", "cli-one"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("links get after delete: %v", err)
	}
	mustRun(admin, "", "keys", "revoke", key.ID)
	if _, _, err := runEnv(t, ci, "", "links", "list", "--key-file", keyFile); err == nil || !strings.Contains(err.Error(), "unknown or revoked") {
		t.Errorf("a revoked key: %v", err)
	}
	// No flag takes a key, and --server without one says where to put it.
	if _, _, err := runEnv(t, ci, "", "links", "list", "--key", "adm1n-key"); err == nil || !strings.Contains(err.Error(), "flag provided but not defined: -key") {
		t.Errorf("--key: %v", err)
	}
	if _, _, err := runEnv(t, ci, "", "keys", "list"); err == nil || !strings.Contains(err.Error(), "LINKGATE_API_KEY") {
		t.Errorf("--server without a key: %v", err)
	}

	// store export, import, backup through the API
	for i, target := range []string{"https://bulk.example/0", "https://bulk.example/1", "https://bulk.example/2"} {
		mustRun(admin, "", "links", "create", target, "--slug", "bulk-"+string(rune('a'+i)))
	}
	export := mustRun(admin, "", "store", "export")
	if strings.Count(export, "\n") != 3 || !strings.Contains(export, `"id":"bulk-a"`) {
		t.Fatalf("store export:\n%s", export)
	}
	if csv := mustRun(admin, "", "store", "export", "--format", "csv"); !strings.HasPrefix(csv, "id,url,") || strings.Count(csv, "\n") != 4 {
		t.Errorf("store export --format csv:\n%s", csv)
	}
	if out := mustRun(admin, export, "store", "import"); !strings.Contains(out, "0 imported, 3 already there, 0 conflicting, 0 bad lines") {
		t.Errorf("store import of the export: %s", out)
	}
	in := strings.Replace(export, "https://bulk.example/1", "https://other.example/", 1) + "not json\n" +
		`{"id":"bulk-new","url":"https://bulk.example/new"}` + "\n"
	out, errOut, err := runEnv(t, admin, in, "store", "import")
	if err == nil || !strings.Contains(out, "1 imported, 2 already there, 1 conflicting, 1 bad lines") ||
		!strings.Contains(errOut, "line 2: conflict: bulk-b holds another link") || !strings.Contains(errOut, "line 4:") {
		t.Errorf("store import with a conflict and a bad line: %v\n%s%s", err, out, errOut)
	}
	yourls := filepath.Join("..", "..", "shortener", "importer", "testdata", "yourls.csv")
	if out, errOut, _ := runEnv(t, admin, "", "store", "import", "--format", "yourls", yourls); !strings.Contains(out, "2 imported") || !strings.Contains(errOut, "line 4: id \"bad key\"") {
		t.Errorf("store import --format yourls: %s%s", out, errOut)
	}
	backup := filepath.Join(t.TempDir(), "backup")
	if out := mustRun(admin, "", "store", "backup", backup); !strings.Contains(out, "written to "+backup) {
		t.Errorf("store backup: %s", out)
	}
	b, err := pebble.Open(backup, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if l, err := b.Get(context.Background(), "bulk-new"); err != nil || l.URL != "https://bulk.example/new" {
		t.Errorf("the backup's link: %+v %v", l, err)
	}
}

// Without --server the links command works on a stopped store directly.
func TestLinksCommandOnStore(t *testing.T) {
	db := "pebble:" + filepath.Join(t.TempDir(), "links")
	none := map[string]string{}
	out, errOut, err := runEnv(t, none, "", "links", "create", "https://direct.example/", "--slug", "direct", "--store", db, "--expires", "720h")
	if err != nil || !strings.Contains(out, "created direct → https://direct.example/") {
		t.Fatalf("links create: %v\n%s%s", err, out, errOut)
	}
	out, _, err = runEnv(t, none, "", "links", "list", "--store", db, "--json")
	if err != nil || !strings.Contains(out, `"id":"direct"`) || !strings.Contains(out, `"expires_at":"20`) {
		t.Errorf("links list: %v\n%s", err, out)
	}
	out, _, err = runEnv(t, none, "", "links", "edit", "direct", "--expires", "never", "--store", db)
	if err != nil || !strings.Contains(out, "expires     -") {
		t.Errorf("links edit: %v\n%s", err, out)
	}
	if _, _, err := runEnv(t, none, "", "links", "delete", "direct", "--store", db); err != nil {
		t.Error(err)
	}
}
