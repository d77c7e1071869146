//go:build !nopebble

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/bolt/bolttest"
	"github.com/linkgate/linkgate/shortener/pebble"
)

// Each importer reads a sample in its project's format (the importer
// package's): the valid lines are imported with their URL, time and
// visit count, the others reported by line, and a second run changes
// nothing.
func TestStoreImportFormats(t *testing.T) {
	ts := func(s string) time.Time { t, _ := time.Parse(time.RFC3339, s); return t.UTC() }
	tests := []struct {
		format, file string
		counts       string                    // the summary of the first run
		bad          []string                  // per-line reports it must contain
		want         map[string]shortener.Link // some of the links
	}{
		{"yourls", "yourls.csv", "2 imported, 0 already there, 0 conflicting, 2 bad lines",
			[]string{"line 4: id \"bad key\"", "line 5: nourl: URL"},
			map[string]shortener.Link{"ozh": {URL: "https://ozh.org/", CreatedAt: ts("2009-06-14T16:39:19Z"), Visits: 42}}},
		{"yourls-sql", "yourls.sql", "3 imported, 0 already there, 0 conflicting, 1 bad lines",
			[]string{"line 20: id \"b@d\""},
			map[string]shortener.Link{"yourls": {URL: "https://yourls.org/?a=1&b='2'", CreatedAt: ts("2009-06-14T16:39:20Z"), Visits: 7},
				"with-nl": {URL: "https://example.com/x", CreatedAt: ts("2021-03-04T05:06:07Z")}}},
		{"kutt", "kutt.json", "2 imported, 0 already there, 0 conflicting, 1 bad lines",
			[]string{"line 3: time \"not a date\""},
			map[string]shortener.Link{"gh": {URL: "https://github.com/thedevs-network/kutt", CreatedAt: ts("2024-01-15T09:30:00Z"), Visits: 12},
				"soon": {URL: "https://example.com/soon", CreatedAt: ts("2024-02-01T00:00:00Z"), ExpiresAt: ts("2030-02-01T00:00:00Z")}}},
		{"shlink", "shlink.csv", "2 imported, 0 already there, 0 conflicting, 1 bad lines",
			[]string{"line 4: id \"\""},
			map[string]shortener.Link{"abc123": {URL: "https://shlink.io/documentation/", CreatedAt: ts("2023-05-02T08:11:12Z"), Visits: 31}}},
		{"bitly", "bitly.csv", "2 imported, 0 already there, 0 conflicting, 0 bad lines", nil,
			map[string]shortener.Link{"3xYzAbC": {URL: "https://www.example.com/landing?x=1", CreatedAt: ts("2022-11-05T14:22:01Z"), Visits: 128}}},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "links")
			file := filepath.Join("..", "..", "shortener", "importer", "testdata", tt.file)
			out, errOut, err := runCmd(t, "", "store", "import", "--store", "pebble:"+dir, "--format", tt.format, file)
			if !strings.Contains(out, tt.counts) {
				t.Fatalf("summary %q, want %q (err %v)\n%s", out, tt.counts, err, errOut)
			}
			if (err != nil) != (len(tt.bad) > 0) {
				t.Errorf("error %v with %d bad lines", err, len(tt.bad))
			}
			for _, b := range tt.bad {
				if !strings.Contains(errOut, b) {
					t.Errorf("stderr lacks %q:\n%s", b, errOut)
				}
			}
			got := map[string]shortener.Link{}
			for _, r := range exportAll(t, dir) {
				got[r.Link.ID] = r.Link
			}
			for id, w := range tt.want {
				w.ID = id
				if g := got[id]; g.URL != w.URL || !g.CreatedAt.Equal(w.CreatedAt) || !g.ExpiresAt.Equal(w.ExpiresAt) || g.Visits != w.Visits {
					t.Errorf("%s: got %+v, want %+v", id, g, w)
				}
			}
			out, _, _ = runCmd(t, "", "store", "import", "--store", "pebble:"+dir, "--format", tt.format, file)
			if !strings.Contains(out, "0 imported, "+strings.Fields(tt.counts)[0]+" already there") {
				t.Errorf("second run: %q", out)
			}
		})
	}
}

