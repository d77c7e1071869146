package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/linkgate/linkgate/internal/testdep"
)

// Two releases of one commit, in different temporary folders, time zones
// and umasks, must be the same bytes; and what they ship must be complete:
// binaries that run and say their version and commit, the licences, SBOMs
// valid against the CycloneDX schema that list what NOTICE lists, and
// checksums that match.
func TestReleaseReproducible(t *testing.T) {
	if testing.Short() || testdep.Race {
		t.Skip("builds both architectures twice and compresses ~200 MB: not under -race (scripts/test-isolated.sh runs it without)")
	}
	if err := checkSBOMTool(sbomTool(repoRoot)); err != nil {
		if testdep.InCI() {
			t.Fatalf("required test dependency missing in CI: %v", err)
		}
		t.Skip(err)
	}
	ctx := context.Background()
	s, err := readStamp(ctx, repoRoot, "v0.0.0-test", "")
	if err != nil {
		t.Fatal(err)
	}
	a, b := t.TempDir(), t.TempDir()
	if err := release(ctx, repoRoot, a, s, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", t.TempDir())
	t.Setenv("TZ", "Pacific/Chatham")
	old := umask(0o077)
	err = release(ctx, repoRoot, b, s, io.Discard)
	umask(old)
	if err != nil {
		t.Fatal(err)
	}
	filesA, filesB := readTree(t, a), readTree(t, b)
	if !slices.Equal(sortedKeys(filesA), sortedKeys(filesB)) {
		t.Fatalf("the two releases hold different files:\n%v\n%v", sortedKeys(filesA), sortedKeys(filesB))
	}
	for name, data := range filesA {
		if !bytes.Equal(data, filesB[name]) {
			t.Errorf("%s differs between two releases of one commit", name)
		}
	}

	checkSums(t, a, filesA)
	mods, err := linkedModules(ctx, repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	schema := cycloneDXSchema(t)
	for _, arch := range arches {
		archive := readTarGz(t, filepath.Join(a, archiveName(s.Version, arch)+".tar.gz"))
		dir := archiveName(s.Version, arch) + "/"
		for _, want := range append([]string{"linkgate", "linkgate-extension", "licenses/go/LICENSE"}, docFiles...) {
			if _, ok := archive[dir+want]; !ok {
				t.Errorf("%s: no %s in the archive", arch, want)
			}
		}
		units, _ := filepath.Glob(filepath.Join(repoRoot, unitDir, "*.service"))
		for _, u := range units {
			if _, ok := archive[dir+"systemd/"+filepath.Base(u)]; !ok {
				t.Errorf("%s: no systemd/%s in the archive", arch, filepath.Base(u))
			}
		}
		for _, m := range mods {
			if m.Path != "std" && archive[dir+"licenses/"+m.Path+"/"+m.Files[0]] == nil {
				t.Errorf("%s: no licence of %s in the archive", arch, m.Path)
			}
		}
		if arch == runtime.GOARCH {
			checkVersion(t, archive[dir+"linkgate"], s)
		}
		for _, p := range programs {
			checkSBOM(t, schema, filepath.Join(a, p.name+"_"+s.Version+"_linux_"+arch+".cdx.json"), mods)
		}
	}
}

// checkSums checks SHA256SUMS against the files, the way sha256sum -c does.
func checkSums(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	cmd := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("sha256sum --check SHA256SUMS: %v\n%s", err, out)
	}
	var listed []string
	for line := range strings.Lines(string(files["SHA256SUMS"])) {
		listed = append(listed, strings.Fields(line)[1])
	}
	for name := range files {
		if !strings.Contains(name, "/") && name != "SHA256SUMS" && !slices.Contains(listed, name) {
			t.Errorf("SHA256SUMS leaves out %s", name)
		}
	}
}

// checkVersion runs a released binary's `version` command.
func checkVersion(t *testing.T, bin []byte, s stamp) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "linkgate")
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "version").CombinedOutput()
	want := "linkgate " + s.Version + " commit " + s.Commit[:12]
	if err != nil || !strings.HasPrefix(string(out), want) {
		t.Errorf("released linkgate version: %q, %v; want it to start with %q", out, err, want)
	}
}

// checkSBOM validates an SBOM against the CycloneDX 1.6 schema and checks
// that every component has the licences NOTICE gives its module.
func checkSBOM(t *testing.T, schema *jsonschema.Schema, path string, mods []module) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := schema.Validate(doc); err != nil {
		t.Errorf("%s is not a valid CycloneDX 1.6 SBOM: %v", filepath.Base(path), err)
	}
	raw, _ := os.ReadFile(path)
	var bom struct {
		SerialNumber string `json:"serialNumber"`
		Metadata     struct {
			Timestamp string `json:"timestamp"`
		} `json:"metadata"`
		Components []struct {
			Name, Version string
			Licenses      []json.RawMessage
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &bom); err != nil {
		t.Fatal(err)
	}
	if bom.SerialNumber == "" || bom.Metadata.Timestamp == "" {
		t.Errorf("%s: serial number %q, timestamp %q", filepath.Base(path), bom.SerialNumber, bom.Metadata.Timestamp)
	}
	known := map[string]bool{}
	for _, m := range mods {
		known[m.Path+"@"+m.Version] = true
	}
	for _, c := range bom.Components {
		if !known[c.Name+"@"+c.Version] || len(c.Licenses) == 0 {
			t.Errorf("%s: component %s@%s: in NOTICE %v, %d licences", filepath.Base(path), c.Name, c.Version, known[c.Name+"@"+c.Version], len(c.Licenses))
		}
	}
	if strings.HasPrefix(filepath.Base(path), "linkgate_") && len(bom.Components) < 10 {
		t.Errorf("%s lists %d components; the binary links dozens of modules", filepath.Base(path), len(bom.Components))
	}
}

func cycloneDXSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	for _, name := range []string{"bom-1.6.schema.json", "spdx.schema.json", "jsf-0.82.schema.json"} {
		f, err := os.Open(filepath.Join("testdata", "cyclonedx", name))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource("http://cyclonedx.org/schema/"+name, doc); err != nil {
			t.Fatal(err)
		}
	}
	s, err := c.Compile("http://cyclonedx.org/schema/bom-1.6.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readTree returns every file under dir by slash-separated relative name.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// readTarGz returns the regular files of a .tar.gz by name.
func readTarGz(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[hdr.Name] = data
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
}
