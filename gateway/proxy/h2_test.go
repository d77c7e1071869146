package proxy_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/linkgate/linkgate/gateway/proxy"
)

// h2client is a raw HTTP/2 client over a connection served by
// Gateway.ServeH2 (no TLS), for frame-level tests, several of them ported
// from golang.org/x/net/http2's server_test.go and h2spec's cases.
type h2client struct {
	t    *testing.T
	c    net.Conn
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	dec  *hpack.Decoder
}

func newH2Client(t *testing.T, g *proxy.Gateway, settings ...http2.Setting) *h2client {
	t.Helper()
	cc, sc := tcpPair(t)
	done := make(chan struct{})
	go func() { defer close(done); g.ServeH2(sc) }()
	t.Cleanup(func() {
		cc.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the connection's goroutine did not end")
		}
	})
	_ = cc.SetDeadline(time.Now().Add(10 * time.Second))
	c := &h2client{t: t, c: cc, fr: http2.NewFramer(cc, bufio.NewReader(cc)), dec: hpack.NewDecoder(4096, nil)}
	c.fr.AllowIllegalWrites = true // to send what a server must refuse
	c.enc = hpack.NewEncoder(&c.hbuf)
	if _, err := io.WriteString(cc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := c.fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	return c
}

// block encodes header fields (name, value, ...).
func (c *h2client) block(fields ...string) []byte {
	c.hbuf.Reset()
	for i := 0; i+1 < len(fields); i += 2 {
		_ = c.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return append([]byte(nil), c.hbuf.Bytes()...)
}

func (c *h2client) get(id uint32, path string, extra ...string) {
	c.t.Helper()
	fields := append([]string{":method", "GET", ":scheme", "https", ":authority", "test.com", ":path", path}, extra...)
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.block(fields...), EndStream: true, EndHeaders: true}); err != nil {
		c.t.Fatal(err)
	}
}

// next reads frames until one for which keep returns true, acknowledging
// nothing; io errors end the test.
func (c *h2client) next(keep func(http2.Frame) bool) http2.Frame {
	c.t.Helper()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.t.Fatalf("read: %v", err)
		}
		if keep(f) {
			return f
		}
	}
}

func isType[T http2.Frame](f http2.Frame) bool { _, ok := f.(T); return ok }

// status reads the next response HEADERS and returns its :status and
// fields.
func (c *h2client) status() (uint32, string, map[string]string) {
	c.t.Helper()
	hf := c.next(isType[*http2.HeadersFrame]).(*http2.HeadersFrame)
	fields, err := c.dec.DecodeFull(hf.HeaderBlockFragment())
	if err != nil {
		c.t.Fatal(err)
	}
	m := map[string]string{}
	for _, f := range fields {
		m[f.Name] = f.Value
	}
	return hf.StreamID, m[":status"], m
}

// goAway reads until GOAWAY, or the connection's end (nil).
func (c *h2client) goAway() *http2.GoAwayFrame {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return nil
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			return ga
		}
	}
}

func TestH2Settings(t *testing.T) {
	w := startGatewayWith(t, proxy.Options{MaxConcurrentStreams: 9})
	c := newH2Client(t, w.g)
	sf := c.next(isType[*http2.SettingsFrame]).(*http2.SettingsFrame)
	for id, want := range map[http2.SettingID]uint32{http2.SettingMaxConcurrentStreams: 9, http2.SettingEnableConnectProtocol: 1, http2.SettingInitialWindowSize: 1 << 20} {
		if v, ok := sf.Value(id); !ok || v != want {
			t.Errorf("%v = %d, %v; want %d", id, v, ok, want)
		}
	}
	// Our SETTINGS are acknowledged, a PING answered with its data.
	_ = c.fr.WritePing(false, [8]byte{1, 2, 3, 4, 5, 6, 7, 8})
	c.next(func(f http2.Frame) bool { s, ok := f.(*http2.SettingsFrame); return ok && s.IsAck() })
	p := c.next(isType[*http2.PingFrame]).(*http2.PingFrame)
	if !p.IsAck() || p.Data != [8]byte{1, 2, 3, 4, 5, 6, 7, 8} {
		t.Errorf("PING answer %v %v", p.IsAck(), p.Data)
	}
	c.get(1, "/none")
	if id, st, h := c.status(); id != 1 || st != "404" || h["content-type"] != "application/json" || h["date"] == "" {
		t.Errorf("stream %d: %s %v", id, st, h)
	}
}

