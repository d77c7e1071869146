package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
)

// The image's user and the files that make a scratch image usable: the
// binary needs nothing but CA certificates (for DynamoDB and upstreams over
// TLS), a passwd entry for its user and a writable data folder.
const (
	imageUID   = 65532 // the customary "nonroot" id of distroless images
	imageUser  = "linkgate"
	caBundle   = "/etc/ssl/certs/ca-certificates.crt" // Debian's ca-certificates, on the build machine
	imageRepo  = "localhost/linkgate"
	sourceRepo = "https://github.com/linkgate/linkgate"
	docDir     = "usr/share/doc/linkgate"
)

// imageConfig is the configuration of the image for arch. The Dockerfile
// states the same (a test compares the two).
func imageConfig(s stamp, arch string) v1.Config {
	return v1.Config{
		User:         fmt.Sprintf("%d:%d", imageUID, imageUID),
		Entrypoint:   []string{"/linkgate"},
		Cmd:          []string{"serve"},
		Env:          []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		WorkingDir:   "/",
		ExposedPorts: map[string]struct{}{"8080/tcp": {}, "9080/tcp": {}, "9443/tcp": {}},
		Volumes:      map[string]struct{}{"/data": {}},
		Labels:       imageLabels(s),
	}
}

// imageLabels are the OCI annotations the image carries as labels.
func imageLabels(s stamp) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "linkgate",
		"org.opencontainers.image.description": "The link platform in one binary: URL shortener, APISIX-compatible API gateway, load generator.",
		"org.opencontainers.image.source":      sourceRepo,
		"org.opencontainers.image.version":     s.Version,
		"org.opencontainers.image.revision":    s.Commit,
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
}

// baseEntries are the image's files besides the binary: passwd and group
// with the non-root user, CA certificates, the data folder the user owns
// (the default stores, data/links and data/gateway.db, land in it, since
// the working directory is /), /tmp, and the licences.
func baseEntries(root string, mods []module) ([]entry, error) {
	ca, err := os.ReadFile(caBundle)
	if err != nil {
		return nil, fmt.Errorf("CA certificates for the image: %w (install Debian's ca-certificates)", err)
	}
	entries := []entry{
		{Name: "etc/passwd", Mode: 0o644, Data: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/data:/sbin/nologin\n", imageUser, imageUID, imageUID, imageUser)},
		{Name: "etc/group", Mode: 0o644, Data: fmt.Appendf(nil, "root:x:0:\n%s:x:%d:\n", imageUser, imageUID)},
		{Name: caBundle[1:], Mode: 0o644, Data: ca},
		{Name: "data", Mode: 0o755, Dir: true, UID: imageUID},
		{Name: "tmp", Mode: 0o1777, Dir: true},
	}
	for _, f := range []string{"LICENSE", "NOTICE"} {
		e, err := fileEntry(docDir+"/"+f, filepath.Join(root, f), 0o644)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	licenses, err := licenseEntries(mods)
	if err != nil {
		return nil, err
	}
	return append(entries, prefixed(docDir, licenses)...), nil
}

// imageLayer is a gzip-compressed layer of entries, compressed here at
// level (make image: gzipLevel) rather than by go-containerregistry at its
// fastest: what users pull is what matters.
func imageLayer(entries []entry, s stamp, level int) (v1.Layer, int64, error) {
	var tarBuf, gz bytes.Buffer
	if err := writeTar(&tarBuf, entries, s.Time); err != nil {
		return nil, 0, err
	}
	zw, err := gzip.NewWriterLevel(&gz, level)
	if err != nil {
		return nil, 0, err
	}
	if _, err := zw.Write(tarBuf.Bytes()); err != nil {
		return nil, 0, err
	}
	if err := zw.Close(); err != nil {
		return nil, 0, err
	}
	data := gz.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	return layer, int64(tarBuf.Len()), err
}

// builtImage is one architecture's image and its sizes.
type builtImage struct {
	arch                     string
	image                    v1.Image
	compressed, uncompressed int64 // bytes: what a pull transfers (layers, config, manifest); the layers unpacked
}

// buildImage assembles the image for arch from the binary at bin: two
// layers, the base files and the binary, so that an upgrade pulls only the
// second.
func buildImage(arch, bin string, base []entry, s stamp) (builtImage, error) {
	binEntry, err := fileEntry("linkgate", bin, 0o755)
	if err != nil {
		return builtImage{}, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	out := builtImage{arch: arch}
	for _, l := range []struct {
		entries []entry
		what    string
	}{
		{base, "base files: passwd, group, CA certificates, /data, licences"},
		{[]entry{binEntry}, "linkgate " + s.Version + " (make cross)"},
	} {
		layer, size, err := imageLayer(l.entries, s, gzipLevel)
		if err != nil {
			return out, err
		}
		out.uncompressed += size
		img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
			History: v1.History{Created: v1.Time{Time: s.Time}, CreatedBy: "make image: " + l.what, Comment: "tools/release"}})
		if err != nil {
			return out, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return out, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Created = arch, "linux", v1.Time{Time: s.Time}
	if arch == "arm64" {
		cf.Variant = "v8"
	}
	cf.Config = imageConfig(s, arch)
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return out, err
	}
	out.image = img
	size, err := img.Size() // the manifest
	if err != nil {
		return out, err
	}
	layers, err := img.Layers()
	if err != nil {
		return out, err
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		return out, err
	}
	out.compressed = size + int64(len(raw))
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return out, err
		}
		out.compressed += n
	}
	return out, nil
}

