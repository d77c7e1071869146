//go:build !nopebble

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/bolt"
	"github.com/linkgate/linkgate/shortener/dynamodb"
	"github.com/linkgate/linkgate/shortener/pebble"
)

func init() {
	commands["store"] = command{"the link store: migrate, backup, restore, export, import", runStore}
}

const storeHelp = `The link store. Subcommands:

  migrate --from bolt:PATH [--to pebble:DIR|dynamodb:TABLE]
                 copy a store of an earlier release (a bbolt file and its
                 create log) with every link and its visit statistics;
                 the old files are kept. linkgate serve does this by itself
                 on its first start when --store pebble:DIR does not exist
                 and DIR.db does.
  backup [--store pebble:DIR | --server URL] BACKUP_DIR
                 a consistent copy while linkgate serve serves the store
                 (a pebble checkpoint, asked of the server on DIR.ctl,
                 or through its API with --server)
  restore [--store pebble:DIR] [--replace] BACKUP_DIR
                 put a backup in place (the server stopped)
  export [--store STORE | --server URL] [--format jsonl|csv] [-o FILE]
                 every link with its statistics (JSON Lines: all of it)
  import [--store STORE | --server URL] [--format F] [FILE]
                 links from linkgate's export, YOURLS, Kutt, Shlink or
                 Bitly; idempotent, problems reported per line

Stores are named as --store names them: pebble:DIR, dynamodb:TABLE. A
store a running server holds is reached through the server's API:
--server URL (LINKGATE_SERVER), with an admin key in $LINKGATE_API_KEY or
a file named by --key-file (never on the command line).`

func runStore(ctx context.Context, args []string, env cli.Env) error {
	fs := cli.NewFlagSet("store", "linkgate store <subcommand> [flags]", storeHelp, env.Stderr)
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return err
	}
	sub, rest := fs.Arg(0), fs.Args()
	if len(rest) > 0 {
		rest = rest[1:]
	}
	switch sub {
	case "migrate":
		return runStoreMigrate(ctx, rest, env)
	case "backup":
		return runStoreBackup(ctx, rest, env)
	case "restore":
		return runStoreRestore(ctx, rest, env)
	case "export":
		return runStoreExport(ctx, rest, env)
	case "import":
		return runStoreImport(ctx, rest, env)
	case "":
		fs.Usage()
		return cli.Usagef("store: no subcommand given")
	default:
		fs.Usage()
		return cli.Usagef("store: unknown subcommand %q", sub)
	}
}

func runStoreMigrate(ctx context.Context, args []string, env cli.Env) error {
	fs := cli.NewFlagSet("store migrate", "linkgate store migrate --from bolt:PATH [--to STORE]",
		`Copy every link of a bolt store of an earlier release, with its visit
statistics, into STORE (default pebble:PATH without .db). Links already
there unchanged are skipped, so the command can run again; an id that holds
another link there is reported and left alone. The bolt files are not
changed: remove them when satisfied.`, env.Stderr)
	from := fs.String("from", "", "the old store, `bolt:PATH` (its links.db)")
	to := fs.String("to", "", "the destination `STORE`: pebble:DIR or dynamodb:TABLE")
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return err
	}
	path, ok := strings.CutPrefix(*from, "bolt:")
	if !ok || path == "" || fs.NArg() > 0 {
		return cli.Usagef("store migrate: want --from bolt:PATH")
	}
	if !bolt.Exists(path) {
		return fmt.Errorf("store migrate: %s: no such file", path)
	}
	if *to == "" {
		*to = "pebble:" + pebbleDirOf(path)
	}
	dst, err := openRecordStore(ctx, *to)
	if err != nil {
		return err
	}
	defer dst.Close()
	m, err := migrateBolt(ctx, path, dst)
	fmt.Fprintf(env.Stdout, "%s → %s: %s\n", path, *to, m)
	for _, id := range m.conflicts {
		fmt.Fprintf(env.Stderr, "conflict: %s holds another link in %s; left as it is\n", id, *to)
	}
	return err
}

