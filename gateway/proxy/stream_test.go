package proxy_test

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
	"github.com/linkgate/linkgate/gateway/proxy"
	"github.com/linkgate/linkgate/internal/eventually"
)

// pattern is an endless deterministic byte stream, so both ends can
// check a body without holding it.
type pattern struct{ off int64 }

func (p *pattern) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = byte((p.off + int64(i)) * 31 % 251)
	}
	p.off += int64(len(b))
	return len(b), nil
}

func patternSum(n int64) [32]byte {
	h := sha256.New()
	io.Copy(h, io.LimitReader(&pattern{}, n))
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s
}

// bodyUpstream serves /down?n=N&chunked=1 (N pattern bytes) and /up (the
// size and hash of the request body, and whether it came chunked), /sse
// (events paced by the test through next).
func bodyUpstream(t *testing.T, next <-chan struct{}) string {
	return upstream(t, "bodies", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/down"):
			n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
			if r.URL.Query().Get("chunked") == "" {
				w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
			}
			io.Copy(w, io.LimitReader(&pattern{}, n))
		case r.URL.Path == "/up":
			h := sha256.New()
			n, err := io.Copy(h, r.Body)
			fmt.Fprintf(w, "n=%d err=%v chunked=%v sum=%x", n, err, len(r.TransferEncoding) > 0, h.Sum(nil))
		case r.URL.Path == "/sse":
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				fmt.Fprintf(w, "data: event %d\n\n", i)
				w.(http.Flusher).Flush()
				if i < 2 {
					select {
					case <-next:
					case <-r.Context().Done():
						return
					}
				}
			}
		}
	})
}

func route(id, uri, node string, extra string) (string, string) {
	return "routes/" + id, `{"uri":"` + uri + `",` + extra + `"upstream":{"type":"roundrobin","nodes":{"` + node + `":1}}}`
}

