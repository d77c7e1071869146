package proxy

import "net"

// ServeH2 serves an h2 connection without TLS (the client preface not
// yet read), for tests and benchmarks of the HTTP/2 server alone.
func (g *Gateway) ServeH2(c net.Conn) { g.h2.ServeConn(c, nil, c) }
