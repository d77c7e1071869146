package proxy_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/linkgate/linkgate/internal/testdep"
)

// BenchmarkH2 drives HTTP/2 requests through the gateway's HTTP/2 server
// (Gateway.ServeH2, over loopback TCP without TLS) to a fasthttp upstream
// answering "1234567890", ten streams in flight on one connection as
// h2load -m10. The client is allocation-free after its setup, so
// allocs/op are the server's (and the upstream's, which has none).
// cpu-µs/op is the process's CPU time per request.
func BenchmarkH2(b *testing.B) {
	w := startGateway(b)
	w.load(b, map[string]string{"routes/1": `{"uri":"/hello","upstream":{"type":"roundrobin","nodes":{"` + benchUpstream(b) + `":1}}}`})
	cc, sc := tcpPair(b)
	go w.g.ServeH2(sc)
	defer cc.Close()

	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	encode := func() []byte {
		hb.Reset()
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "test.com"}, {":path", "/hello"}, {"user-agent", "h2load"}} {
			_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		return append([]byte(nil), hb.Bytes()...)
	}
	first, again := encode(), encode() // the second is all indexed
	bw := bufio.NewWriterSize(cc, 64<<10)
	fr := http2.NewFramer(bw, nil)
	_, _ = io.WriteString(bw, http2.ClientPreface)
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	_ = fr.WriteWindowUpdate(0, 1<<31-1-65535)
	var id uint32 = 1
	var h, rh [9]byte
	send := func(block []byte) {
		h[0], h[1], h[2] = byte(len(block)>>16), byte(len(block)>>8), byte(len(block))
		h[3], h[4] = byte(http2.FrameHeaders), byte(http2.FlagHeadersEndStream|http2.FlagHeadersEndHeaders)
		binary.BigEndian.PutUint32(h[5:], id)
		_, _ = bw.Write(h[:])
		_, _ = bw.Write(block)
		id += 2
	}
	br := bufio.NewReaderSize(cc, 64<<10)
	payload := make([]byte, 1<<20)
	// run completes n requests, ten in flight.
	run := func(n int, block []byte) {
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
	run(1, first)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := testdep.CPUTime()
	run(b.N, again)
	b.ReportMetric(float64(testdep.CPUTime()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}
