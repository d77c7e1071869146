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

// entry is one file or folder of an archive or image layer.
type entry struct {
	Name string // slash-separated, relative
	Mode int64  // permission bits (and the sticky bit, 0o1000)
	Data []byte
	Dir  bool // a folder, written with its mode and owner; others are implied, root's, 0755
	UID  int  // owner and group
}

// fileEntry reads the file at src into an entry named name.
func fileEntry(name, src string, mode int64) (entry, error) {
	data, err := os.ReadFile(src)
	return entry{Name: name, Mode: mode, Data: data}, err
}

// writeTar writes entries as a tar stream that depends on nothing but them
// and mtime: sorted names, a folder entry before the files in it, every
// time mtime.
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
		if e.Dir {
			dirs[e.Name] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: e.Name + "/", Mode: e.Mode, Uid: e.UID, Gid: e.UID, ModTime: mtime}); err != nil {
				return err
			}
			continue
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: e.Name, Mode: e.Mode, Uid: e.UID, Gid: e.UID, Size: int64(len(e.Data)), ModTime: mtime}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(e.Data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// gzipLevel is the compression of archives and image layers: with
// klauspost's gzip, level 7 gives within 1.3% of level 9's size in a fifth
// of its time, and beats the standard library's level 9 in an eighth
// (measured on linkgate_linux_amd64: 16.80 MB in 5 s, 16.59 MB in 28 s,
// standard library 16.63 MB in 40 s, on the shared 2-core machine).
const gzipLevel = 7

// writeTarGz writes entries as a gzip-compressed tar file at dst (see
// writeTar); the gzip header carries no name or time.
func writeTarGz(dst string, entries []entry, mtime time.Time) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	zw, err := gzip.NewWriterLevel(f, gzipLevel)
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
