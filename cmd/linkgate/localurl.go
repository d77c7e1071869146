package main

import (
	"net"
	"strconv"
)

// localURL is the address of a listener as a client on this machine
// reaches it: http://127.0.0.1:PORT for one on every interface.
func localURL(a net.Addr) string {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return ""
	}
	ip := t.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
		if t.IP != nil && t.IP.To4() == nil {
			ip = net.IPv6loopback
		}
	}
	return "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(t.Port))
}