// Export and import in JSON Lines carry every field and the statistics;
// a conflicting line is reported and changes nothing; CSV export has the
// totals.
func TestStoreExportImportRoundTrip(t *testing.T) {
	old, want := bolttest.Fixture(t)
	src := filepath.Join(t.TempDir(), "src")
	if _, _, err := runCmd(t, "", "store", "migrate", "--from", "bolt:"+old, "--to", "pebble:"+src); err != nil {
		t.Fatal(err)
	}
	jsonl, _, err := runCmd(t, "", "store", "export", "--store", "pebble:"+src)
	if err != nil || strings.Count(jsonl, "\n") != len(want) {
		t.Fatalf("export: %v, %d lines", err, strings.Count(jsonl, "\n"))
	}
	dst := filepath.Join(t.TempDir(), "dst")
	if out, errOut, err := runCmd(t, jsonl, "store", "import", "--store", "pebble:"+dst); err != nil {
		t.Fatalf("import: %v %s %s", err, out, errOut)
	}
	wantRecords(t, exportAll(t, dst), want)
	changed := strings.Replace(jsonl, "https://fixture.example/late/3", "https://other.example/", 1) + "not json\n"
	out, errOut, err := runCmd(t, changed, "store", "import", "--store", "pebble:"+dst)
	if err == nil || !strings.Contains(out, "0 imported, 47 already there, 1 conflicting, 1 bad lines") ||
		!strings.Contains(errOut, "conflict: late03") || !strings.Contains(errOut, "line 49:") {
		t.Errorf("import with a conflict: %v\n%s\n%s", err, out, errOut)
	}
	wantRecords(t, exportAll(t, dst), want)
	csvOut, _, err := runCmd(t, "", "store", "export", "--store", "pebble:"+src, "--format", "csv")
	if err != nil || !strings.HasPrefix(csvOut, "id,url,created_at,expires_at,max_visits,visits,total,bots,domain\n") || !strings.Contains(csvOut, "\nfix000,") {
		t.Errorf("CSV export: %v\n%.300s", err, csvOut)
	}
}

