//go:build !nopebble

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/httpapi"
	"github.com/linkgate/linkgate/shortener/importer"
)

func runStoreImport(ctx context.Context, args []string, env cli.Env) error {
	fs := cli.NewFlagSet("store import", "linkgate store import [--store STORE | --server URL] [--format F] [FILE]",
		`Import links (with their statistics, from linkgate's own format) from
FILE or standard input. Formats: `+strings.Join(importer.Formats, ", ")+`.
Idempotent: a link already there, unchanged, is counted as such; an id
holding another link is a conflict, reported with its line and left as it
is; a line that is not a valid link is reported with its line and
skipped. Links are written in synced batches, each link with its
statistics at once: an interrupted import is safe to run again. Exit
status 1 if any line was refused. With --server, the file is read here
and streamed to the running server as JSON Lines (POST /api/v1/import;
an admin key from $LINKGATE_API_KEY or --key-file), which imports it as it
arrives; without it the store is opened directly (a server holding it must
be stopped).`, env.Stderr)
	store := fs.String("store", "pebble:data/links", "the `STORE`: pebble:DIR or dynamodb:TABLE")
	var remote remoteFlags
	remote.add(fs)
	format := fs.String("format", "jsonl", "input `format`")
	if err := cli.Parse(fs, args, env.Getenv); err != nil {
		return err
	}
	if !importer.Known(*format) || fs.NArg() > 1 {
		return cli.Usagef("store import: --format one of %s, at most one FILE", strings.Join(importer.Formats, ", "))
	}
	in := env.Stdin
	if fs.NArg() == 1 && fs.Arg(0) != "-" {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	if remote.remote() {
		c, err := remote.client(env.Getenv)
		if err != nil {
			return err
		}
		return importThrough(ctx, c, *format, in, env)
	}
	s, err := openRecordStore(ctx, *store)
	if err != nil {
		return err
	}
	defer s.Close()
	var c importCounts
	batch := make([]importer.Line, 0, migrateBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		recs := make([]shortener.LinkRecord, len(batch))
		for i := range batch {
			recs[i] = batch[i].Rec
		}
		res, err := s.ImportRecords(ctx, recs)
		// A record the store cannot keep was refused with nothing written:
		// its line is reported, and the others are imported without it.
		for re := (*shortener.RecordError)(nil); errors.As(err, &re) && re.Index >= 0 && re.Index < len(recs); {
			c.bad++
			fmt.Fprintf(env.Stderr, "line %d: %v\n", batch[re.Index].Line, re.Err)
			recs = slices.Delete(recs, re.Index, re.Index+1)
			batch = slices.Delete(batch, re.Index, re.Index+1)
			res, err = s.ImportRecords(ctx, recs)
		}
		if err != nil {
			return err
		}
		for i, r := range res {
			switch r {
			case shortener.Imported:
				c.imported++
			case shortener.Unchanged:
				c.unchanged++
			default:
				c.conflicts++
				fmt.Fprintf(env.Stderr, "line %d: conflict: %s holds another link; left as it is\n", batch[i].Line, batch[i].Rec.Link.ID)
			}
		}
		batch = batch[:0]
		return nil
	}
	err = importer.Read(*format, in, func(l importer.Line) error {
		if l.Err != nil {
			c.bad++
			fmt.Fprintf(env.Stderr, "line %d: %v\n", l.Line, l.Err)
			return nil
		}
		batch = append(batch, l)
		if len(batch) == cap(batch) {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	fmt.Fprintf(env.Stdout, "%d imported, %d already there, %d conflicting, %d bad lines\n", c.imported, c.unchanged, c.conflicts, c.bad)
	if table, ok := strings.CutPrefix(*store, "dynamodb:"); ok && c.imported > 0 {
		fmt.Fprintf(env.Stderr, "visit statistics went to the table's visit log: the instances serving it fold them within the hour, or now: linkgate dynamodb fold-visits --table %s\n", table)
	}
	if err != nil {
		return fmt.Errorf("store import: %w", err)
	}
	if c.conflicts+c.bad > 0 {
		return fmt.Errorf("store import: %d lines refused", c.conflicts+c.bad)
	}
	return nil
}

type importCounts struct{ imported, unchanged, conflicts, bad int }

// importThrough reads in (format) here and streams its valid records to
// a running server's import as JSON Lines, reporting the lines refused
// here or there by their line in in.
func importThrough(ctx context.Context, client *httpapi.Client, format string, in io.Reader, env cli.Env) error {
	var mu sync.Mutex // stderr, bad and sent: the sender's and the answer's
	bad := 0
	var sent []int32 // sent[k-1]: the line of in that was line k of the body
	pr, pw := io.Pipe()
	readDone := make(chan error, 1)
	go func() {
		bw := bufio.NewWriterSize(pw, 64<<10)
		enc := json.NewEncoder(bw)
		enc.SetEscapeHTML(false)
		err := importer.Read(format, in, func(l importer.Line) error {
			mu.Lock()
			defer mu.Unlock()
			if l.Err != nil {
				bad++
				fmt.Fprintf(env.Stderr, "line %d: %v\n", l.Line, l.Err)
				return nil
			}
			sent = append(sent, int32(l.Line))
			return enc.Encode(importer.FromLinkRecord(l.Rec))
		})
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
		readDone <- err
	}()
	sum, err := client.Import(ctx, pr, func(l httpapi.ImportLine) error {
		mu.Lock()
		defer mu.Unlock()
		line := l.Line
		if l.Line >= 1 && l.Line <= len(sent) {
			line = int(sent[l.Line-1])
		}
		switch l.Result {
		case httpapi.ImportConflict:
			fmt.Fprintf(env.Stderr, "line %d: conflict: %s holds another link; left as it is\n", line, l.ID)
		case httpapi.ImportInvalid:
			fmt.Fprintf(env.Stderr, "line %d: %s\n", line, l.Message)
		}
		return nil
	})
	pr.CloseWithError(errors.New("the import ended")) // stops the sender if it has not
	if err == nil {
		// The server read the body to its end: the sender is done.
		err = <-readDone
	}
	mu.Lock()
	defer mu.Unlock()
	bad += sum.Invalid
	fmt.Fprintf(env.Stdout, "%d imported, %d already there, %d conflicting, %d bad lines\n", sum.Imported, sum.Unchanged, sum.Conflicts, bad)
	if err != nil {
		return fmt.Errorf("store import: %w", err)
	}
	if sum.Conflicts+bad > 0 {
		return fmt.Errorf("store import: %d lines refused", sum.Conflicts+bad)
	}
	return nil
}
