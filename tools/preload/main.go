// Command preload creates links with given ids through a running linkgate
// server's REST API (POST /api/v1/links with a slug), so benchmarks can
// load the same links into any store. Ids come one per line from -ids; the
// target of id X is https://bench.example/X. A taken id (409) counts as
// loaded, so a rerun is harmless; a 503 (the store was slow) is retried.
//
//	preload -url http://127.0.0.1:8080 -ids hot.ids -c 64
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	base := flag.String("url", "", "base URL of the linkgate server")
	ids := flag.String("ids", "", "file of ids, one per line")
	conc := flag.Int("c", 64, "concurrent requests")
	flag.Parse()
	if err := run(*base, *ids, *conc); err != nil {
		fmt.Fprintln(os.Stderr, "preload:", err)
		os.Exit(1)
	}
}

func run(base, idsFile string, conc int) error {
	if base == "" || idsFile == "" || conc < 1 {
		return fmt.Errorf("-url and -ids are required, -c must be positive")
	}
	f, err := os.Open(idsFile)
	if err != nil {
		return err
	}
	defer f.Close()
	ids := make(chan string, conc)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	var done atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for id := range ids {
				if err := create(client, base, id); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				done.Add(1)
			}
		})
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if id := sc.Text(); id != "" {
			ids <- id
		}
	}
	close(ids)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := sc.Err(); err != nil {
		return err
	}
	el := time.Since(start)
	fmt.Printf("preloaded %d links in %.1fs (%.0f/s, %d concurrent)\n", done.Load(), el.Seconds(), float64(done.Load())/el.Seconds(), conc)
	return nil
}

func create(client *http.Client, base, id string) error {
	body := fmt.Sprintf(`{"url":"https://bench.example/%s","slug":%q}`, id, id)
	for attempt := 1; ; attempt++ {
		resp, err := client.Post(base+"/api/v1/links", "application/json", bytes.NewBufferString(body))
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusConflict:
			return nil
		case resp.StatusCode == http.StatusServiceUnavailable && attempt < 10:
			time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
		default:
			return fmt.Errorf("create %s: %d %s", id, resp.StatusCode, b)
		}
	}
}