// openRecordStore opens a store that can import and export whole records.
func openRecordStore(ctx context.Context, spec string) (shortener.Store, error) {
	kind, arg, err := splitStore(spec)
	if err != nil {
		return nil, err
	}
	var s shortener.Store
	switch kind {
	case "pebble":
		s, err = pebble.OpenContext(ctx, arg, pebble.Options{})
		err = lockedHint(err)
	case "dynamodb":
		// No background work: the visit log records an import writes are
		// folded by the instances serving the table (or fold-visits). A
		// command waits longer for a call than a server answering a
		// visitor does.
		s, err = dynamodb.Open(ctx, dynamodb.Options{Table: arg, Timeout: 10 * time.Second, ManualVisits: true})
	default:
		return nil, cli.Usagef("%q: want pebble:DIR or dynamodb:TABLE", spec)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// lockedHint adds to the error of a pebble store another process holds
// how to reach it: a server holds its store, and answers the same
// commands over its API. It names the holder by its PID only, never by
// its command line, which may hold a key.
func lockedHint(err error) error {
	var le *pebble.LockedError
	if !errors.As(err, &le) {
		return err
	}
	holder := "another process"
	if le.PID > 0 {
		holder = fmt.Sprintf("process %d", le.PID)
	}
	server, ifServe := "URL", "If it is linkgate serve, work"
	if u := askServerURL(le.Dir); u != "" {
		holder = "linkgate serve (" + holder + ", listening on " + u + ")"
		server, ifServe = u, "Work"
	}
	return fmt.Errorf("%w\n%s holds the store %s. %s through its API instead: "+
		"--server %s (or LINKGATE_SERVER=%[5]s), with an admin key in $%s or a file named by --key-file; or stop it first",
		err, holder, le.Dir, ifServe, server, envAPIKey)
}

// migration counts what a migration did.
type migration struct {
	info                          bolt.Info
	imported, unchanged, conflict int
	conflicts                     []string // the first few conflicting ids
}

func (m migration) String() string {
	return fmt.Sprintf("%d links read (%d only in the create log, %d visit log records not folded): %d copied, %d already there, %d conflicting",
		m.info.Links, m.info.Unapplied, m.info.LogRecords, m.imported, m.unchanged, m.conflict)
}

// migrateBatch is how many records one import writes at once.
const migrateBatch = 2000

// migrateBolt copies the bolt store at path into dst.
func migrateBolt(ctx context.Context, path string, dst shortener.RecordStore) (migration, error) {
	var m migration
	batch := make([]shortener.LinkRecord, 0, migrateBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil { // stopped: the next start begins again
			return err
		}
		res, err := dst.ImportRecords(ctx, batch)
		if err != nil {
			return err
		}
		for i, r := range res {
			switch r {
			case shortener.Imported:
				m.imported++
			case shortener.Unchanged:
				m.unchanged++
			default:
				m.conflict++
				if len(m.conflicts) < 100 {
					m.conflicts = append(m.conflicts, batch[i].Link.ID)
				}
			}
		}
		batch = batch[:0]
		return nil
	}
	info, err := bolt.Read(path, func(r shortener.LinkRecord) error {
		batch = append(batch, r)
		if len(batch) == migrateBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	m.info = info
	if err != nil {
		return m, fmt.Errorf("migrate %s: %w", path, err)
	}
	return m, nil
}

// openPebble opens the embedded store in dir. If dir does not exist and
// the bolt file old does (a store of an earlier release), it is migrated
// first, into a directory renamed to dir once complete, so that a
// migration cut short starts again on the next start. minFree is
// pebble.Options.MinFreeBytes.
func openPebble(ctx context.Context, logger *slog.Logger, dir, old string, minFree int64) (shortener.Store, error) {
	opts := pebble.Options{Logger: logger, MinFreeBytes: minFree}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) && bolt.Exists(old) {
		tmp := dir + ".migrating"
		if err := os.RemoveAll(tmp); err != nil {
			return nil, err
		}
		logger.Info("migrating the store of an earlier release", "from", old, "to", dir)
		s, err := pebble.OpenContext(ctx, tmp, opts)
		if err != nil {
			return nil, err
		}
		m, err := migrateBolt(ctx, old, s)
		if cerr := s.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = renameDurably(tmp, dir)
		}
		if err != nil {
			return nil, err
		}
		logger.Info("store migrated; the old files are kept, remove them when satisfied", "from", old, "to", dir, "result", m.String())
	}
	return pebble.OpenContext(ctx, dir, opts)
}

// renameDurably renames from to to and syncs their directory.
func renameDurably(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(to))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
