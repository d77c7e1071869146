// Package xconnect turns on HTTP/2 extended CONNECT (RFC 8441, WebSocket
// over HTTP/2) in Go's HTTP/2 server for the binary that imports it, as if
// it were started with GODEBUG=http2xconnect=1.
//
// Go reads that setting only from the environment, once, in net/http's and
// x/net/http2's package init (Go issue 71128), and it is not a registered
// setting, so a //go:debug directive is refused ("unknown //go:debug
// setting"). This package's init adds it to GODEBUG before them: Go
// initialises packages in import-path order among those whose imports are
// done, and this one needs only os and strings and sorts before "net/http"
// and "golang.org/x/net/http2". An http2xconnect already in GODEBUG (=0
// to turn it off) is left as it is.
package xconnect

import (
	"os"
	"strings"
)

// Setting is what this package adds to GODEBUG.
const Setting = "http2xconnect=1"

func init() {
	v := os.Getenv("GODEBUG")
	if strings.Contains(v, "http2xconnect=") {
		return
	}
	if v != "" {
		v += ","
	}
	_ = os.Setenv("GODEBUG", v+Setting)
}
