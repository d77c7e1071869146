package proxy_test

import (
	"bytes"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/linkgate/linkgate/internal/eventually"
)

// h2Seeds are frame sequences a client sends after its preface: a GET, a
// POST with a body and trailers, a header block split in CONTINUATIONs,
// PING, WINDOW_UPDATE, RST_STREAM, PRIORITY, GOAWAY, SETTINGS.
func h2Seeds() [][]byte {
	var out [][]byte
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	block := func(fields ...string) []byte {
		hb.Reset()
		for i := 0; i+1 < len(fields); i += 2 {
			_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
		}
		return append([]byte(nil), hb.Bytes()...)
	}
	get := []string{":method", "GET", ":scheme", "https", ":authority", "test.com", ":path", "/x"}
	for _, seq := range []func(fr *http2.Framer){
		func(fr *http2.Framer) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(get...), EndStream: true, EndHeaders: true})
		},
		func(fr *http2.Framer) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(":method", "POST", ":scheme", "https", ":authority", "a", ":path", "/p", "content-length", "4"), EndHeaders: true})
			_ = fr.WriteData(1, false, []byte("body"))
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block("x-t", "1"), EndStream: true, EndHeaders: true})
		},
		func(fr *http2.Framer) {
			b := block(append(get, "x-long", string(bytes.Repeat([]byte("v"), 300)))...)
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: b[:10], EndStream: true})
			_ = fr.WriteContinuation(3, false, b[10:100])
			_ = fr.WriteContinuation(3, true, b[100:])
		},
		func(fr *http2.Framer) {
			_ = fr.WritePing(false, [8]byte{1})
			_ = fr.WriteWindowUpdate(0, 1000)
			_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10}, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 20000})
			_ = fr.WriteSettingsAck()
		},
		func(fr *http2.Framer) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(get...), EndStream: true, EndHeaders: true, Priority: http2.PriorityParam{StreamDep: 0, Weight: 3}})
			_ = fr.WriteRSTStream(1, http2.ErrCodeCancel)
			_ = fr.WritePriority(3, http2.PriorityParam{StreamDep: 1})
			_ = fr.WriteGoAway(0, http2.ErrCodeNo, nil)
		},
		func(fr *http2.Framer) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(":method", "CONNECT", ":protocol", "websocket", ":scheme", "https", ":authority", "a", ":path", "/ws"), EndHeaders: true})
			_ = fr.WriteData(1, false, []byte{0x81, 0x80, 0, 0, 0, 0})
			_ = fr.WriteRSTStream(1, http2.ErrCodeCancel)
		},
	} {
		var buf bytes.Buffer
		fr := http2.NewFramer(&buf, nil)
		_ = fr.WriteSettings()
		seq(fr)
		out = append(out, buf.Bytes())
	}
	return out
}

// h2Exchange feeds data after the client preface to a connection served
// by ServeH2, reads whatever the server writes, and closes; false when the
// server's goroutine did not end.
func h2Exchange(t testing.TB, w *gw, data []byte) bool {
	cc, sc := net.Pipe()
	done := make(chan struct{})
	go func() { defer close(done); w.g.ServeH2(sc) }()
	go func() { _, _ = io.Copy(io.Discard, cc) }()
	_ = cc.SetWriteDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(cc, http2.ClientPreface); err == nil {
		_, _ = cc.Write(data)
	}
	cc.Close()
	select {
	case <-done:
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

// FuzzH2Frames: whatever bytes follow the preface, the server neither
// panics nor leaves its connection's goroutine running.
func FuzzH2Frames(f *testing.F) {
	for _, s := range h2Seeds() {
		f.Add(s)
	}
	w := startGateway(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if !h2Exchange(t, w, data) {
			t.Fatal("the connection's goroutine did not end")
		}
	})
}

// TestH2NoGoroutineLeak: after connections that end in every way the
// seeds make them end, and Shutdown, no goroutine of the server is left.
func TestH2NoGoroutineLeak(t *testing.T) {
	w := startGateway(t)
	base := runtime.NumGoroutine() // with the HTTP/1.1 server's
	for range 20 {
		for _, s := range h2Seeds() {
			if !h2Exchange(t, w, s) {
				t.Fatal("the connection's goroutine did not end")
			}
		}
	}
	if err := w.g.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !eventually.Within(5*time.Second, func() bool { return runtime.NumGoroutine() <= base }) {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
	}
}
