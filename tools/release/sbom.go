package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// cyclonedxGomod is the SBOM generator, pinned: CycloneDX's own tool for Go
// binaries. installSBOMTool puts it in .cache/bin (scripts/install-deps.sh
// calls it), so a release never downloads anything.
const (
	cyclonedxPkg     = "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod"
	cyclonedxModule  = "github.com/CycloneDX/cyclonedx-gomod"
	cyclonedxVersion = "v1.10.0"
)

// sbomTool returns the path of the pinned cyclonedx-gomod under root.
func sbomTool(root string) string { return filepath.Join(root, ".cache", "bin", "cyclonedx-gomod") }

// checkSBOMTool reports whether the tool at path is the pinned version.
func checkSBOMTool(path string) error {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w (go run ./tools/release install-tools)", path, err)
	}
	if info.Main.Path != cyclonedxModule || info.Main.Version != cyclonedxVersion {
		return fmt.Errorf("%s is %s@%s, want %s@%s (go run ./tools/release install-tools)", path, info.Main.Path, info.Main.Version, cyclonedxModule, cyclonedxVersion)
	}
	return nil
}

// installSBOMTool builds the pinned cyclonedx-gomod into root/.cache/bin
// unless it is there already.
func installSBOMTool(ctx context.Context, root string) error {
	path := sbomTool(root)
	if checkSBOMTool(path) == nil {
		return nil
	}
	gobin, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "install", cyclonedxPkg+"@"+cyclonedxVersion)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=-mod=mod", "GOOS=", "GOARCH=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go install %s@%s: %w\n%s", cyclonedxPkg, cyclonedxVersion, err, out)
	}
	return checkSBOMTool(path)
}

// writeSBOM writes the CycloneDX SBOM of the Go binary bin to dst: the
// modules its build info records (cyclonedx-gomod bin), each with the
// licences NOTICE names for it, dated at s.Time, with a serial number
// derived from the binary's digest, so that it is as reproducible as the
// binary.
func writeSBOM(ctx context.Context, root, bin, dst string, s stamp, mods []module) error {
	tool := sbomTool(root)
	if err := checkSBOMTool(tool); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, tool, "bin", "-json", "-noserial", "-notimestamp", "-version", s.Version, "-output", "-", bin)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOPROXY=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("cyclonedx-gomod bin %s: %w\n%s", bin, err, stderr.Bytes())
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	sbom, err := completeSBOM(out, sha256.Sum256(data), s.Time, mods)
	if err != nil {
		return fmt.Errorf("%s: %w", bin, err)
	}
	return os.WriteFile(dst, sbom, 0o644)
}

// completeSBOM adds to cyclonedx-gomod's JSON what it leaves out when asked
// to be reproducible: the serial number (a UUID made of digest, so one
// binary has one), the timestamp, and the licences (linkgate's own and each
// component's, as identified from its licence files).
func completeSBOM(raw []byte, digest [32]byte, t time.Time, mods []module) ([]byte, error) {
	var bom map[string]any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&bom); err != nil {
		return nil, fmt.Errorf("SBOM: %w", err)
	}
	u := digest[:16]
	u[6] = u[6]&0x0f | 0x80 // version 8: custom (RFC 9562)
	u[8] = u[8]&0x3f | 0x80 // variant 10
	bom["serialNumber"] = fmt.Sprintf("urn:uuid:%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	meta, _ := bom["metadata"].(map[string]any)
	if meta == nil {
		return nil, fmt.Errorf("SBOM has no metadata")
	}
	meta["timestamp"] = t.UTC().Format(time.RFC3339)
	main, _ := meta["component"].(map[string]any)
	if main == nil {
		return nil, fmt.Errorf("SBOM has no main component")
	}
	main["licenses"] = licenseChoices([]string{"Apache-2.0"})
	byPath := map[string]module{}
	for _, m := range mods {
		byPath[m.Path+"@"+m.Version] = m
	}
	comps, _ := bom["components"].([]any)
	for _, c := range comps {
		comp, _ := c.(map[string]any)
		name, _ := comp["name"].(string)
		version, _ := comp["version"].(string)
		m, ok := byPath[name+"@"+version]
		if !ok {
			return nil, fmt.Errorf("SBOM component %s@%s is not among the modules NOTICE lists", name, version)
		}
		comp["licenses"] = licenseChoices(m.Licenses)
		if n, ok := licenseNotes[m.Path]; ok {
			comp["licenses"] = []any{map[string]any{"expression": n.expression, "acknowledgement": "declared"}}
		}
	}
	return json.MarshalIndent(bom, "", "  ")
}

// licenseChoices is CycloneDX's licences array for SPDX identifiers, each
// declared by the component's own licence files.
func licenseChoices(ids []string) []any {
	var out []any
	for _, id := range ids {
		out = append(out, map[string]any{"license": map[string]any{"id": id, "acknowledgement": "declared"}})
	}
	return out
}
