//go:build !nopebble

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/importer"
	"github.com/linkgate/linkgate/shortener/pebble"
)

// A serving pebble store answers backups on a control socket beside its
// directory (DIR.ctl, mode 0600): `linkgate store backup` asks the server
// that holds the store for a checkpoint, since no other process may open
// it.

// controlPath is the control socket of the pebble store in dir.
func controlPath(dir string) string { return filepath.Clean(dir) + ".ctl" }

// serveControl answers backup requests for s, and GET /server with
// serverURL() (the server's address, "" before it listens), until ctx
// ends.
func serveControl(ctx context.Context, logger *slog.Logger, s *pebble.Store, serverURL func() string) (func(), error) {
	path := controlPath(s.Dir())
	os.Remove(path) // a socket a killed server left behind; the store lock says we own it
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /backup", func(w http.ResponseWriter, r *http.Request) {
		dir := r.FormValue("dir")
		if !filepath.IsAbs(dir) {
			http.Error(w, "backup directory must be absolute", http.StatusBadRequest)
			return
		}
		start := time.Now()
		if err := s.Backup(dir); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		logger.Info("store backed up", "to", dir, "duration", time.Since(start))
		fmt.Fprintf(w, "backup of %s written to %s in %v\n", s.Dir(), dir, time.Since(start).Round(time.Millisecond))
	})
	mux.HandleFunc("GET /server", func(w http.ResponseWriter, r *http.Request) {
		u := serverURL()
		if u == "" {
			http.Error(w, "not listening yet", http.StatusNotFound)
			return
		}
		fmt.Fprintln(w, u)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return func() { srv.Close(); os.Remove(path) }, nil
}

// askBackup asks the server holding the store in dir for a backup into
// to; ok=false when no server answers on the control socket.
func askBackup(ctx context.Context, dir, to string, out io.Writer) (ok bool, err error) {
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", controlPath(dir))
	}}}
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://store/backup", strings.NewReader("dir="+urlQueryEscape(to)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		return false, nil // nobody serves it
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != 200 {
		return true, fmt.Errorf("backup by the serving process: %s", strings.TrimSpace(string(b)))
	}
	out.Write(b)
	return true, nil
}

// askServerURL asks the server holding the pebble store in dir for its
// address, on the control socket; "" when none answers within a second.
func askServerURL(dir string) string {
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", controlPath(dir))
	}}}
	resp, err := c.Get("http://store/server")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if u := strings.TrimSpace(string(b)); resp.StatusCode == http.StatusOK && strings.HasPrefix(u, "http") && !strings.ContainsAny(u, " \t\n") {
		return u
	}
	return ""
}

func urlQueryEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_./", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func runStoreBackup(ctx context.Context, args []string, env cli.Env) error {
	fs := cli.NewFlagSet("store backup", "linkgate store backup [--store pebble:DIR | --server URL] BACKUP_DIR",
		`Write a consistent copy of the embedded store into BACKUP_DIR (which must
not exist): through the API of the running server at --server (GET
/api/v1/backup, streamed as a tar archive and unpacked here; an admin key
from $LINKGATE_API_KEY or --key-file), or while linkgate serve keeps
serving --store on this machine (it answers on the store's control socket,
DIR.ctl), or directly when nothing serves it. The copy is a pebble
checkpoint: it opens as a store (restore it with 'linkgate store
restore', or serve it with --store pebble:BACKUP_DIR).`, env.Stderr)
	store := fs.String("store", "pebble:data/links", "the `STORE` to back up: pebble:DIR")
	var remote remoteFlags
	remote.add(fs)
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return err
	}
	dir, ok := strings.CutPrefix(*store, "pebble:")
	if !ok || dir == "" || fs.NArg() != 1 {
		return cli.Usagef("store backup: want [--store pebble:DIR | --server URL] BACKUP_DIR")
	}
	to, err := filepath.Abs(fs.Arg(0))
	if err != nil {
		return err
	}
	if _, err := os.Stat(to); err == nil {
		return fmt.Errorf("store backup: %s exists", to)
	}
	if remote.remote() {
		c, err := remote.client(env.Getenv)
		if err != nil {
			return err
		}
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(c.Backup(ctx, pw)) }()
		err = pebble.Unpack(pr, to)
		pr.CloseWithError(err) // the download stops if unpacking did
		if err != nil {
			return fmt.Errorf("store backup: %w", err)
		}
		fmt.Fprintf(env.Stdout, "backup of %s written to %s\n", remote.server, to)
		return nil
	}
	if asked, err := askBackup(ctx, dir, to, env.Stdout); asked {
		return err
	}
	s, err := pebble.Open(dir, pebble.Options{NoIndex: true})
	if err != nil {
		return lockedHint(err)
	}
	defer s.Close()
	if err := s.Backup(to); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "backup of %s written to %s\n", dir, to)
	return nil
}

