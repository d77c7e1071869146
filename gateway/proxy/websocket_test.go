package proxy_test

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/net/http2"

	"github.com/linkgate/linkgate/gateway/plugin/prometheus"
	"github.com/linkgate/linkgate/gateway/proxy"
	"github.com/linkgate/linkgate/internal/eventually"
)

// wsUpstream is a real WebSocket server (gorilla/websocket): like the
// test server of APISIX's t/node/upstream-websocket.t it sends "hello"
// first, then echoes every message; it answers a request that is not an
// upgrade with gorilla's 400. closed gets an error when a connection ends.
func wsUpstream(t *testing.T, tlsToo bool) (addr string, closed chan error) {
	t.Helper()
	closed = make(chan error, 16)
	up := websocket.Upgrader{Subprotocols: []string{"chat"}, CheckOrigin: func(*http.Request) bool { return true }}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, http.Header{"X-Upstream-Path": {r.URL.Path}})
		if err != nil {
			return // gorilla answered 400
		}
		defer c.Close()
		c.SetReadLimit(64 << 20)
		if err := c.WriteMessage(websocket.TextMessage, []byte("hello")); err != nil {
			closed <- err
			return
		}
		for {
			typ, msg, err := c.ReadMessage()
			if err != nil {
				closed <- err
				return
			}
			if err := c.WriteMessage(typ, msg); err != nil {
				closed <- err
				return
			}
		}
	})
	var s *httptest.Server
	if tlsToo {
		s = httptest.NewTLSServer(h)
	} else {
		s = httptest.NewServer(h)
	}
	t.Cleanup(s.Close)
	return s.Listener.Addr().String(), closed
}

func wsRoute(id, uri, node, extra string) (string, string) {
	return route(id, uri, node, extra)
}

// echo sends msg and checks it comes back.
func echo(t *testing.T, c *websocket.Conn, typ int, msg []byte) {
	t.Helper()
	if err := c.WriteMessage(typ, msg); err != nil {
		t.Fatal(err)
	}
	gt, got, err := c.ReadMessage()
	if err != nil || gt != typ || !bytes.Equal(got, msg) {
		t.Fatalf("echo of %d bytes: type %d, %d bytes, %v", len(msg), gt, len(got), err)
	}
}

