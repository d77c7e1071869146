// Package tlsfuzz drives a TLS listener with malformed and real
// ClientHellos for the fuzz targets of serve's and the gateway's HTTPS
// listeners: raw bytes where a ClientHello belongs (real ones captured
// from crypto/tls, truncated and mutated), or a real handshake with a
// fuzzed SNI and ALPN list followed by fuzzed bytes, so that the code
// after the handshake — the ALPN hand-over to HTTP/1.1 (internal/connqueue)
// or HTTP/2, or the end of an acme-tls/1 validation — is reached too.
//
// Each input checks that the server closes the connection within its
// longest timeout (handshake, read or idle) and leaves no goroutine in
// the functions that serve a connection.
package tlsfuzz

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/eventually"
)

// Target is a TLS listener under test.
type Target struct {
	Addr string
	// Bound is the server's longest timeout for a client that stalls: the
	// handshake's, or the read or idle timeout after it.
	Bound time.Duration
	// Busy names functions (as in a goroutine's stack, e.g.
	// "httpapi.(*Server).handshake") that run only while a connection is
	// served: no goroutine may be in one once the connection is closed.
	Busy []string
}

// slack is what a loaded machine may add to a server's timeout before
// the close reaches the client; it bounds the test, it measures nothing.
const slack = 10 * time.Second

// Run sends one input to t's server: hello, when not empty, as the raw
// bytes of a ClientHello; otherwise a crypto/tls handshake for sni with
// the comma-separated ALPN list alpn, then payload. Unless stall, the
// client then ends its side (close_notify and a TCP half-close), so the
// server sees the end of the input at once; with stall it waits for the
// server's timeout. The connection must be closed by the server within
// Bound, and no goroutine left in Busy.
func (tg Target) Run(t *testing.T, hello []byte, sni, alpn string, payload []byte, stall bool) {
	t.Helper()
	raw, err := net.Dial("tcp", tg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(tg.Bound + slack))
	var tc *tls.Conn
	if len(hello) > 0 {
		_, _ = raw.Write(hello) // the server may close before reading it all
	} else {
		tc = tls.Client(raw, &tls.Config{ServerName: sni, NextProtos: protos(alpn), InsecureSkipVerify: true})
		if tc.Handshake() == nil {
			_, _ = tc.Write(payload)
		} else {
			tc = nil
		}
	}
	if !stall {
		if tc != nil {
			_ = tc.CloseWrite()
		}
		_ = raw.(*net.TCPConn).CloseWrite()
	}
	var r io.Reader = raw
	if tc != nil {
		r = tc
	}
	if _, err := io.Copy(io.Discard, r); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server did not close the connection within %v (its timeout %v)", tg.Bound+slack, tg.Bound)
	}
	raw.Close()
	var left string
	if !eventually.Within(slack, func() bool { left = busy(tg.Busy); return left == "" }) {
		t.Fatalf("a goroutine is left serving the closed connection after %v:\n%s", slack, left)
	}
}

// protos is a comma-separated ALPN list as crypto/tls takes it: names of
// 1 to 255 bytes.
func protos(alpn string) []string {
	var p []string
	for _, s := range strings.Split(alpn, ",") {
		if len(s) > 0 && len(s) < 256 {
			p = append(p, s)
		}
	}
	return p
}

// busy returns the stack of a goroutine that is in one of funcs, "" if none.
func busy(funcs []string) string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		for _, f := range funcs {
			if bytes.Contains(g, []byte(f+"(")) {
				return string(g)
			}
		}
	}
	return ""
}

