// Command benchprep prepares the data of `make bench-serve`: a pebble
// store (a directory) preloaded with N links under random ids (shortener.NewID, inserted in
// random order as real creates would be), and a file with every id, one
// per line in random order, for wrk's Lua script.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/pebble"
)

func main() {
	db := flag.String("dir", "", "store directory to create (must not exist)")
	idsFile := flag.String("ids", "", "file to write the ids to")
	n := flag.Int("n", 1_000_000, "links to preload")
	flag.Parse()
	if *db == "" || *idsFile == "" {
		log.Fatal("usage: benchprep -dir DIR -ids FILE [-n N]")
	}
	if _, err := os.Stat(*db); err == nil {
		log.Fatalf("%s exists", *db)
	}
	start := time.Now()
	tmp := *db + ".tmp"
	os.RemoveAll(tmp)
	s, err := pebble.Open(tmp, pebble.Options{NoIndex: true})
	if err != nil {
		log.Fatal(err)
	}
	ids, err := os.Create(*idsFile)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	created := time.Now().UTC().Truncate(time.Second)
	const chunk = 20_000
	batch := make([]shortener.LinkRecord, 0, chunk)
	total := 0
	for total < *n {
		batch = batch[:0]
		for len(batch) < min(chunk, *n-total) {
			id, err := shortener.NewID()
			if err != nil {
				log.Fatal(err)
			}
			// Target URLs of a realistic length (~60 bytes), all distinct.
			batch = append(batch, shortener.LinkRecord{Link: shortener.Link{ID: id, URL: fmt.Sprintf("https://www.example.com/articles/2026/%07d/a-typical-path?utm_source=x", total+len(batch)), CreatedAt: created}})
		}
		res, err := s.ImportRecords(ctx, batch)
		if err != nil {
			log.Fatal(err)
		}
		for i, r := range batch {
			fmt.Fprintln(ids, r.Link.ID) // a collision (astronomically rare) still names a stored link
			if res[i] == shortener.Imported {
				total++
			}
		}
	}
	if err := ids.Close(); err != nil {
		log.Fatal(err)
	}
	if err := s.Compact(); err != nil { // the store as a long-running one has it
		log.Fatal(err)
	}
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}
	if err := os.Rename(tmp, *db); err != nil {
		log.Fatal(err)
	}
	var size int64
	filepath.Walk(*db, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			size += fi.Size()
		}
		return nil
	})
	fmt.Printf("preloaded %d links into %s (%.0f MiB) in %v\n", total, filepath.Base(*db), float64(size)/(1<<20), time.Since(start).Round(time.Millisecond))
}
