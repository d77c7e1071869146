//go:build !linux

package proxy

import "net"

// rawConn is c: raw reads and writes are Linux's (rawio_linux.go).
func rawConn(c net.Conn) net.Conn { return c }