// TestH2ProtocolErrors: malformed frames and header blocks get the
// stream or connection error RFC 9113 gives them (h2spec's cases).
func TestH2ProtocolErrors(t *testing.T) {
	conn := func(code http2.ErrCode) func(*h2client) error {
		return func(c *h2client) error {
			ga := c.goAway()
			if ga == nil || ga.ErrCode != code {
				return errors.New("no GOAWAY " + code.String())
			}
			return nil
		}
	}
	stream := func(id uint32, code http2.ErrCode) func(*h2client) error {
		return func(c *h2client) error {
			f := c.next(func(f http2.Frame) bool { return isType[*http2.RSTStreamFrame](f) || isType[*http2.GoAwayFrame](f) })
			if rst, ok := f.(*http2.RSTStreamFrame); !ok || rst.StreamID != id || rst.ErrCode != code {
				return errors.New("want RST_STREAM " + code.String())
			}
			// The connection goes on.
			c.get(id+2, "/x")
			if sid, st, _ := c.status(); sid != id+2 || st != "404" {
				return errors.New("connection unusable after the stream error")
			}
			return nil
		}
	}
	hdr := func(id uint32, end bool, fields ...string) func(*h2client) {
		return func(c *h2client) {
			_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.block(fields...), EndStream: end, EndHeaders: true})
		}
	}
	base := []string{":method", "GET", ":scheme", "https", ":path", "/"}
	tests := []struct {
		name string
		send func(*h2client)
		want func(*h2client) error
	}{
		{"even stream id", hdr(2, true, base...), conn(http2.ErrCodeProtocol)},
		{"no :path", hdr(1, true, ":method", "GET", ":scheme", "https"), stream(1, http2.ErrCodeProtocol)},
		{"unknown pseudo-header", hdr(1, true, append(base, ":foo", "x")...), stream(1, http2.ErrCodeProtocol)},
		{"pseudo after regular", hdr(1, true, ":method", "GET", "x-a", "1", ":scheme", "https", ":path", "/"), stream(1, http2.ErrCodeProtocol)},
		{"uppercase name", hdr(1, true, append(base, "X-Up", "1")...), stream(1, http2.ErrCodeProtocol)},
		{"connection header", hdr(1, true, append(base, "connection", "keep-alive")...), stream(1, http2.ErrCodeProtocol)},
		{"te not trailers", hdr(1, true, append(base, "te", "gzip")...), stream(1, http2.ErrCodeProtocol)},
		{"content-length with END_STREAM", hdr(1, true, append(base, "content-length", "3")...), stream(1, http2.ErrCodeProtocol)},
		{"DATA on an idle stream", func(c *h2client) { _ = c.fr.WriteData(5, true, []byte("x")) }, conn(http2.ErrCodeProtocol)},
		{"CONTINUATION without HEADERS", func(c *h2client) { _ = c.fr.WriteContinuation(1, true, c.block(base...)) }, conn(http2.ErrCodeProtocol)},
		{"interleaved header block", func(c *h2client) {
			_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.block(base...), EndStream: true})
			_ = c.fr.WritePing(false, [8]byte{})
		}, conn(http2.ErrCodeProtocol)},
		{"bad hpack", func(c *h2client) {
			_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0xff, 0xff, 0xff, 0xff}, EndStream: true, EndHeaders: true})
		}, conn(http2.ErrCodeCompression)},
		{"window overflow", func(c *h2client) { _ = c.fr.WriteWindowUpdate(0, 1<<31-1) }, conn(http2.ErrCodeFlowControl)},
		{"zero window increment", func(c *h2client) { _ = c.fr.WriteWindowUpdate(0, 0) }, conn(http2.ErrCodeProtocol)},
		{"PUSH_PROMISE from a client", func(c *h2client) {
			_ = c.fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, BlockFragment: c.block(base...), EndHeaders: true})
		}, conn(http2.ErrCodeProtocol)},
		{"frame too large", func(c *h2client) { _ = c.fr.WriteData(1, false, make([]byte, 17<<10)) }, conn(http2.ErrCodeFrameSize)},
		{"self-dependent stream", func(c *h2client) { _ = c.fr.WritePriority(1, http2.PriorityParam{StreamDep: 1}) }, stream(1, http2.ErrCodeProtocol)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := startGateway(t)
			c := newH2Client(t, w.g)
			c.next(isType[*http2.SettingsFrame])
			tt.send(c)
			if err := tt.want(c); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestH2FlowControl: a response larger than the client's window waits
// for its WINDOW_UPDATEs, and never exceeds the window.
func TestH2FlowControl(t *testing.T) {
	w := startGateway(t)
	body := strings.Repeat("0123456789", 3000)
	node := upstream(t, "u1", func(rw http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(rw, body) })
	w.load(t, map[string]string{"routes/1": `{"uri":"/big","upstream":{"type":"roundrobin","nodes":{"` + node + `":1}}}`})
	c := newH2Client(t, w.g, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1000})
	c.get(1, "/big")
	if _, st, _ := c.status(); st != "200" {
		t.Fatalf("status %s", st)
	}
	got, window := 0, 1000
	for {
		f := c.next(isType[*http2.DataFrame]).(*http2.DataFrame)
		n := len(f.Data())
		if window -= n; window < 0 {
			t.Fatalf("DATA beyond the stream window (%d over)", -window)
		}
		got += n
		if window == 0 {
			_ = c.fr.WriteWindowUpdate(1, 5000)
			window = 5000
		}
		if f.StreamEnded() {
			break
		}
	}
	if got != len(body) {
		t.Errorf("%d bytes of %d", got, len(body))
	}
}

