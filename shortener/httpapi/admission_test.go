package httpapi_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/overload"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/httpapi"
)

// Below the floor nothing is shed, whatever the adaptive limit and rate
// say: after late windows have taken the create budget to 1 and the rate
// to its lowest, a client sending creates one at a time gets every one
// through, and with the floor's requests in flight the next one is shed.
func TestShedFloor(t *testing.T) {
	var now atomic.Int64
	mon := overload.NewMonitor(time.Millisecond)
	mon.UseClock(func() time.Duration { return time.Duration(now.Load()) })
	bs := blockingStore{entered: make(chan struct{}, 10), release: make(chan struct{})}
	var hold atomic.Bool
	s := start(t, setup{cfg: httpapi.Config{MaxInflightCreates: 256, Overload: mon, OverloadRate: true, ShedFloor: 3},
		wrap: func(st shortener.Store) shortener.Store { bs.Store = st; return holdingStore{bs, &hold} }})
	for range 10 { // 256 → 1 in flight; the rate at its lowest
		s.do(t, "GET", "/abcdefghij", "")
		s.do(t, "POST", "/shortenURL", `{"OriginalURL":"https://example.com/"}`)
		now.Add(int64(10 * time.Millisecond))
		mon.EndWindow(true)
	}
	if m := s.do(t, "GET", "/metrics", "").Body; !strings.Contains(m, `linkgate_http_inflight_limit{class="create"} 1`) ||
		!strings.Contains(m, `linkgate_http_admission_rate{class="create"} 100`) {
		t.Fatalf("late windows did not take the create budget to 1 and the rate to 100/s:\n%s", grepLines(m, "class=\"create\""))
	}
	// The clock stands still: the rate lets no create through.
	for i := range 50 {
		if r := s.do(t, "POST", "/api/v1/links", fmt.Sprintf(`{"url":"https://example.com/%d"}`, i)); r.Status != 201 {
			t.Fatalf("create %d of a lone client, one at a time: %d %q", i, r.Status, r.Body)
		}
	}
	// Three held in the store: the floor; the fourth is over it.
	hold.Store(true)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if r := s.do(t, "POST", "/shortenURL", `{"OriginalURL":"https://held.example/"}`); r.Status != 201 {
				t.Errorf("held create within the floor: %d %q", r.Status, r.Body)
			}
		})
	}
	for range 3 {
		<-bs.entered
	}
	wantError(t, s.do(t, "POST", "/shortenURL", `{"OriginalURL":"https://over.example/"}`), 503, "overloaded")
	close(bs.release)
	wg.Wait()
}

// holdingStore holds creates in a blockingStore only while hold is set.
type holdingStore struct {
	blockingStore
	hold *atomic.Bool
}

func (s holdingStore) Create(ctx context.Context, l shortener.Link) error {
	if s.hold.Load() {
		return s.blockingStore.Create(ctx, l)
	}
	return s.blockingStore.Store.Create(ctx, l)
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Issue 26 §1: a burst of hostile requests from other connections
// (oversized bodies and headers, malformed framing, slow senders, a TLS
// ClientHello on the plain port, a client that never reads, scans of
// unknown links), and meanwhile and right after it one client sending
// creates one at a time, valid and invalid, each as soon as the previous
// answer arrived, with the
// admission control linkgate serve runs by default. None of its requests
// is shed. The controller of before (no floor, the scheduler's latency
// alone) shed some in every run.
func TestLoneClientAfterHostileBurst(t *testing.T) {
	mon := overload.NewMonitor(250 * time.Microsecond)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { stop(); <-done })
	s := start(t, setup{cfg: httpapi.Config{MaxInflight: 4096, MaxInflightCreates: httpapi.DefaultMaxInflightCreates, MaxInflightQR: 32,
		MaxInflightAdmin: 64, Overload: mon, OverloadRate: true, ShedDelay: 100 * time.Millisecond}})
	go func() { mon.Run(ctx, overload.DefaultWindow); close(done) }()
	addr := strings.TrimPrefix(s.URL, "http://")

	burst := make(chan struct{})
	go func() { hostileBurst(t, addr, 200); close(burst) }()
	defer func() { <-burst }()
	var statuses [600]int
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range statuses {
		path, body := "/shortenURL", fmt.Sprintf(`{"OriginalURL":"https://lone.example/%d"}`, i)
		switch i % 4 {
		case 1:
			path, body = "/api/v1/links", fmt.Sprintf(`{"url":"https://lone.example/v1/%d"}`, i)
		case 2:
			body = `{"OriginalURL":"not a url"}`
		case 3:
			path, body = "/api/v1/links", `{"url":`
		}
		resp, err := client.Post(s.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses[i] = resp.StatusCode
	}
	shed := 0
	for i, st := range statuses {
		switch {
		case st == 503:
			shed++
		case i%4 < 2 && st != 201, i%4 >= 2 && st != 400:
			t.Errorf("request %d: status %d", i, st)
		}
	}
	if shed > 0 {
		t.Errorf("%d of %d requests of a lone client shed after a hostile burst (%d late windows)", shed, len(statuses), mon.Late())
	}
	t.Logf("%d late windows, %d late by the latency alone", mon.Late(), mon.HostLate())
}

// hostileBurst sends n hostile requests, each on a connection of its own,
// a few at a time, and returns once the server has dealt with each:
// answered and closed it, or closed it unanswered.
func hostileBurst(t *testing.T, addr string, n int) {
	t.Helper()
	big := strings.Repeat("x", 64<<10)
	kinds := []func(c net.Conn){
		func(c net.Conn) { // a body over the limit
			fmt.Fprintf(c, "POST /shortenURL HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(big), big)
		},
		func(c net.Conn) { // headers over the limit
			fmt.Fprintf(c, "GET /abcdefghij HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", big[:20<<10])
		},
		func(c net.Conn) { io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n") },
		func(c net.Conn) { io.WriteString(c, "\x00\x01\x02 garbage\r\n\r\n") },
		func(c net.Conn) { // a TLS ClientHello on the plain port
			tls.Client(c, &tls.Config{InsecureSkipVerify: true, ServerName: "x"}).Handshake()
		},
		func(c net.Conn) { // a slow sender that gives up
			for _, b := range []byte("POST /shortenURL HTTP/1.1\r\n") {
				c.Write([]byte{b})
				time.Sleep(time.Millisecond) // deliberate: a slow sender's pace
			}
		},
		func(c net.Conn) { // pipelines and never reads
			req := "GET /static/app.js HTTP/1.1\r\nHost: x\r\n\r\n"
			io.WriteString(c, strings.Repeat(req, 200))
		},
		func(c net.Conn) { // scans for links
			w := bufio.NewWriter(c)
			for i := range 50 {
				fmt.Fprintf(w, "GET /scan%06d HTTP/1.1\r\nHost: x\r\n\r\n", i)
			}
			w.Flush()
		},
	}
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			kinds[i%len(kinds)](c)
			c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			io.Copy(io.Discard, c)
		})
	}
	wg.Wait()
}
