// Command benchprep prepares the data of `make bench-serve`: a pebble
// store (a directory) preloaded with N links under random ids (shortener.NewID, inserted in
// random order as real creates would be), and a file with every id, one
// per line in random order, for wrk's Lua script. With -visits, each link
// is imported with visit statistics too: the visits follow a Zipf law
// over the links in creation order (the r-th gets 1/r of them,
// normalised), spread evenly over the last -days days (a link with fewer
// visits than days gets one on as many random days), each under one
// referrer, browser and country, as an import of that many visits stores
// them (scripts/bench-stats.sh, make bench-stats).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
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
	visits := flag.Int("visits", 0, "visits to import with the links (0: none)")
	days := flag.Int("days", 30, "with -visits, the days (up to today) they fall on")
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
	created := time.Now().UTC().Truncate(time.Second).AddDate(0, 0, -*days)
	share := zipfShare(*n, *visits)
	rng := rand.New(rand.NewPCG(27, 5))
	var imported int64
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
			r := total + len(batch)
			st := linkVisits(share(r), *days, r, rng)
			imported += st.Total
			batch = append(batch, shortener.LinkRecord{Link: shortener.Link{ID: id, URL: fmt.Sprintf("https://www.example.com/articles/2026/%07d/a-typical-path?utm_source=x", r), CreatedAt: created}, Stats: st})
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
	fmt.Printf("preloaded %d links with %d visits into %s (%.0f MiB) in %v\n", total, imported, filepath.Base(*db), float64(size)/(1<<20), time.Since(start).Round(time.Millisecond))
}

// zipfShare returns the visits of the r-th link (from 0) of n when visits
// visits follow a Zipf law over them.
func zipfShare(n, visits int) func(r int) int64 {
	var h float64
	for r := range n {
		h += 1 / float64(r+1)
	}
	return func(r int) int64 { return int64(math.Round(float64(visits) / h / float64(r+1))) }
}

// linkVisits returns the statistics of v visits to the r-th link over the
// last days days.
func linkVisits(v int64, days, r int, rng *rand.Rand) shortener.VisitStats {
	if v == 0 {
		return shortener.VisitStats{}
	}
	today := time.Now().UTC()
	day := func(d int) string { return today.AddDate(0, 0, -d).Format(shortener.DayFormat) }
	st := shortener.VisitStats{Total: v, Days: shortener.Breakdown{},
		Referrers: shortener.Breakdown{[]string{"(direct)", "news.example.com", "t.co", "www.google.com"}[r%4]: v},
		Browsers:  shortener.Breakdown{[]string{"Chrome", "Firefox", "Safari", "Edge"}[r%4]: v},
		Countries: shortener.Breakdown{[]string{"US", "DE", "FR", "GB", "IN"}[r%5]: v}}
	if v < int64(days) {
		for _, d := range rng.Perm(days)[:v] {
			st.Days[day(d)] = 1
		}
		return st
	}
	for d := range days {
		st.Days[day(d)] = v / int64(days)
	}
	st.Days[day(rng.IntN(days))] += v % int64(days)
	return st
}