// TestWebSocket: a route with enable_websocket upgrades and relays both
// ways, over cleartext and TLS; the subprotocol passes; the tunnel is
// counted while open and in prometheus once closed; a route without it
// refuses the upgrade as APISIX (the node gets a plain request).
func TestWebSocket(t *testing.T) {
	w := startTLSGateway(t, proxy.Options{})
	node, closed := wsUpstream(t, false)
	k1, v1 := wsRoute("1", "/ws", node, `"enable_websocket":true,"plugins":{"prometheus":{}},`)
	k2, v2 := wsRoute("2", "/plain", node, "")
	w.load(t, map[string]string{k1: v1, k2: v2})
	prom := promHandler(w.gw)

	dialers := map[string]struct {
		d    *websocket.Dialer
		base string
	}{
		"cleartext": {&websocket.Dialer{HandshakeTimeout: 5 * time.Second}, "ws://" + strings.TrimPrefix(w.gw.url, "http://")},
		"TLS": {&websocket.Dialer{HandshakeTimeout: 5 * time.Second,
			TLSClientConfig: &tls.Config{ServerName: "www.test.com", RootCAs: w.ca.Pool()}}, "wss://" + w.tlsAddr},
	}
	for name, dl := range dialers {
		t.Run(name, func(t *testing.T) {
			c, resp, err := dl.d.Dial(dl.base+"/ws", http.Header{"Sec-WebSocket-Protocol": {"chat"}, "Origin": {"http://example.com"}})
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			if resp.StatusCode != 101 || resp.Header.Get("Sec-WebSocket-Protocol") != "chat" ||
				resp.Header.Get("X-Upstream-Path") != "/ws" || resp.Header.Get("Server") != "linkgate" {
				t.Errorf("101 headers: %d %v", resp.StatusCode, resp.Header)
			}
			if resp.Header.Get("Content-Type") != "" {
				t.Errorf("Content-Type %q on a 101", resp.Header.Get("Content-Type"))
			}
			_, hello, err := c.ReadMessage()
			if err != nil || string(hello) != "hello" {
				t.Fatalf("first frame %q %v", hello, err)
			}
			if m := scrape(prom); !strings.Contains(m, "linkgate_websocket_tunnels 1") {
				t.Errorf("open tunnels not 1:\n%s", m)
			}
			big := make([]byte, 1<<20)
			rand.Read(big)
			for i := range 20 {
				echo(t, c, websocket.TextMessage, []byte(fmt.Sprintf("message %d", i)))
			}
			echo(t, c, websocket.BinaryMessage, big)
			c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
			c.Close()
			select {
			case err := <-closed:
				if !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
					t.Errorf("the node saw %v, want the client's close frame", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the node's connection is still open after the client closed")
			}
			eventually.True(t, 5*time.Second, "the tunnel is gone", func() bool { return w.g.Stats().WebSockets == 0 })
		})
	}
	eventually.True(t, 5*time.Second, "prometheus counts both tunnels with code 101", func() bool {
		return strings.Contains(scrape(prom), "linkgate_websocket_tunnels 0") &&
			strings.Contains(scrape(prom), `apisix_http_status{code="101",consumer="",matched_host="",matched_uri="/ws",node="127.0.0.1",route="1",service=""} 2`)
	})

	// Without enable_websocket: the node gets no Upgrade header, and its
	// 400 reaches the client (APISIX's TEST 7).
	_, resp, err := dialers["cleartext"].d.Dial(dialers["cleartext"].base+"/plain", nil)
	if !errors.Is(err, websocket.ErrBadHandshake) || resp == nil || resp.StatusCode != 400 {
		t.Fatalf("upgrade on a route without enable_websocket: %v %v, want the node's 400", err, resp)
	}
	// A plain request on the WebSocket route is proxied as any other.
	if code, _, body := get(t, w.gw.url+"/ws"); code != 400 {
		t.Errorf("plain GET on the websocket route: %d %q, want the node's 400", code, body)
	}
}

// promHandler is the gateway's prometheus export.
func promHandler(w *gw) http.Handler {
	return w.prom.Handler(func() prometheus.ServerStats {
		return prometheus.ServerStats{WebSockets: w.g.Stats().WebSockets}
	}, func() bool { return true })
}

func scrape(h http.Handler) string {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", prometheus.ExportURI, nil))
	return rec.Body.String()
}

// TestWebSocketSwitches: enable_websocket of the route, else of its
// service, or of its inline upstream (APISIX's init.lua); false on the
// route wins over the service.
func TestWebSocketSwitches(t *testing.T) {
	w := startGateway(t)
	node, _ := wsUpstream(t, false)
	up := `"upstream":{"type":"roundrobin","nodes":{"` + node + `":1}}`
	w.load(t, map[string]string{
		"upstreams/6": `{"type":"roundrobin","nodes":{"` + node + `":1}}`,
		"services/1":  `{"enable_websocket":true,` + up + `}`,
		"routes/1":    `{"uri":"/route","enable_websocket":true,"upstream_id":"6"}`,
		"routes/2":    `{"uri":"/service","service_id":"1"}`,
		"routes/3":    `{"uri":"/route-off","enable_websocket":false,"service_id":"1"}`,
		"routes/4":    `{"uri":"/inline","upstream":{"type":"roundrobin","enable_websocket":true,"nodes":{"` + node + `":1}}}`,
		"routes/5":    `{"uri":"/off","upstream_id":"6"}`,
	})
	d := &websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	base := "ws://" + strings.TrimPrefix(w.url, "http://")
	for path, want := range map[string]bool{"/route": true, "/service": true, "/route-off": false, "/inline": true, "/off": false} {
		c, resp, err := d.Dial(base+path, nil)
		if got := err == nil; got != want {
			t.Errorf("%s: upgraded %v (%v), want %v", path, got, err, want)
		}
		if err == nil {
			echo(t, c, websocket.TextMessage, []byte("hello")) // the node's first frame is "hello" too
			c.Close()
		} else if resp != nil && resp.StatusCode != 400 {
			t.Errorf("%s: %d, want the node's 400", path, resp.StatusCode)
		}
	}
}

// TestWebSocketTimeouts: a tunnel without a byte either way for the
// route's read timeout is closed, one with traffic is not; the whole
// tunnel ends after WebSocketMaxDuration.
func TestWebSocketTimeouts(t *testing.T) {
	w := startGatewayWith(t, proxy.Options{WebSocketMaxDuration: 1500 * time.Millisecond})
	node, _ := wsUpstream(t, false)
	k1, v1 := wsRoute("1", "/ws", node, `"enable_websocket":true,"timeout":{"connect":1,"send":1,"read":0.4},`)
	w.load(t, map[string]string{k1: v1})
	d := &websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	base := "ws://" + strings.TrimPrefix(w.url, "http://")

	t.Run("idle", func(t *testing.T) {
		c, _, err := d.Dial(base+"/ws", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.ReadMessage() // hello
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		start := time.Now()
		if _, _, err := c.ReadMessage(); err == nil || isTimeout(err) {
			t.Fatalf("idle tunnel: %v, want it closed by the gateway", err)
		}
		// The gateway's clock started at the node's last frame, a moment
		// before start.
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Errorf("closed after %v, before the idle timeout (400ms)", d)
		}
	})
	t.Run("busy then max duration", func(t *testing.T) {
		c, _, err := d.Dial(base+"/ws", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.ReadMessage() // hello
		start := time.Now()
		var last error
		for time.Since(start) < 10*time.Second {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if err := c.WriteMessage(websocket.TextMessage, []byte("tick")); err != nil {
				last = err
				break
			}
			if _, _, err := c.ReadMessage(); err != nil {
				last = err
				break
			}
			time.Sleep(100 * time.Millisecond) // a steady client, well within the idle timeout
		}
		lived := time.Since(start)
		if last == nil || isTimeout(last) {
			t.Fatalf("tunnel not ended by the gateway after %v: %v", lived, last)
		}
		if lived < time.Second {
			t.Errorf("a busy tunnel ended after %v (%v): the idle timeout cut it", lived, last)
		}
	})
	eventually.True(t, 5*time.Second, "no tunnel left", func() bool { return w.g.Stats().WebSockets == 0 })
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestWebSocketUpstreamTLS: wss to the client and to an https node
// (APISIX's TEST 8 and 9); a node that is down is a 502.
func TestWebSocketUpstreamTLS(t *testing.T) {
	w := startTLSGateway(t, proxy.Options{})
	node, _ := wsUpstream(t, true)
	w.load(t, map[string]string{
		"routes/1": `{"uri":"/ws","enable_websocket":true,"upstream":{"scheme":"https","type":"roundrobin","nodes":{"` + node + `":1}}}`,
		"routes/2": `{"uri":"/down","enable_websocket":true,"upstream":{"type":"roundrobin","nodes":{"` + deadAddr(t) + `":1}}}`,
	})
	d := &websocket.Dialer{HandshakeTimeout: 5 * time.Second, TLSClientConfig: &tls.Config{ServerName: "www.test.com", RootCAs: w.ca.Pool()}}
	c, _, err := d.Dial("wss://"+w.tlsAddr+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, hello, err := c.ReadMessage()
	if err != nil || string(hello) != "hello" {
		t.Fatalf("received %q %v", hello, err)
	}
	echo(t, c, websocket.TextMessage, []byte("over TLS both sides"))
	c.Close()
	if _, resp, err := d.Dial("wss://"+w.tlsAddr+"/down", nil); err == nil || resp == nil || resp.StatusCode != 502 {
		t.Errorf("node down: %v %v, want 502", err, resp)
	}
}

// TestWebSocketShutdown: Shutdown ends open tunnels.
func TestWebSocketShutdown(t *testing.T) {
	w := startGateway(t)
	node, _ := wsUpstream(t, false)
	k1, v1 := wsRoute("1", "/ws", node, `"enable_websocket":true,`)
	w.load(t, map[string]string{k1: v1})
	c, _, err := (&websocket.Dialer{}).Dial("ws://"+strings.TrimPrefix(w.url, "http://")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.ReadMessage()
	done := make(chan error, 1)
	go func() {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _, err := c.ReadMessage()
		done <- err
	}()
	shut := make(chan error, 1)
	go func() { shut <- w.g.Shutdown(t.Context()) }()
	if err := <-done; err == nil || isTimeout(err) {
		t.Errorf("tunnel after Shutdown: %v, want closed", err)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// TestWebSocketHTTP2: an HTTP/2 client upgrades with extended CONNECT
// (RFC 8441), which the gateway's HTTP/2 server announces on every
// connection, whatever GODEBUG says.
func TestWebSocketHTTP2(t *testing.T) {
	w := startTLSGateway(t, proxy.Options{})
	node, closed := wsUpstream(t, false)
	k1, v1 := wsRoute("1", "/ws", node, `"enable_websocket":true,"methods":["GET"],`)
	k2, v2 := wsRoute("2", "/plain", node, "")
	w.load(t, map[string]string{k1: v1, k2: v2})
	// x/net's transport: net/http's refuses the :protocol pseudo-header.
	//lint:ignore SA1019 the only Go client that sends an extended CONNECT
	hc := &http.Client{Transport: &http2.Transport{TLSClientConfig: &tls.Config{ServerName: "www.test.com", RootCAs: w.ca.Pool()}}, Timeout: 10 * time.Second}
	connect := func(path, protocol string) (*http.Response, *io.PipeWriter) {
		pr, pw := io.Pipe()
		req, _ := http.NewRequest(http.MethodConnect, w.url(path), pr)
		req.Header.Set(":protocol", protocol)
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Protocol", "chat")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("extended CONNECT %s: %v", path, err)
		}
		return resp, pw
	}
	resp, pw := connect("/ws", "websocket")
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 || resp.Header.Get("Sec-WebSocket-Protocol") != "chat" {
		t.Fatalf("extended CONNECT: %d HTTP/%d %v", resp.StatusCode, resp.ProtoMajor, resp.Header)
	}
	if typ, msg := readFrame(t, resp.Body); typ != 1 || string(msg) != "hello" {
		t.Fatalf("first frame %d %q", typ, msg)
	}
	for _, msg := range []string{"over", "HTTP/2", strings.Repeat("x", 100000)} {
		writeFrame(t, pw, 1, []byte(msg))
		if typ, got := readFrame(t, resp.Body); typ != 1 || string(got) != msg {
			t.Fatalf("echo: %d %d bytes", typ, len(got))
		}
	}
	writeFrame(t, pw, 8, []byte{0x03, 0xe8}) // close, 1000
	pw.Close()
	select {
	case err := <-closed:
		if !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
			t.Errorf("the node saw %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the node's connection is still open")
	}
	resp.Body.Close()
	eventually.True(t, 5*time.Second, "the tunnel is gone", func() bool { return w.g.Stats().WebSockets == 0 })

	// Without enable_websocket, or for another protocol: 400.
	for _, c := range [][2]string{{"/plain", "websocket"}, {"/ws", "connect-udp"}} {
		resp, pw := connect(c[0], c[1])
		body, _ := io.ReadAll(resp.Body)
		pw.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(body), "error_msg") {
			t.Errorf("%s %s: %d %q, want 400", c[0], c[1], resp.StatusCode, body)
		}
	}
	// The connection still serves plain requests.
	if resp, err := hc.Get(w.url("/plain")); err != nil || resp.StatusCode != 400 {
		t.Errorf("plain request after the tunnels: %v %v", resp, err)
	}
}

// writeFrame writes one masked client frame (RFC 6455 §5.2).
func writeFrame(t *testing.T, w io.Writer, opcode byte, payload []byte) {
	t.Helper()
	var h []byte
	h = append(h, 0x80|opcode)
	switch n := len(payload); {
	case n < 126:
		h = append(h, 0x80|byte(n))
	case n < 1<<16:
		h = append(h, 0x80|126)
		h = binary.BigEndian.AppendUint16(h, uint16(n))
	default:
		h = append(h, 0x80|127)
		h = binary.BigEndian.AppendUint64(h, uint64(n))
	}
	mask := [4]byte{1, 2, 3, 4}
	h = append(h, mask[:]...)
	masked := make([]byte, len(payload))
	for i, b := range payload {
		masked[i] = b ^ mask[i%4]
	}
	if _, err := w.Write(append(h, masked...)); err != nil {
		t.Fatal(err)
	}
}

// readFrame reads one unmasked, unfragmented server frame.
func readFrame(t *testing.T, r io.Reader) (opcode byte, payload []byte) {
	t.Helper()
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		t.Fatal(err)
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		io.ReadFull(r, b[:])
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		io.ReadFull(r, b[:])
		n = binary.BigEndian.Uint64(b[:])
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		t.Fatal(err)
	}
	return h[0] & 0x0f, payload
}