func runStoreRestore(ctx context.Context, args []string, env cli.Env) error {
	fs := cli.NewFlagSet("store restore", "linkgate store restore [--store pebble:DIR] [--replace] BACKUP_DIR",
		`Put a backup (from 'linkgate store backup') in place as the store. The
server must be stopped. The backup is copied (it stays as it is), checked
by opening the copy, and renamed into place; with --replace an existing
store is moved aside to DIR.before-restore-TIME first.`, env.Stderr)
	store := fs.String("store", "pebble:data/links", "the `STORE` to restore: pebble:DIR")
	replace := fs.Bool("replace", false, "move an existing store aside instead of refusing")
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return err
	}
	dir, ok := strings.CutPrefix(*store, "pebble:")
	if !ok || dir == "" || fs.NArg() != 1 {
		return cli.Usagef("store restore: want [--store pebble:DIR] [--replace] BACKUP_DIR")
	}
	from := fs.Arg(0)
	_, err := os.Stat(dir)
	exists := err == nil
	if exists && !*replace {
		return fmt.Errorf("store restore: %s exists (stop the server; --replace moves it aside)", dir)
	}
	tmp := filepath.Clean(dir) + ".restoring"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.CopyFS(tmp, os.DirFS(from)); err != nil {
		return fmt.Errorf("store restore: copy %s: %w", from, err)
	}
	s, err := pebble.Open(tmp, pebble.Options{NoIndex: true})
	if err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("store restore: %s is not a usable backup: %w", from, err)
	}
	n := 0
	err = s.ExportRecords(ctx, func(shortener.LinkRecord) error { n++; return nil })
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("store restore: %s: %w", from, err)
	}
	if exists {
		aside := fmt.Sprintf("%s.before-restore-%s", filepath.Clean(dir), time.Now().UTC().Format("20060102T150405Z"))
		// The server must be stopped: its lock file says whether it is.
		if l, err := pebble.Open(dir, pebble.Options{NoIndex: true}); err != nil {
			os.RemoveAll(tmp)
			return fmt.Errorf("store restore: %w", err)
		} else {
			l.Close()
		}
		if err := os.Rename(dir, aside); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "the store that was there is in %s\n", aside)
	}
	if err := renameDurably(tmp, dir); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "restored %s into %s: %d links\n", from, dir, n)
	return nil
}

func runStoreExport(ctx context.Context, args []string, env cli.Env) error {
	fs := cli.NewFlagSet("store export", "linkgate store export [--store STORE | --server URL] [--format jsonl|csv] [-o FILE]",
		`Write every link with its visit statistics: JSON Lines (every field and
the statistics, what 'linkgate store import' reads back) or CSV (the link's
fields and visit totals). With --server, the running server streams them
from one snapshot of its store (GET /api/v1/export; an admin key from
$LINKGATE_API_KEY or --key-file); an export cut short is an error, never a
short file taken for a whole one. Without it the store is opened directly:
a server holding it must be stopped.`, env.Stderr)
	store := fs.String("store", "pebble:data/links", "the `STORE`: pebble:DIR or dynamodb:TABLE")
	var remote remoteFlags
	remote.add(fs)
	format := fs.String("format", "jsonl", "jsonl or csv")
	out := fs.String("o", "-", "output `file` (- for stdout)")
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return err
	}
	if *format != "jsonl" && *format != "csv" || fs.NArg() > 0 {
		return cli.Usagef("store export: --format jsonl or csv, no arguments")
	}
	var export func(w io.Writer) (int, error)
	if remote.remote() {
		c, err := remote.client(env.Getenv)
		if err != nil {
			return err
		}
		export = func(w io.Writer) (int, error) {
			cw := &countingWriter{w: w}
			err := c.Export(ctx, *format, cw)
			return cw.lines, err
		}
	} else {
		s, err := openRecordStore(ctx, *store)
		if err != nil {
			return err
		}
		defer s.Close()
		export = func(w io.Writer) (int, error) {
			x, err := importer.NewWriter(*format, w)
			if err != nil {
				return 0, err
			}
			err = s.ExportRecords(ctx, x.Write)
			return x.Count(), errors.Join(err, x.Flush())
		}
	}
	w := env.Stdout
	if *out != "-" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	n, err := export(w)
	if err != nil {
		return fmt.Errorf("store export: %w", err)
	}
	if remote.remote() && *format == "csv" {
		n-- // the header
	}
	fmt.Fprintf(env.Stderr, "exported %d links\n", n)
	return nil
}

// countingWriter counts the lines written through it.
type countingWriter struct {
	w     io.Writer
	lines int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.lines += bytes.Count(p[:n], []byte{'\n'})
	return n, err
}
