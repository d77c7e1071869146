package h2_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/linkgate/linkgate/internal/h2"
)

// The protocol's cases run against the gateway too (gateway/proxy's
// h2_test.go, h2spec_test.go); these are the server's own, with handlers
// that show what the gateway's cannot (a handler still running).

// serve runs s on one end of a loopback TCP connection and returns a raw
// client on the other, its preface and SETTINGS sent.
func serve(t *testing.T, s *h2.Server) (*http2.Framer, *hpack.Encoder, *bytes.Buffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); s.ServeConn(sc, nil, sc) }()
	t.Cleanup(func() {
		cc.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the connection's goroutine did not end")
		}
	})
	_ = cc.SetDeadline(time.Now().Add(20 * time.Second))
	fr := http2.NewFramer(cc, bufio.NewReader(cc))
	fr.AllowIllegalWrites = true
	if _, err := io.WriteString(cc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var hbuf bytes.Buffer
	return fr, hpack.NewEncoder(&hbuf), &hbuf
}

func block(enc *hpack.Encoder, buf *bytes.Buffer, fields ...string) []byte {
	buf.Reset()
	for i := 0; i+1 < len(fields); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return append([]byte(nil), buf.Bytes()...)
}

// TestClosedAfterReset: a frame on a stream the client reset answers
// STREAM_CLOSED even while the stream's handler still runs (RFC 9113
// §5.1). The handler here is held until the answer came; h2spec's "5.1
// closed" cases timed out on a busy host, where the gateway's handler had
// not returned yet when the DATA or HEADERS came (issue 32 §7). Fails
// without the peerReset checks in onData and onHeaders.
func TestClosedAfterReset(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(fr *http2.Framer, hb []byte) error
		want func(f http2.Frame) bool
	}{
		{"DATA", func(fr *http2.Framer, _ []byte) error { return fr.WriteData(1, true, []byte("x")) },
			func(f http2.Frame) bool {
				rs, ok := f.(*http2.RSTStreamFrame)
				return ok && rs.StreamID == 1 && rs.ErrCode == http2.ErrCodeStreamClosed
			}},
		{"HEADERS", func(fr *http2.Framer, hb []byte) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb, EndStream: true, EndHeaders: true})
		}, func(f http2.Frame) bool {
			ga, ok := f.(*http2.GoAwayFrame)
			return ok && ga.ErrCode == http2.ErrCodeStreamClosed
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			started, release := make(chan struct{}), make(chan struct{})
			s := h2.NewServer(h2.HandlerFunc(func(st *h2.Stream) {
				close(started)
				<-release
			}), h2.Options{})
			defer func() { _ = s.Shutdown(context.Background()) }()
			defer close(release)
			fr, enc, buf := serve(t, s)
			hb := block(enc, buf, ":method", "POST", ":scheme", "https", ":authority", "a.test", ":path", "/")
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb, EndHeaders: true}); err != nil {
				t.Fatal(err)
			}
			if err := fr.WriteData(1, false, []byte("x")); err != nil { // the body's first bytes start the handler
				t.Fatal(err)
			}
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("the handler did not start")
			}
			if err := fr.WriteRSTStream(1, http2.ErrCodeCancel); err != nil {
				t.Fatal(err)
			}
			if err := tc.send(fr, block(enc, buf, "x-trailer", "1")); err != nil {
				t.Fatal(err)
			}
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					t.Fatalf("no STREAM_CLOSED before %v", err)
				}
				if tc.want(f) {
					return
				}
				if _, ok := f.(*http2.GoAwayFrame); ok {
					t.Fatalf("got %v", f)
				}
			}
		})
	}
}

// TestFastHTTP: a fasthttp.RequestHandler answers over h2 as over
// HTTP/1.1, with the server's headers; :protocol without
// ExtendedConnect is a malformed request.
func TestFastHTTP(t *testing.T) {
	s := h2.NewServer(h2.FastHTTP(func(fc *fasthttp.RequestCtx) {
		fc.Redirect("https://example.com/"+string(fc.Path()[1:]), fasthttp.StatusFound)
	}), h2.Options{ServerHeader: "linkgate"})
	defer func() { _ = s.Shutdown(context.Background()) }()
	fr, enc, buf := serve(t, s)
	get := block(enc, buf, ":method", "GET", ":scheme", "https", ":authority", "a.test", ":path", "/abc")
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: get, EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	ws := block(enc, buf, ":method", "CONNECT", ":protocol", "websocket", ":scheme", "https", ":authority", "a.test", ":path", "/")
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: ws, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	dec := hpack.NewDecoder(4096, nil)
	var got map[string]string
	var reset bool
	for got == nil || !reset {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if v, ok := f.Value(http2.SettingEnableConnectProtocol); ok && v != 0 {
				t.Error("SETTINGS_ENABLE_CONNECT_PROTOCOL announced without ExtendedConnect")
			}
		case *http2.HeadersFrame:
			fields, err := dec.DecodeFull(f.HeaderBlockFragment())
			if err != nil {
				t.Fatal(err)
			}
			got = map[string]string{}
			for _, hf := range fields {
				got[hf.Name] = hf.Value
			}
		case *http2.RSTStreamFrame:
			if f.StreamID != 3 || f.ErrCode != http2.ErrCodeProtocol {
				t.Fatalf("RST_STREAM %d %v, want stream 3 PROTOCOL_ERROR", f.StreamID, f.ErrCode)
			}
			reset = true
		}
	}
	if got[":status"] != "302" || got["location"] != "https://example.com/abc" || got["server"] != "linkgate" {
		t.Errorf("response fields %v", got)
	}
}

