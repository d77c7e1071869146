package main

import (
	"archive/tar"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
)

// entry is one file of an archive or image layer.
type entry struct {
	Name string // slash-separated, relative
	Mode int64  // permission bits
	Data []byte
}

// fileEntry reads the file at src into an entry named name.
func fileEntry(name, src string, mode int64) (entry, error) {
	data, err := os.ReadFile(src)
	return entry{Name: name, Mode: mode, Data: data}, err
}

// writeTar writes entries as a tar stream that depends on nothing but them
// and mtime: sorted names, a directory entry before the files in it, owner
// root, every time mtime.
func writeTar(w io.Writer, entries []entry, mtime time.Time) error {
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.Name, b.Name) })
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	var addDir func(string) error
	addDir = func(dir string) error {
		if dir == "." || dir == "/" || dirs[dir] {
			return nil
		}
		if err := addDir(path.Dir(dir)); err != nil {
			return err
		}
		dirs[dir] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: mtime})
	}
	for _, e := range entries {
		if err := addDir(path.Dir(e.Name)); err != nil {
			return err
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: e.Name, Mode: e.Mode, Size: int64(len(e.Data)), ModTime: mtime}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(e.Data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// writeTarGz writes entries as a gzip-compressed tar file at dst (see
// writeTar); the gzip header carries no name or time. klauspost's gzip
// compresses about twice as fast as the standard library's, as well.
func writeTarGz(dst string, entries []entry, mtime time.Time) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	zw, err := gzip.NewWriterLevel(f, gzip.DefaultCompression)
	if err != nil {
		f.Close()
		return err
	}
	if err := writeTar(zw, entries, mtime); err != nil {
		f.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