// Tags and forward_query go through an export and an import; tags an
// import is given are validated as the API's.
func TestStoreExportImportTags(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	s, err := pebble.Open(src, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	links := []shortener.Link{
		{ID: "tagged", URL: "https://t.example/", CreatedAt: time.Unix(1.9e9, 0).UTC(), Tags: []string{"a", "b:c"}, ForwardQuery: shortener.ForwardOn},
		{ID: "untagged", URL: "https://u.example/", CreatedAt: time.Unix(1.9e9, 0).UTC(), ForwardQuery: shortener.ForwardOff},
	}
	for _, l := range links {
		if err := s.Create(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	jsonl, _, err := runCmd(t, "", "store", "export", "--store", "pebble:"+src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "dst")
	if out, errOut, err := runCmd(t, jsonl, "store", "import", "--store", "pebble:"+dst); err != nil {
		t.Fatalf("import: %v %s %s", err, out, errOut)
	}
	wantRecords(t, exportAll(t, dst), []shortener.LinkRecord{{Link: links[0]}, {Link: links[1]}})
	bad := `{"id":"badtags","url":"https://b.example/","tags":["no spaces"]}` + "\n"
	if out, _, err := runCmd(t, bad, "store", "import", "--store", "pebble:"+dst); err == nil || !strings.Contains(out, "1 bad lines") {
		t.Errorf("import of a bad tag: %v %s", err, out)
	}
}

// A link's domain goes through an export and an import, in JSON Lines
// and in CSV: the same slug on two domains stays two links; links of the
// default domain carry no domain.
func TestStoreExportImportDomains(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	s, err := pebble.Open(src, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	created := time.Unix(1.9e9, 0).UTC()
	links := []shortener.Link{
		{ID: "promo", URL: "https://default.example/", CreatedAt: created},
		{ID: shortener.LinkKey("go.example.com", "promo"), URL: "https://go.example/", CreatedAt: created},
		{ID: shortener.LinkKey("local.test:8080", "promo"), URL: "https://local.example/", CreatedAt: created},
	}
	for _, l := range links {
		if err := s.Create(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	jsonl, _, err := runCmd(t, "", "store", "export", "--store", "pebble:"+src)
	if err != nil || !strings.Contains(jsonl, `{"id":"promo","domain":"go.example.com","url":"https://go.example/"`) ||
		!strings.Contains(jsonl, `{"id":"promo","url":"https://default.example/"`) {
		t.Fatalf("export: %v\n%s", err, jsonl)
	}
	csvOut, _, err := runCmd(t, "", "store", "export", "--store", "pebble:"+src, "--format", "csv")
	if err != nil || !strings.Contains(csvOut, "\npromo,https://local.example/,2030-03-17T17:46:40Z,,0,0,0,0,local.test:8080\n") {
		t.Fatalf("CSV export: %v\n%s", err, csvOut)
	}
	for _, tt := range []struct{ format, in string }{{"jsonl", jsonl}, {"csv", csvOut}} {
		dst := filepath.Join(t.TempDir(), "dst")
		if out, errOut, err := runCmd(t, tt.in, "store", "import", "--store", "pebble:"+dst, "--format", tt.format); err != nil {
			t.Fatalf("import %s: %v %s %s", tt.format, err, out, errOut)
		}
		wantRecords(t, exportAll(t, dst), []shortener.LinkRecord{{Link: links[0]}, {Link: links[1]}, {Link: links[2]}})
	}
	bad := `{"id":"promo","domain":"Not A Domain","url":"https://b.example/"}` + "\n"
	if out, errOut, err := runCmd(t, bad, "store", "import", "--store", "pebble:"+filepath.Join(t.TempDir(), "bad")); err == nil ||
		!strings.Contains(out, "1 bad lines") || !strings.Contains(errOut, "not a domain name") {
		t.Errorf("import of a bad domain: %v %s %s", err, out, errOut)
	}
}

// A backup taken while the server serves the store (through its control
// socket) is consistent and restores into a store that serves it.
func TestStoreBackupWhileServingAndRestore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "links")
	s := startServe(t, nil, "--store", "pebble:"+dir)
	id := shorten(t, s.URL, "https://backup.example/")
	backup := filepath.Join(t.TempDir(), "backup")
	out, errOut, err := runCmd(t, "", "store", "backup", "--store", "pebble:"+dir, backup)
	if err != nil || !strings.Contains(out, "written to "+backup) {
		t.Fatalf("backup while serving: %v\n%s%s", err, out, errOut)
	}
	if _, _, err := runCmd(t, "", "store", "restore", "--store", "pebble:"+dir, backup); err == nil {
		t.Error("restore over a served store succeeded")
	}
	s.stop(t)
	if out, errOut, err := runCmd(t, "", "store", "restore", "--store", "pebble:"+dir, "--replace", backup); err != nil ||
		!strings.Contains(out, "restored") || !strings.Contains(out, "1 links") {
		t.Fatalf("restore: %v\n%s%s", err, out, errOut)
	}
	if m, _ := filepath.Glob(dir + ".before-restore-*"); len(m) != 1 {
		t.Errorf("the replaced store was not kept aside: %v", m)
	}
	if _, err := os.Stat(filepath.Join(backup, "OPTIONS-000003")); err != nil {
		if m, _ := filepath.Glob(filepath.Join(backup, "OPTIONS-*")); len(m) == 0 {
			t.Error("the backup was changed by the restore")
		}
	}
	s = startServe(t, nil, "--store", "pebble:"+dir)
	if status, _, _ := call(t, "GET", s.URL+"/getFullURL/"+id, ""); status != 200 {
		t.Errorf("restored link: %d", status)
	}
}