// TestH2RequestBody: a body larger than the stream window arrives whole
// (the server gives the window back as the handler reads it).
func TestH2RequestBody(t *testing.T) {
	w := startGateway(t)
	node := upstream(t, "u1", func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(rw, strings.Repeat("", 0)+string(rune('0'+len(b)%10)))
		rw.Header().Set("X-Len", "")
		_ = b
	})
	w.load(t, map[string]string{"routes/1": `{"uri":"/up","upstream":{"type":"roundrobin","nodes":{"` + node + `":1}}}`})
	c := newH2Client(t, w.g)
	_ = c.fr.WriteWindowUpdate(0, 1<<30)
	const size = 3 << 20
	_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true,
		BlockFragment: c.block(":method", "POST", ":scheme", "https", ":authority", "test.com", ":path", "/up", "content-length", "3145728")})
	sent := make(chan error, 1)
	var updates []uint32
	frames := make(chan http2.Frame, 64)
	// The server's windows: what its SETTINGS and WINDOW_UPDATEs allow.
	credit := make(chan int, 1024)
	credit <- 65535 // the connection's initial window; the stream's is 1 MiB
	go func() {
		chunk := make([]byte, 16<<10)
		window := 0
		for n := 0; n < size; n += len(chunk) {
			for window < len(chunk) {
				window += <-credit
			}
			window -= len(chunk)
			if err := c.fr.WriteData(1, n+len(chunk) >= size, chunk); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	go func() {
		for {
			f, err := c.fr.ReadFrame()
			if err != nil {
				close(frames)
				return
			}
			if wu, ok := f.(*http2.WindowUpdateFrame); ok {
				if wu.StreamID == 1 {
					updates = append(updates, wu.Increment)
				} else {
					credit <- int(wu.Increment) // the connection's window binds first
				}
				continue
			}
			if h, ok := f.(*http2.HeadersFrame); ok {
				fields, _ := c.dec.DecodeFull(h.HeaderBlockFragment())
				for _, fl := range fields {
					if fl.Name == ":status" && fl.Value != "200" {
						t.Errorf("status %s", fl.Value)
					}
				}
			}
			if d, ok := f.(*http2.DataFrame); ok && d.StreamEnded() {
				frames <- f
				return
			}
		}
	}()
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	select {
	case f, ok := <-frames:
		if !ok {
			t.Fatal("connection ended before the answer")
		}
		if d := f.(*http2.DataFrame); string(d.Data()) != "8" { // 3145728 % 10
			t.Errorf("the node read a body of the wrong length: %q", d.Data())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
	}
	if len(updates) == 0 {
		t.Error("no stream WINDOW_UPDATE while reading a body beyond the window")
	}
}

// TestH2ConcurrencyAndRapidReset: streams over SETTINGS_MAX_CONCURRENT_STREAMS
// are refused, a reset stream holds its slot until its handler ends, and a
// client resetting stream after stream (CVE-2023-44487) is sent GOAWAY
// ENHANCE_YOUR_CALM after about twice the cap.
func TestH2ConcurrencyAndRapidReset(t *testing.T) {
	w := startGatewayWith(t, proxy.Options{MaxConcurrentStreams: 4})
	release := make(chan struct{})
	node := upstream(t, "u1", func(rw http.ResponseWriter, r *http.Request) { <-release })
	w.load(t, map[string]string{"routes/1": `{"uri":"/slow","upstream":{"type":"roundrobin","nodes":{"` + node + `":1}}}`})
	c := newH2Client(t, w.g)
	t.Cleanup(func() { close(release) }) // before the client's cleanup waits for its handlers
	for id := uint32(1); id <= 9; id += 2 {
		c.get(id, "/slow")
	}
	rst := c.next(isType[*http2.RSTStreamFrame]).(*http2.RSTStreamFrame)
	if rst.StreamID != 9 || rst.ErrCode != http2.ErrCodeRefusedStream {
		t.Fatalf("5th stream: RST_STREAM %d %v, want 9 REFUSED_STREAM", rst.StreamID, rst.ErrCode)
	}
	// Resetting the four in flight frees no slot while their handlers run.
	for id := uint32(1); id <= 7; id += 2 {
		_ = c.fr.WriteRSTStream(id, http2.ErrCodeCancel)
	}
	c.get(11, "/slow")
	rst = c.next(isType[*http2.RSTStreamFrame]).(*http2.RSTStreamFrame)
	if rst.StreamID != 11 || rst.ErrCode != http2.ErrCodeRefusedStream {
		t.Fatalf("after resets: RST_STREAM %d %v, want 11 REFUSED_STREAM", rst.StreamID, rst.ErrCode)
	}
	// Keep opening and resetting: the connection is closed.
	blk := c.block(":method", "GET", ":scheme", "https", ":authority", "test.com", ":path", "/slow")
	for id := uint32(13); id < 13+2*20; id += 2 {
		if c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk, EndStream: true, EndHeaders: true}) != nil ||
			c.fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
			break // closed by the server
		}
	}
	if ga := c.goAway(); ga == nil || ga.ErrCode != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("rapid reset: %v, want GOAWAY ENHANCE_YOUR_CALM", ga)
	}
}