// Seed adds the corpus of a listener serving sni (a name it has a
// certificate for) to f, whose fuzz function takes (hello []byte, sni,
// alpn string, payload []byte, stall bool) and calls Target.Run.
func Seed(f *testing.F, sni string) {
	f.Helper()
	for _, h := range Hellos(f, sni) {
		f.Add(h, "", "", []byte(nil), false)
		// Truncated: the record header only, half, one byte short.
		for _, n := range []int{1, 5, 9, len(h) / 2, len(h) - 1} {
			f.Add(h[:n], "", "", []byte(nil), false)
		}
		// Mutated: a record length beyond the record limit, a handshake
		// length beyond the record, an SSL 3.0 record, an alert record.
		for _, m := range []func(b []byte){
			func(b []byte) { b[3], b[4] = 0xff, 0xff },
			func(b []byte) { b[6], b[7], b[8] = 0xff, 0xff, 0xff },
			func(b []byte) { b[1], b[2] = 3, 0 },
			func(b []byte) { b[0] = 21 },
			func(b []byte) { b[43] ^= 0xff }, // the session id's length
		} {
			b := append([]byte(nil), h...)
			m(b)
			f.Add(b, "", "", []byte(nil), false)
		}
	}
	hs := Hellos(f, sni)
	f.Add(hs[0][:len(hs[0])/2], "", "", []byte(nil), true) // a stalled, partial ClientHello
	f.Add(hs[0], "", "", []byte(nil), true)                // a whole one, then silence
	f.Add([]byte("GET / HTTP/1.1\r\nHost: "+sni+"\r\n\r\n"), "", "", []byte(nil), false)
	f.Add([]byte{0x80, 0x2e, 0x01, 0x00, 0x02, 0x00, 0x15, 0x00, 0x00, 0x00, 0x10}, "", "", []byte(nil), false) // SSLv2 header
	// Real handshakes, then the protocol's bytes or garbage.
	req := []byte("GET /x HTTP/1.1\r\nHost: " + sni + "\r\n\r\n")
	preface := []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
	for _, s := range []struct {
		sni, alpn string
		payload   []byte
		stall     bool
	}{
		{sni, "http/1.1", req, false},
		{sni, "", req, false},
		{sni, "h2,http/1.1", preface, false},
		{sni, "h2", append(preface, 0xff, 0xff, 0xff, 0x01), false},
		{sni, "acme-tls/1", nil, false},
		{sni, "spdy/3", []byte("\x00\x01garbage"), false},
		{sni, "http/1.1", req[:10], true}, // a partial request, then silence
		{sni, "h2", preface[:5], true},
		{"", "http/1.1", req, false},
		{"unknown.invalid", "h2", preface, false},
		{"UPPER." + sni + ".", "http/1.1", req, false},
	} {
		f.Add([]byte(nil), s.sni, s.alpn, s.payload, s.stall)
	}
}

// Hellos returns real ClientHellos of crypto/tls clients (one TLS record
// each) for sni: TLS 1.3 and 1.2, with and without ALPN and SNI, other
// key shares.
func Hellos(tb testing.TB, sni string) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, c := range []*tls.Config{
		{ServerName: sni, NextProtos: []string{"h2", "http/1.1"}},
		{ServerName: sni, MaxVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}},
		{ServerName: sni, NextProtos: []string{"acme-tls/1"}},
		{ServerName: sni, CurvePreferences: []tls.CurveID{tls.CurveP256}},
		{InsecureSkipVerify: true},
	} {
		out = append(out, capture(tb, c))
	}
	return out
}

// capture runs a client handshake against a pipe and returns the first
// record it writes.
func capture(tb testing.TB, cfg *tls.Config) []byte {
	client, server := net.Pipe()
	done := make(chan []byte, 1)
	go func() {
		defer server.Close()
		hdr := make([]byte, 5)
		if _, err := io.ReadFull(server, hdr); err != nil {
			done <- nil
			return
		}
		body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
		if _, err := io.ReadFull(server, body); err != nil {
			done <- nil
			return
		}
		done <- append(hdr, body...)
	}()
	_ = tls.Client(client, cfg).Handshake() // fails once the pipe closes
	client.Close()
	h := <-done
	if len(h) < 44 {
		tb.Fatalf("no ClientHello captured from %+v", cfg)
	}
	return h
}