// TestStreamingBodies: bodies larger than the buffered path, or of unknown
// length, pass through intact both ways, with their framing; small ones
// keep Content-Length.
func TestStreamingBodies(t *testing.T) {
	w := startGatewayWith(t, proxy.Options{ServerHeader: "linkgate", MaxBodySize: 8 << 20})
	node := bodyUpstream(t, nil)
	k1, v1 := route("1", "/down", node, "")
	k2, v2 := route("2", "/up", node, "")
	w.load(t, map[string]string{k1: v1, k2: v2})
	for _, tc := range []struct {
		n       int64
		chunked bool
	}{{100, false}, {100, true}, {5 << 20, false}, {5 << 20, true}} {
		t.Run(fmt.Sprintf("down %d chunked=%v", tc.n, tc.chunked), func(t *testing.T) {
			url := fmt.Sprintf("%s/down?n=%d", w.url, tc.n)
			if tc.chunked {
				url += "&chunked=1"
			}
			resp, err := client.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			h := sha256.New()
			n, err := io.Copy(h, resp.Body)
			if err != nil || n != tc.n || [32]byte(h.Sum(nil)) != patternSum(tc.n) {
				t.Fatalf("got %d bytes (%v), want %d intact", n, err, tc.n)
			}
			if chunked := len(resp.TransferEncoding) > 0; chunked != (tc.chunked && tc.n > 64<<10) {
				t.Errorf("chunked %v, content-length %d", chunked, resp.ContentLength)
			}
		})
		t.Run(fmt.Sprintf("up %d chunked=%v", tc.n, tc.chunked), func(t *testing.T) {
			var body io.Reader = io.LimitReader(&pattern{}, tc.n)
			if tc.chunked {
				body = io.MultiReader(body) // no length: sent chunked
			}
			req, _ := http.NewRequest("POST", w.url+"/up", body)
			if !tc.chunked {
				req.ContentLength = tc.n
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := fmt.Sprintf("n=%d err=<nil> chunked=%v sum=%x", tc.n, tc.chunked, patternSum(tc.n))
			if resp.StatusCode != 200 || string(got) != want {
				t.Errorf("%d %q, want %q", resp.StatusCode, got, want)
			}
		})
	}
	// Over the limit: 413, by length or, chunked, once past it.
	for _, chunked := range []bool{false, true} {
		req, _ := http.NewRequest("POST", w.url+"/up", io.MultiReader(io.LimitReader(&pattern{}, 9<<20)))
		if !chunked {
			req.ContentLength = 9 << 20
		}
		resp, err := client.Do(req)
		if err != nil {
			if !chunked {
				t.Errorf("over the limit by length: %v, want a 413", err)
			}
			continue // chunked: the gateway may close while the client still sends
		}
		resp.Body.Close()
		if resp.StatusCode != 413 {
			t.Errorf("chunked=%v: %d over the limit, want 413", chunked, resp.StatusCode)
		}
	}
}

// TestServerSentEvents: each event reaches the client before the upstream
// sends the next (the upstream waits for the test to have read it), over
// HTTP/1.1 and HTTP/2.
func TestServerSentEvents(t *testing.T) {
	w := startTLSGateway(t, proxy.Options{})
	next := make(chan struct{})
	k, v := route("1", "/sse", bodyUpstream(t, next), "")
	w.load(t, map[string]string{k: v})
	clients := map[string]*http.Client{"HTTP/1.1 cleartext": client, "HTTP/1.1 TLS": w.clientFor(false), "HTTP/2": w.clientFor(true)}
	for name, c := range clients {
		t.Run(name, func(t *testing.T) {
			url := w.url("/sse")
			if name == "HTTP/1.1 cleartext" {
				url = w.gw.url + "/sse"
			}
			resp, err := c.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			for i := range 3 {
				line, err := br.ReadString('\n')
				if err != nil || line != fmt.Sprintf("data: event %d\n", i) {
					t.Fatalf("event %d: %q %v", i, line, err)
				}
				br.ReadString('\n')
				if i < 2 {
					select {
					case next <- struct{}{}:
					case <-time.After(10 * time.Second):
						t.Fatal("the upstream did not wait for the event")
					}
				}
			}
		})
	}
}

// TestStreamingKeepsBodyPlugins: a route whose plugins rewrite the body
// still gets the whole body, however large.
func TestStreamingKeepsBodyPlugins(t *testing.T) {
	big := strings.Repeat("hello world ", 20000) // 240 KB, past the buffered path
	w := plugintest.Start(t, phaseRegistry(), func(rw http.ResponseWriter, r *http.Request) {
		io.WriteString(rw, big) // chunked: no length given
	})
	up := `"upstream":{"type":"roundrobin","nodes":{"$UPSTREAM":1}}`
	w.Load(t, map[string]string{
		"routes/1": `{"uri":"/rw","plugins":{"response-rewrite":{"filters":[{"regex":"hello","replace":"bye","scope":"global"}]}},` + up + `}`,
		"routes/2": `{"uri":"/plain",` + up + `}`,
	})
	if r := w.Do(t, "GET", "/rw", ""); r.Body != strings.ReplaceAll(big, "hello", "bye") {
		t.Errorf("rewritten body: %d bytes", len(r.Body))
	}
	if r := w.Do(t, "GET", "/plain", ""); r.Body != big {
		t.Errorf("plain body: %d bytes", len(r.Body))
	}
}

// TestClientGoneMidStream: a client that leaves during a streamed download
// frees the upstream connection; the gateway goes on serving.
func TestClientGoneMidStream(t *testing.T) {
	w := startGateway(t)
	stopped := make(chan error, 1)
	node := upstream(t, "endless", func(rw http.ResponseWriter, r *http.Request) {
		_, err := io.Copy(rw, &pattern{})
		stopped <- err
	})
	k, v := route("1", "/endless", node, "")
	w.load(t, map[string]string{k: v})
	c, err := net.Dial("tcp", strings.TrimPrefix(w.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "GET /endless HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, err := io.ReadFull(c, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case err := <-stopped:
		if err == nil {
			t.Error("the upstream's write ended without an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream is still sending to a client that left")
	}
	eventually.True(t, 5*time.Second, "the gateway serves after a client left mid-stream", func() bool {
		code, _, _ := get(t, w.url+"/nope")
		return code == 404
	})
}

// TestWholeChunkedResponseBuffered: a chunked answer that arrives whole
// with its header (as nginx's echo and most small dynamic answers do)
// takes the buffered path: the client gets it with a Content-Length, or,
// when it has a trailer, chunked with the trailer; one whose end has not
// arrived streams (TestServerSentEvents).
func TestWholeChunkedResponseBuffered(t *testing.T) {
	w := startGateway(t)
	node := upstream(t, "raw", func(rw http.ResponseWriter, r *http.Request) {
		c, buf, err := rw.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		buf.Reader.Discard(buf.Reader.Buffered())
		trailer := ""
		if r.URL.Query().Get("trailer") != "" {
			trailer = "X-Trailer: t\r\n"
		}
		// One write, so the gateway reads header and chunks together.
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Up: raw\r\n\r\n"+
			"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n"+trailer+"\r\n")
	})
	k, v := route("1", "/raw", node, "")
	w.load(t, map[string]string{k: v})
	for _, trailer := range []bool{false, true, false} {
		url := w.url + "/raw"
		if trailer {
			url += "?trailer=1"
		}
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != "hello world" || resp.Header.Get("X-Up") != "raw" {
			t.Fatalf("%q %v %v", body, err, resp.Header)
		}
		switch {
		case trailer && resp.Trailer.Get("X-Trailer") != "t":
			t.Errorf("trailer %v, want X-Trailer: t", resp.Trailer)
		case !trailer && (resp.ContentLength != 11 || len(resp.TransferEncoding) > 0):
			t.Errorf("content-length %d, transfer-encoding %v: want the buffered answer", resp.ContentLength, resp.TransferEncoding)
		}
	}
}
