package pebble

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Backups as a stream, for a server asked for one over its API: a
// checkpoint (Backup) in a temporary directory beside the store, written
// out as a tar archive of its files and removed; Unpack makes the
// archive a store directory again.

// WriteBackup writes a consistent copy of the store to w as a tar
// archive of a checkpoint's files (flat, regular files only). The
// checkpoint is taken beside the store (hard links to its tables where
// the file system allows) and removed once written.
func (s *Store) WriteBackup(w io.Writer) error {
	tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(s.dir)), filepath.Base(s.dir)+".backup-")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "store")
	if err := s.Backup(dir); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	tw := tar.NewWriter(w)
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return fmt.Errorf("backup: %s is not a regular file", e.Name())
		}
		if err := addFile(tw, dir, e.Name()); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
	}
	return tw.Close()
}

func addFile(tw *tar.Writer, dir, name string) error {
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: st.Size(), Mode: 0o600, ModTime: st.ModTime()}); err != nil {
		return err
	}
	_, err = io.CopyN(tw, f, st.Size())
	return err
}

// Unpack writes the files of an archive WriteBackup wrote into dir, which
// must not exist: into dir.unpacking first, synced, then renamed, so a
// dir that exists is whole. Only plain names of regular files are
// accepted (no paths, links or devices).
func Unpack(r io.Reader, dir string) error {
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("unpack: %s exists", dir)
	}
	tmp := filepath.Clean(dir) + ".unpacking"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o750); err != nil {
		return err
	}
	if err := unpack(tar.NewReader(r), tmp); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("unpack: %w", err)
	}
	if err := syncDir(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	return syncDir(filepath.Dir(filepath.Clean(dir)))
}

func unpack(tr *tar.Reader, dir string) error {
	files := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if files == 0 {
				return errors.New("empty archive")
			}
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg || h.Name == "" || h.Name != filepath.Base(h.Name) || strings.HasPrefix(h.Name, ".") {
			return fmt.Errorf("%q is not a file of a store backup", h.Name)
		}
		f, err := os.OpenFile(filepath.Join(dir, h.Name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, tr)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		files++
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