// imageTarName is the docker-save archive of an architecture's image.
func imageTarName(version, arch string) string {
	return fmt.Sprintf("linkgate_%s_linux_%s.image.tar", version, arch)
}

// writeImages builds the image of every architecture from the binaries in
// bins (make cross's linkgate_linux_ARCH) and writes into out (emptied
// first):
//
//	oci/                               an OCI image layout: the multi-arch index, tagged s.Version
//	linkgate_V_linux_ARCH.image.tar    each image alone, as docker save writes it (docker/podman load)
//
// It returns the images, in arches' order.
func writeImages(ctx context.Context, root, bins, out string, s stamp) ([]builtImage, error) {
	mods, err := linkedModules(ctx, root)
	if err != nil {
		return nil, err
	}
	base, err := baseEntries(root, mods)
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(out); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	tag, err := name.NewTag(imageRepo + ":" + s.Version)
	if err != nil {
		return nil, fmt.Errorf("image tag: %w", err)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var images []builtImage
	for _, arch := range arches {
		bi, err := buildImage(arch, filepath.Join(bins, binaryName("linkgate", arch)), base, s)
		if err != nil {
			return nil, fmt.Errorf("%s image: %w", arch, err)
		}
		cf, err := bi.image.ConfigFile()
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: bi.image, Descriptor: v1.Descriptor{Platform: cf.Platform()}})
		if err := tarball.WriteToFile(filepath.Join(out, imageTarName(s.Version, arch)), tag, bi.image); err != nil {
			return nil, err
		}
		images = append(images, bi)
	}
	p, err := layout.Write(filepath.Join(out, "oci"), empty.Index)
	if err != nil {
		return nil, err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": s.Version,
	})); err != nil {
		return nil, err
	}
	return slices.Clip(images), nil
}

// writeRootfs writes the image's files for arch into dir, as a Dockerfile's
// build stage does before the scratch stage copies them (see Dockerfile).
func writeRootfs(ctx context.Context, root, bin, dir string) error {
	mods, err := linkedModules(ctx, root)
	if err != nil {
		return err
	}
	base, err := baseEntries(root, mods)
	if err != nil {
		return err
	}
	binEntry, err := fileEntry("linkgate", bin, 0o755)
	if err != nil {
		return err
	}
	for _, e := range append(base, binEntry) {
		p := filepath.Join(dir, filepath.FromSlash(e.Name))
		if e.Dir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		} else {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, e.Data, 0o644); err != nil {
				return err
			}
		}
		if err := os.Chmod(p, os.FileMode(e.Mode&0o777)|stickyBit(e.Mode)); err != nil {
			return err
		}
		if err := os.Lchown(p, e.UID, e.UID); err != nil {
			return err
		}
	}
	return nil
}

// stickyBit is os.ModeSticky when the tar mode mode has it.
func stickyBit(mode int64) os.FileMode {
	if mode&0o1000 != 0 {
		return os.ModeSticky
	}
	return 0
}
