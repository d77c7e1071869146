package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener/pebble"
)

// A `linkgate serve` process creating links under concurrent load is
// killed with SIGKILL at a random moment, five times over the same file.
// After each kill the store opens cleanly and every link that was answered
// 201 is there with its URL; the restarted server resolves them too.
func TestCrashSafety(t *testing.T) {
	bin, err := buildLinkgate()
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	db := filepath.Join(t.TempDir(), "links")
	created := map[string]string{} // id → URL, every 201 so far
	for round := range 5 {
		c := startChild(t, []string{bin}, db)
		// The restarted server resolves links created before the last kill.
		checked := 0
		for id, target := range created {
			if checked == 50 {
				break
			}
			checked++
			if status, _, body := call(t, "GET", c.URL+"/getFullURL/"+id, ""); status != 200 || body != `"`+target+`"` {
				t.Fatalf("round %d: link %s created before the kill answers %d %q", round, id, status, body)
			}
		}
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		var mu sync.Mutex
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 32 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					target := fmt.Sprintf("https://crash.example/r%d/w%d/%d", round, w, i)
					resp, err := client.Post(c.URL+"/shortenURL", "application/json", strings.NewReader(`{"OriginalURL":"`+target+`"}`))
					if err != nil {
						continue // killed mid-request: no answer, no promise
					}
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					var got struct{ ShortURL, OriginalURL string }
					if err != nil || resp.StatusCode != 201 || json.Unmarshal(body, &got) != nil {
						continue
					}
					mu.Lock()
					created[got.ShortURL] = target
					mu.Unlock()
				}
			})
		}
		time.Sleep(time.Duration(100+rng.IntN(700)) * time.Millisecond) // deliberate: the kill lands at a random point of the load
		if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		c.cmd.Wait()
		close(stop)
		wg.Wait()
		client.CloseIdleConnections()

		st, err := pebble.Open(db, pebble.Options{})
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		for id, target := range created {
			l, err := st.Get(context.Background(), id)
			if err != nil || l.URL != target {
				st.Close()
				t.Fatalf("round %d: 201'd link %s lost after SIGKILL: %+v %v", round, id, l, err)
			}
		}
		st.Close()
		t.Logf("round %d: killed after load; %d links answered 201 so far, all present", round, len(created))
	}
	if len(created) < 100 {
		t.Errorf("only %d creates succeeded over five rounds: the load did not run", len(created))
	}
}
