//go:build !linux

package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"net/netip"
)

// runEngine needs epoll and timerfd; linkgate ships for Linux only.
func runEngine(context.Context, *Config, netip.AddrPort, *tls.Config, []Requester) (*Result, error) {
	return nil, errors.New("linkgate bench runs on Linux only")
}

// monitor is used by the Linux engine only.
var _ = monitor
