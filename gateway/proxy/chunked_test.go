package proxy

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

var chunkedCases = []struct {
	name, body string
	whole      bool // chunkedLen(body) == len(body)
}{
	{"one chunk", "a\r\n1234567890\r\n0\r\n\r\n", true},
	{"two chunks, extension", "5\r\nhello\r\n6;name=v\r\n world\r\n0\r\n\r\n", true},
	{"upper-case size, padding", "A\r\n1234567890\r\n00\r\n\r\n", true},
	{"trailer", "3\r\nabc\r\n0\r\nX-Sum: 1\r\nX-Other: 2\r\n\r\n", true},
	{"empty body", "0\r\n\r\n", true},
	{"no last chunk yet", "a\r\n1234567890\r\n", false},
	{"last chunk, no trailer end", "a\r\n1234567890\r\n0\r\n", false},
	{"trailer not ended", "0\r\nX-Sum: 1\r\n", false},
	{"chunk cut", "a\r\n12345", false},
	{"size line cut", "a", false},
	{"bare LF", "a\n1234567890\n0\n\n", false},
	{"no CRLF after data", "3\r\nabcd\r\n0\r\n\r\n", false},
	{"not hex", "g\r\nabc\r\n0\r\n\r\n", false},
	{"space before extension", "3 ;x\r\nabc\r\n0\r\n\r\n", false},
	{"LF in extension", "3;x\nabc\r\n0\r\n\r\n", false},
	{"nine digits", "000000003\r\nabc\r\n0\r\n\r\n", false},
	{"over the buffered limit", "10001\r\n" + strings.Repeat("x", 0x10001) + "\r\n0\r\n\r\n", false},
}

// TestChunkedLen: whole bodies are measured to their end (bytes after
// them belong to the next response); cut, bare-LF and malformed ones are
// not whole.
func TestChunkedLen(t *testing.T) {
	for _, tc := range chunkedCases {
		want := -1
		if tc.whole {
			want = len(tc.body)
		}
		if got := chunkedLen([]byte(tc.body)); got != want {
			t.Errorf("%s: %d, want %d", tc.name, got, want)
		}
		if tc.whole {
			if got := chunkedLen([]byte(tc.body + "HTTP/1.1 200 OK\r\n")); got != want {
				t.Errorf("%s, next response after it: %d, want %d", tc.name, got, want)
			}
		}
	}
}

// FuzzChunkedLen: whatever chunkedLen calls whole, fasthttp reads from
// exactly those bytes, as the buffered path does (body, then trailer),
// without asking for more: that path never waits on the upstream. It may
// refuse a body (a trailer line without a colon): the request then fails
// with 502, as a streamed one would.
func FuzzChunkedLen(f *testing.F) {
	for _, tc := range chunkedCases {
		f.Add([]byte(tc.body))
	}
	head := []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
	f.Fuzz(func(t *testing.T, b []byte) {
		n := chunkedLen(b)
		if n < 0 {
			return
		}
		if n > len(b) {
			t.Fatalf("length %d of %d bytes", n, len(b))
		}
		r := &endReader{r: bytes.NewReader(append(append([]byte{}, head...), b[:n]...))}
		br := bufio.NewReader(r)
		var resp fasthttp.Response
		resp.SkipBody = true
		if err := resp.Read(br); err != nil {
			t.Fatal(err)
		}
		resp.SkipBody = false
		err := resp.ReadBody(br, maxResponseBytes)
		if err == nil {
			err = resp.Header.ReadTrailer(br)
		}
		if r.past {
			t.Fatalf("%q: fasthttp wanted more bytes (%v)", b[:n], err)
		}
		if err == nil && br.Buffered() != 0 {
			t.Fatalf("%q: %d bytes left over", b[:n], br.Buffered())
		}
	})
}

// endReader records a read past its end.
type endReader struct {
	r    *bytes.Reader
	past bool
}

func (e *endReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if n == 0 && err != nil {
		e.past = true
	}
	return n, err
}