// TestH2Trailers: request trailers are accepted (and dropped, as the
// HTTP/1.1 path drops them); the request is answered.
func TestH2Trailers(t *testing.T) {
	w := startGateway(t)
	node := upstream(t, "u1", nil)
	w.load(t, map[string]string{"routes/1": `{"uri":"/t","upstream":{"type":"roundrobin","nodes":{"` + node + `":1}}}`})
	c := newH2Client(t, w.g)
	_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: c.block(":method", "POST", ":scheme", "https", ":authority", "test.com", ":path", "/t")})
	_ = c.fr.WriteData(1, false, []byte("body"))
	_ = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true, BlockFragment: c.block("x-checksum", "1")})
	if _, st, _ := c.status(); st != "200" {
		t.Errorf("status %s", st)
	}
}

// TestH2ShutdownGoAway: Shutdown sends GOAWAY NO_ERROR and lets the
// stream in flight finish.
func TestH2ShutdownGoAway(t *testing.T) {
	w := startGateway(t)
	release, arrived := make(chan struct{}), make(chan struct{}, 1)
	node := upstream(t, "u1", func(rw http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		_, _ = io.WriteString(rw, "late")
	})
	w.load(t, map[string]string{"routes/1": `{"uri":"/slow","upstream":{"type":"roundrobin","nodes":{"` + node + `":1}}}`})
	c := newH2Client(t, w.g)
	c.get(1, "/slow")
	<-arrived // the stream is in flight
	shut := make(chan error, 1)
	go func() { shut <- w.g.Shutdown(t.Context()) }()
	ga := c.next(isType[*http2.GoAwayFrame]).(*http2.GoAwayFrame)
	if ga.ErrCode != http2.ErrCodeNo || ga.LastStreamID != 1 {
		t.Errorf("GOAWAY %v last %d", ga.ErrCode, ga.LastStreamID)
	}
	close(release)
	if _, st, _ := c.status(); st != "200" {
		t.Errorf("the stream in flight: %s", st)
	}
	d := c.next(isType[*http2.DataFrame]).(*http2.DataFrame)
	if string(d.Data()) != "late" {
		t.Errorf("body %q", d.Data())
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// tcpPair is both ends of a loopback TCP connection (net.Pipe has no
// buffer: a server writing its SETTINGS while the client writes its
// preface would deadlock).
func tcpPair(t testing.TB) (client, server net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return client, server
}

// TestH2Concurrent: many streams at once on one TLS connection, GETs and
// uploads of both sizes (buffered and streamed), each answered with its
// own bytes (run with -race).
func TestH2Concurrent(t *testing.T) {
	w := startTLSGateway(t, proxy.Options{})
	node := upstream(t, "u1", func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rw.Header().Set("X-Got", r.URL.Query().Get("n"))
		_, _ = rw.Write(b)
	})
	w.load(t, map[string]string{"routes/1": `{"uri":"/echo","upstream":{"type":"roundrobin","nodes":{"` + node + `":1}}}`})
	c := w.clientFor(true)
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for i := range 6 {
				n := strconv.Itoa(g*100 + i)
				body := strings.Repeat(n, 1+(g%4)*(40000)) // up to ~500 KiB: streamed upstream
				resp, err := c.Post(w.url("/echo?n="+n), "text/plain", strings.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || resp.Header.Get("X-Got") != n || string(got) != body {
					errs <- fmt.Errorf("request %s: %d %v, %d bytes of %d", n, resp.StatusCode, err, len(got), len(body))
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestH2Timeouts: over TLS, a connection without a stream is closed
// after the idle timeout (with GOAWAY), and one that stops inside a
// header block after the read timeout.
func TestH2Timeouts(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts proxy.Options // the other timeout is long: each case sees its own
		send func(fr *http2.Framer)
	}{
		{"idle", proxy.Options{IdleTimeout: 300 * time.Millisecond, ReadTimeout: time.Minute}, func(*http2.Framer) {}},
		{"inside a header block", proxy.Options{IdleTimeout: time.Minute, ReadTimeout: 300 * time.Millisecond}, func(fr *http2.Framer) {
			var hb bytes.Buffer
			_ = hpack.NewEncoder(&hb).WriteField(hpack.HeaderField{Name: ":method", Value: "GET"})
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes()}) // no END_HEADERS
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, fr := h2conn(t, startTLSGateway(t, tc.opts))
			start := time.Now()
			tc.send(fr)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			for {
				if _, err := fr.ReadFrame(); err != nil {
					if isTimeoutErr(err) {
						t.Fatal("not closed within 5 s")
					}
					break
				}
			}
			if d := time.Since(start); d < 300*time.Millisecond {
				t.Errorf("closed after %v, before the timeout", d)
			}
		})
	}
}

func isTimeoutErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
