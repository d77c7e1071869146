// Command mkfixture writes the bolt store of testdata/release-096063f with
// the linkgate release before the pebble store (main at 096063f), and the
// file expected.json that says what the store holds, as that release's own
// API answered. It is not part of the build (testdata); run it as
//
//	git worktree add /tmp/lg-096063f 096063f   # or: git archive 096063f | tar -x -C /tmp/lg-096063f
//	(cd /tmp/lg-096063f && go build -o /tmp/linkgate-096063f ./cmd/linkgate)
//	go run ./shortener/bolt/testdata/mkfixture -bin /tmp/linkgate-096063f -out shortener/bolt/testdata/release-096063f
//
// The server counts visits with a 20 ms flush interval so that the visit
// log passes the fold's threshold (512 records) and the background fold
// runs; later visits stay in the log, unfolded. Links with a visit limit
// have their statistics in place; three links are deleted (tombs), one of
// them created again and visited. Then the expected state is read through
// the API, ten more links are created and the server is killed with
// SIGKILL at once, before the create log's records are applied to the
// bbolt file (the applier waits 100 ms): the store has unapplied create
// log records and an unfolded visit log, as a crash leaves it.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

const key = "fixture-key"

func main() {
	bin := flag.String("bin", "", "linkgate binary of the old release")
	out := flag.String("out", "", "directory to write the store and expected.json into (must not exist)")
	flag.Parse()
	if *bin == "" || *out == "" {
		log.Fatal("usage: mkfixture -bin LINKGATE -out DIR")
	}
	if _, err := os.Stat(*out); err == nil {
		log.Fatalf("%s exists", *out)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	cmd := exec.Command(*bin, "serve", "--addr", "127.0.0.1:0", "--store", "bolt:"+filepath.Join(*out, "links.db"),
		"--admin-key", key, "--visits-flush-interval", "20ms", "--log-format", "json", "--log-level", "info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		log.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	defer cmd.Process.Kill()
	addr := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`"addr":"([^"]+)"`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil && strings.Contains(sc.Text(), "listening") {
				addr <- m[1]
			}
		}
	}()
	base := "http://" + <-addr

	create := func(slug, url string, extra string) {
		body := fmt.Sprintf(`{"url":%q,"slug":%q%s}`, url, slug, extra)
		if st, b := call("POST", base+"/api/v1/links", body); st != 201 {
			log.Fatalf("create %s: %d %s", slug, st, b)
		}
	}
	for i := range 40 {
		extra := ""
		switch {
		case i%10 == 3:
			extra = `,"max_visits":1000`
		case i%10 == 7:
			extra = `,"expires_at":"2099-01-02T03:04:05Z"`
		}
		create(fmt.Sprintf("fix%03d", i), fmt.Sprintf("https://fixture.example/%d?q=%d&x=ü", i, i*i), extra)
	}
	agents := []string{
		"Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36",
		"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
	}
	refs := []string{"", "https://news.example.com/item?id=1", "https://t.co/abc"}
	visit := func(id string, n, seed int) {
		for j := range n {
			req, _ := http.NewRequest("GET", base+"/"+id, nil)
			req.Header.Set("User-Agent", agents[(j+seed/2)%len(agents)])
			if r := refs[(j+seed)%len(refs)]; r != "" {
				req.Header.Set("Referer", r)
			}
			resp, err := noRedirect.Do(req)
			if err != nil {
				log.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 302 {
				log.Fatalf("visit %s: %d", id, resp.StatusCode)
			}
		}
	}
	// About 600 flushes of a few visits each: the fold runs.
	for round := range 600 {
		visit(fmt.Sprintf("fix%03d", round%40), 1+round%3, round)
		time.Sleep(22 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // let the paced fold finish
	for _, id := range []string{"fix001", "fix002", "fix013"} {
		if st, b := call("DELETE", base+"/api/v1/links/"+id, ""); st != 204 {
			log.Fatalf("delete %s: %d %s", id, st, b)
		}
	}
	create("fix002", "https://fixture.example/again", "")
	// Visits after the fold: they stay in the log, unfolded.
	for round := range 30 {
		visit(fmt.Sprintf("fix%03d", 2+round%9), 2, round)
		time.Sleep(22 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // flushed

	type entry struct {
		Link  json.RawMessage `json:"link"`
		Stats json.RawMessage `json:"stats"`
	}
	var expected []entry
	st, b := call("GET", base+"/api/v1/links?limit=1000", "")
	if st != 200 {
		log.Fatalf("list: %d %s", st, b)
	}
	var page struct {
		Links []json.RawMessage `json:"links"`
	}
	if err := json.Unmarshal(b, &page); err != nil {
		log.Fatal(err)
	}
	for _, l := range page.Links {
		var id struct{ ID string }
		json.Unmarshal(l, &id)
		st, sb := call("GET", base+"/api/v1/links/"+id.ID+"/stats", "")
		if st != 200 {
			log.Fatalf("stats %s: %d %s", id.ID, st, sb)
		}
		expected = append(expected, entry{l, sb})
	}
	// Created just before the crash: in the create log only.
	for i := range 10 {
		slug := fmt.Sprintf("late%02d", i)
		body := fmt.Sprintf(`{"url":"https://fixture.example/late/%d","slug":%q}`, i, slug)
		st, b := call("POST", base+"/api/v1/links", body)
		if st != 201 {
			log.Fatalf("create %s: %d %s", slug, st, b)
		}
		expected = append(expected, entry{json.RawMessage(b), json.RawMessage(`{"total":0,"bots":0}`)})
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	j, _ := json.MarshalIndent(expected, "", "  ")
	if err := os.WriteFile(filepath.Join(*out, "expected.json"), append(j, '\n'), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("wrote %d links to %s\n", len(expected), *out)
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func call(method, url, body string) (int, []byte) {
	req, err := http.NewRequest(method, url, bytes.NewReader([]byte(body)))
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
