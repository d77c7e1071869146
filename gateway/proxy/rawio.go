package proxy

import "net"

// rawListener hands out rawConn connections (rawio_linux.go).
type rawListener struct{ net.Listener }

func (l rawListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return rawConn(c), nil
}
