package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
)

// docFiles are the repository files every archive carries at its top.
var docFiles = []string{"LICENSE", "NOTICE", "README.md", "CHANGELOG.md"}

// unitDir holds the systemd units every archive carries in systemd/.
const unitDir = "deploy/systemd"

// archiveName is the name of an architecture's release archive, without
// extension; it is also the folder the archive unpacks into.
func archiveName(version, arch string) string {
	return fmt.Sprintf("linkgate_%s_linux_%s", version, arch)
}

// release writes into out (emptied first) everything a release ships:
//
//	linkgate_V_linux_ARCH.tar.gz            binaries, LICENSE, NOTICE, README.md,
//	                                        CHANGELOG.md, systemd/, licenses/
//	PROGRAM_V_linux_ARCH.cdx.json           CycloneDX SBOM of each binary
//	licenses/MODULE/FILE                    the licence files of everything linked
//	SHA256SUMS                              of the archives and SBOMs (sha256sum -c)
//
// Two runs on one commit write the same bytes.
func release(ctx context.Context, root, out string, s stamp, log io.Writer) error {
	mods, err := linkedModules(ctx, root)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	stage, err := os.MkdirTemp("", "linkgate-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	fmt.Fprintf(log, "building %s (commit %s) for %v\n", s.Version, s.Commit, arches)
	if err := buildBinaries(ctx, root, stage, s, arches); err != nil {
		return err
	}
	licenses, err := licenseEntries(mods)
	if err != nil {
		return err
	}
	common, err := commonEntries(root)
	if err != nil {
		return err
	}
	var written []string // top-level files, for SHA256SUMS
	for _, arch := range arches {
		name := archiveName(s.Version, arch)
		var entries []entry
		for _, p := range programs {
			e, err := fileEntry(p.name, filepath.Join(stage, binaryName(p.name, arch)), 0o755)
			if err != nil {
				return err
			}
			entries = append(entries, e)
		}
		all := prefixed(name, slices.Concat(entries, common, licenses))
		if err := writeTarGz(filepath.Join(out, name+".tar.gz"), all, s.Time); err != nil {
			return err
		}
		written = append(written, name+".tar.gz")
		for _, p := range programs {
			sbom := fmt.Sprintf("%s_%s_linux_%s.cdx.json", p.name, s.Version, arch)
			if err := writeSBOM(ctx, root, filepath.Join(stage, binaryName(p.name, arch)), filepath.Join(out, sbom), s, mods); err != nil {
				return err
			}
			written = append(written, sbom)
		}
	}
	for _, e := range licenses {
		if err := writeFile(filepath.Join(out, filepath.FromSlash(e.Name)), e.Data, s); err != nil {
			return err
		}
	}
	sums, err := sha256Sums(out, written)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(out, "SHA256SUMS"), sums, s); err != nil {
		return err
	}
	for _, f := range written {
		if err := os.Chtimes(filepath.Join(out, f), s.Time, s.Time); err != nil {
			return err
		}
	}
	fmt.Fprintf(log, "%s", sums)
	// Where the size goes: the binaries are stripped, so the sizes come
	// from the same builds with their symbols.
	for _, p := range []program{programs[0], function} {
		sizes, total, err := binarySizes(ctx, root, p, arches[0])
		if err != nil {
			return err
		}
		printSizes(log, fmt.Sprintf("%s (%s, -tags %s)", p.name, arches[0], p.tags), sizes, total, 15)
	}
	return nil
}

// prefixed returns entries with every name under dir.
func prefixed(dir string, entries []entry) []entry {
	out := make([]entry, len(entries))
	for i, e := range entries {
		e.Name = path.Join(dir, e.Name)
		out[i] = e
	}
	return out
}

// commonEntries are the files every archive carries besides its binaries:
// the documents and the systemd units.
func commonEntries(root string) ([]entry, error) {
	var entries []entry
	for _, f := range docFiles {
		e, err := fileEntry(f, filepath.Join(root, f), 0o644)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	units, err := filepath.Glob(filepath.Join(root, unitDir, "*.service"))
	if err != nil {
		return nil, err
	}
	for _, u := range units {
		e, err := fileEntry("systemd/"+filepath.Base(u), u, 0o644)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// licenseEntries are the licence and notice files of every module, as
// licenses/MODULE/FILE (the standard library's as licenses/go/FILE).
func licenseEntries(mods []module) ([]entry, error) {
	var entries []entry
	for _, m := range mods {
		dir := m.Path
		if m.Path == "std" {
			dir = "go"
		}
		for _, f := range m.Files {
			e, err := fileEntry(path.Join("licenses", dir, f), filepath.Join(m.Dir, filepath.FromSlash(f)), 0o644)
			if err != nil {
				return nil, err
			}
			entries = append(entries, e)
		}
	}
	return entries, nil
}

// sha256Sums is a SHA256SUMS file for the named files in dir, in the
// format sha256sum -c reads.
func sha256Sums(dir string, names []string) ([]byte, error) {
	names = slices.Sorted(slices.Values(names))
	var b bytes.Buffer
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%x  %s\n", sha256.Sum256(data), n)
	}
	return b.Bytes(), nil
}

// writeFile writes data to dst, creating its folder, dated s.Time.
func writeFile(dst string, data []byte, s stamp) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		return err
	}
	return os.Chtimes(dst, s.Time, s.Time)
}
