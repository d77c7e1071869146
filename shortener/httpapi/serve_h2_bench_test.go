package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/linkgate/linkgate/internal/testdep"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/httpapi"
)

// BenchmarkServeRedirectH2 follows one id over HTTP/2 through the HTTPS
// listener's HTTP/2 path (Server.ServeH2: internal/h2 and the handler,
// with HSTS on, over loopback TCP without TLS), ten streams in flight on
// one connection as h2load -m10. The client allocates nothing after its
// setup, so allocs/op are the server's. Target: 0 allocs/op.
func BenchmarkServeRedirectH2(b *testing.B) {
	h, store := newHandler(b, setup{})
	if err := store.Create(context.Background(), shortener.Link{ID: "bench00000", URL: "https://aws.amazon.com/ec2/graviton/"}); err != nil {
		b.Fatal(err)
	}
	srv := httpapi.NewServer(slog.New(slog.DiscardHandler), h, httpapi.ServerConfig{HSTS: "max-age=31536000"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	sc, err := ln.Accept()
	ln.Close()
	if err != nil {
		b.Fatal(err)
	}
	go srv.ServeH2(sc)
	defer cc.Close()

	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	encode := func() []byte {
		hb.Reset()
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "127.0.0.1"}, {":path", "/bench00000"}, {"user-agent", "h2load"}} {
			_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		return append([]byte(nil), hb.Bytes()...)
	}
	first, again := encode(), encode() // the second is all indexed
	bw := bufio.NewWriterSize(cc, 64<<10)
	fr := http2.NewFramer(bw, nil)
	_, _ = io.WriteString(bw, http2.ClientPreface)
	_ = fr.WriteSettings()
	var id uint32 = 1
	var hdr, rh [9]byte
	send := func(block []byte) {
		hdr[0], hdr[1], hdr[2] = byte(len(block)>>16), byte(len(block)>>8), byte(len(block))
		hdr[3], hdr[4] = byte(http2.FrameHeaders), byte(http2.FlagHeadersEndStream|http2.FlagHeadersEndHeaders)
		binary.BigEndian.PutUint32(hdr[5:], id)
		_, _ = bw.Write(hdr[:])
		_, _ = bw.Write(block)
		id += 2
	}
	br := bufio.NewReaderSize(cc, 64<<10)
	payload := make([]byte, 1<<20)
	const hsts = "max-age=31536000"
	// run completes n requests, ten in flight; with check, the first
	// answer's header block is checked for the redirect and HSTS.
	run := func(n int, block []byte, check bool) {
		sent, done := 0, 0
		for ; sent < min(n, 10); sent++ {
			send(block)
		}
		_ = bw.Flush()
		_ = cc.SetReadDeadline(time.Now().Add(time.Minute))
		for done < n {
			if _, err := io.ReadFull(br, rh[:]); err != nil {
				b.Fatal(err)
			}
			length := int(rh[0])<<16 | int(rh[1])<<8 | int(rh[2])
			if _, err := io.ReadFull(br, payload[:length]); err != nil {
				b.Fatal(err)
			}
			switch t, flags := http2.FrameType(rh[3]), http2.Flags(rh[4]); {
			case t == http2.FrameSettings && flags&http2.FlagSettingsAck == 0:
				_ = fr.WriteSettingsAck()
			case t == http2.FrameGoAway, t == http2.FrameRSTStream:
				b.Fatalf("%v from the server", t)
			case t == http2.FrameHeaders && check:
				fields, err := hpack.NewDecoder(4096, nil).DecodeFull(payload[:length])
				if err != nil || !hasField(fields, "strict-transport-security", hsts) || !hasField(fields, ":status", "308") && !hasField(fields, ":status", "302") {
					b.Fatalf("answer's headers %v, %v: want a redirect with HSTS", fields, err)
				}
				check = false
				done++
				if sent < n {
					send(block)
					sent++
				}
			case (t == http2.FrameData || t == http2.FrameHeaders) && flags&http2.FlagDataEndStream != 0:
				if done++; sent < n {
					send(block)
					sent++
				}
			}
			if br.Buffered() == 0 {
				_ = bw.Flush()
			}
		}
	}
	run(1, first, true)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := testdep.CPUTime()
	run(b.N, again, false)
	b.ReportMetric(float64(testdep.CPUTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

func hasField(fs []hpack.HeaderField, name, value string) bool {
	for _, f := range fs {
		if f.Name == name && f.Value == value {
			return true
		}
	}
	return false
}
