//go:build !linux

package linger

import "net"

// unsent returns 0: only Linux tells (SIOCOUTQ).
func unsent(net.Conn) int { return 0 }
