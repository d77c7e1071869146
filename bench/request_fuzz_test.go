package bench

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzRequestFraming: the bytes a Lua script's request() returns are
// checked by requestInfo (HTTP/1.1) and turned into an HTTP/2 request by
// parseH2Request. Neither panics on any input; what requestInfo accepts
// parseH2Request accepts too (a script valid for one protocol is for the
// other), and the HTTP/2 form keeps the method, the path and the body.
func FuzzRequestFraming(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: h\r\n\r\n",
		"POST /shortenURL HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello",
		"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n",
		"HEAD / HTTP/1.0\r\nConnection: close\r\n\r\n",
		"POST / HTTP/1.1\r\nContent-Length: 99\r\n\r\nshort",
		"GET /\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, _, err := requestInfo(b)
		r, h2err := parseH2Request(b)
		if err != nil {
			return
		}
		if n < 1 {
			t.Fatalf("%q: accepted with %d requests", b, n)
		}
		if h2err != nil {
			t.Fatalf("%q: valid HTTP/1.1 (%d requests) but not for HTTP/2: %v", b, n, h2err)
		}
		line, _, _ := bytes.Cut(b, []byte("\r\n"))
		if f := strings.Fields(string(line)); r.method != f[0] || r.path != f[1] {
			t.Fatalf("%q: HTTP/2 request %s %s", b, r.method, r.path)
		}
	})
}
