//go:build !nopebble

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/linkgate/linkgate/internal/cli"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/importer"
)

func runStoreImport(ctx context.Context, args []string, env cli.Env) error {
	fs := cli.NewFlagSet("store import", "linkgate store import [--store STORE] [--format F] [FILE]",
		`Import links (with their statistics, from linkgate's own format) from
FILE or standard input. Formats: `+strings.Join(importer.Formats, ", ")+`.
Idempotent: a link already there, unchanged, is counted as such; an id
holding another link is a conflict, reported with its line and left as it
is; a line that is not a valid link is reported with its line and
skipped. Links are written in synced batches, each link with its
statistics at once: an interrupted import is safe to run again. Exit
status 1 if any line was refused.`, env.Stderr)
	store := fs.String("store", "pebble:data/links", "the `STORE`: pebble:DIR or dynamodb:TABLE")
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
		res, err := s.(shortener.RecordStore).ImportRecords(ctx, recs)
		// A record the store cannot keep was refused with nothing written:
		// its line is reported, and the others are imported without it.
		for re := (*shortener.RecordError)(nil); errors.As(err, &re) && re.Index >= 0 && re.Index < len(recs); {
			c.bad++
			fmt.Fprintf(env.Stderr, "line %d: %v\n", batch[re.Index].Line, re.Err)
			recs = slices.Delete(recs, re.Index, re.Index+1)
			batch = slices.Delete(batch, re.Index, re.Index+1)
			res, err = s.(shortener.RecordStore).ImportRecords(ctx, recs)
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