// TestBodyBeforeHandler: a request with a body reaches the handler only
// once its body has come (whole up to 16 KiB of declared length, else its
// first bytes), so a malformed body or a stream's window overflow gets
// its stream error, not the handler's answer (h2spec 8.1.2.6 and 6.9.1,
// which a busy machine answered with the gateway's 404 first). The
// handler must not have started when the server acknowledges a PING sent
// after the HEADERS. Without awaitBody the worker usually wins that race:
// the test fails in most runs, not every run.
func TestBodyBeforeHandler(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cl      string // content-length, "" for none
		then    func(fr *http2.Framer) error
		errCode http2.ErrCode
	}{
		{"content-length 1, 4 bytes", "1", func(fr *http2.Framer) error { return fr.WriteData(1, true, []byte("test")) }, http2.ErrCodeProtocol},
		{"content-length 5, 4 bytes", "5", func(fr *http2.Framer) error { return fr.WriteData(1, true, []byte("test")) }, http2.ErrCodeProtocol},
		{"window past 2^31-1", "", func(fr *http2.Framer) error {
			_ = fr.WriteWindowUpdate(1, 1<<31-1)
			return fr.WriteWindowUpdate(1, 1<<31-1)
		}, http2.ErrCodeFlowControl},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := make(chan struct{}, 1)
			s := h2.NewServer(h2.FastHTTP(func(fc *fasthttp.RequestCtx) {
				ran <- struct{}{}
				fc.SetStatusCode(fasthttp.StatusNotFound)
			}), h2.Options{})
			defer func() { _ = s.Shutdown(context.Background()) }()
			fr, enc, buf := serve(t, s)
			fields := []string{":method", "POST", ":scheme", "https", ":authority", "a.test", ":path", "/"}
			if tc.cl != "" {
				fields = append(fields, "content-length", tc.cl)
			}
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(enc, buf, fields...), EndHeaders: true}); err != nil {
				t.Fatal(err)
			}
			if err := fr.WritePing(false, [8]byte{1}); err != nil {
				t.Fatal(err)
			}
			for acked := false; !acked; {
				f, err := fr.ReadFrame()
				if err != nil {
					t.Fatal(err)
				}
				switch f := f.(type) {
				case *http2.PingFrame:
					acked = f.IsAck()
				case *http2.HeadersFrame, *http2.RSTStreamFrame:
					t.Fatalf("%v before the body came", f)
				}
			}
			select {
			case <-ran:
				t.Fatal("the handler ran before the body came")
			default:
			}
			if err := tc.then(fr); err != nil {
				t.Fatal(err)
			}
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					t.Fatal(err)
				}
				switch f := f.(type) {
				case *http2.HeadersFrame:
					t.Fatalf("answered %v, want RST_STREAM %v", f, tc.errCode)
				case *http2.RSTStreamFrame:
					if f.ErrCode != tc.errCode {
						t.Fatalf("RST_STREAM %v, want %v", f.ErrCode, tc.errCode)
					}
					return
				}
			}
		})
	}
}

// TestSettingsAckFirst: the ACK of a SETTINGS frame that opens the
// streams' windows goes out before the DATA it lets out (h2spec 6.9.2
// waits for the ACK, skipping other frames, then for the DATA). Without
// the ACK queued under the same lock as the windows' change, the waiting
// writer sometimes wins.
func TestSettingsAckFirst(t *testing.T) {
	s := h2.NewServer(h2.FastHTTP(func(fc *fasthttp.RequestCtx) {
		fc.SetBodyString("hello")
	}), h2.Options{})
	defer func() { _ = s.Shutdown(context.Background()) }()
	fr, enc, buf := serve(t, s)
	readUntil := func(want func(http2.Frame) bool) {
		t.Helper()
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			if want(f) {
				return
			}
			if _, ok := f.(*http2.DataFrame); ok {
				t.Fatalf("%v before the SETTINGS ACK", f)
			}
		}
	}
	isAck := func(f http2.Frame) bool { sf, ok := f.(*http2.SettingsFrame); return ok && sf.IsAck() }
	readUntil(isAck) // of the preface's SETTINGS
	for i := range 20 {
		id := uint32(2*i + 1)
		if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
			t.Fatal(err)
		}
		readUntil(isAck)
		hb := block(enc, buf, ":method", "GET", ":scheme", "https", ":authority", "a.test", ":path", "/")
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb, EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 5}); err != nil {
			t.Fatal(err)
		}
		readUntil(isAck)
		readUntil(func(f http2.Frame) bool { d, ok := f.(*http2.DataFrame); return ok && d.StreamID == id })
	}
}
