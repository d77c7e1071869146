// Package realip is APISIX's real-ip plugin: it replaces the client
// address (and port) with one taken from a header, a query argument or any
// variable — for a gateway behind a load balancer — as nginx's realip
// module does for APISIX. Everything after it (limits, ip-restriction,
// X-Real-IP and X-Forwarded-For upstream, logs) sees the real address.
package realip

import (
	"encoding/json"
	"net/netip"
	"strconv"
	"strings"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/internal/ipmatch"
)

// Name and Priority as APISIX.
const (
	Name     = "real-ip"
	Priority = 23000
)

// Factory makes real-ip instances.
type Factory struct{}

var (
	_ gateway.Factory     = (*Factory)(nil)
	_ gateway.ConfChecker = (*Factory)(nil)
)

// New returns the plugin factory.
func New() *Factory { return &Factory{} }

func (*Factory) Name() string  { return Name }
func (*Factory) Priority() int { return Priority }

var schema = &gateway.Schema{Type: "object", Required: []string{"source"}, Properties: map[string]*gateway.Schema{
	"trusted_addresses": {Type: "array", Items: ipmatch.Def, MinItems: 1},
	"source":            {Type: "string", MinLength: 1},
	"recursive":         {Type: "boolean", Default: false},
}}

// Schema is APISIX 2.14's.
func (*Factory) Schema() *gateway.Schema { return schema }

// CheckConf validates the trusted addresses strictly.
func (*Factory) CheckConf(c map[string]any) error {
	list, _ := c["trusted_addresses"].([]any)
	for _, v := range list {
		if _, err := ipmatch.Parse(v.(string)); err != nil {
			return err
		}
	}
	return nil
}

type instance struct {
	source    string
	xff       bool // source is X-Forwarded-For: its last address
	recursive bool
	trusted   *ipmatch.Matcher
}

// New builds an instance.
func (*Factory) New(raw json.RawMessage, _ gateway.Scope) (any, error) {
	var c struct {
		Trusted   []string `json:"trusted_addresses"`
		Source    string   `json:"source"`
		Recursive bool     `json:"recursive"`
	}
	if err := gateway.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	in := &instance{source: c.Source, xff: c.Source == "http_x_forwarded_for", recursive: c.Recursive}
	if c.Trusted != nil {
		m, err := ipmatch.New(c.Trusted)
		if err != nil {
			return nil, err
		}
		in.trusted = m
	}
	return in, nil
}

// Rewrite sets the client address from the source, when the peer is trusted.
func (in *instance) Rewrite(c gateway.Ctx) gateway.Reply {
	if in.trusted != nil && !in.trusted.Match(c.RemoteAddr()) {
		return gateway.Reply{}
	}
	addr := c.Var(in.source)
	if addr == "" {
		return gateway.Reply{}
	}
	if in.xff {
		addr = in.fromXFF(addr)
	}
	if ip, port, ok := ParseAddr(addr); ok {
		c.SetRemoteAddr(ip, port)
	}
	return gateway.Reply{}
}

// fromXFF picks the address from an X-Forwarded-For list: the last one or,
// recursive with trusted addresses, the last one not trusted (the first
// if all are).
func (in *instance) fromXFF(list string) string {
	i := strings.LastIndexByte(list, ',')
	if i < 0 {
		return list
	}
	if !in.recursive || in.trusted == nil {
		return strings.TrimLeft(list[i+1:], " ")
	}
	for rest := list; ; {
		i := strings.LastIndexByte(rest, ',')
		if i < 0 {
			return rest
		}
		a := strings.TrimLeft(rest[i+1:], " \t")
		if ip, err := netip.ParseAddr(a); err != nil || !in.trusted.Match(ip) {
			return a
		}
		rest = rest[:i]
	}
}

// ParseAddr reads "ip", "ip:port", "[ipv6]" or "[ipv6]:port" as APISIX's
// real-ip does (core.utils.parse_addr, then the address must be an IP and
// the port, if a number, within 1-65535). Port 0 means none was given.
func ParseAddr(s string) (netip.Addr, int, bool) {
	host, portStr := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		if !strings.HasSuffix(s, "]") {
			i := strings.LastIndexByte(s[:len(s)-1], ':')
			if i < 1 || s[i-1] != ']' {
				return netip.Addr{}, 0, false
			}
			host, portStr = s[:i], s[i+1:]
		}
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	case ipv6WithoutPort(s):
	default:
		if i := strings.LastIndexByte(s[:max(len(s)-1, 0)], ':'); i >= 0 {
			host, portStr = s[:i], s[i+1:]
		}
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, 0, false
	}
	port := 0
	if portStr != "" {
		// Lua's tonumber: not a number means no port; a number must be a valid port.
		if n, err := strconv.Atoi(portStr); err == nil {
			if n < 1 || n > 65535 {
				return netip.Addr{}, 0, false
			}
			port = n
		}
	}
	return ip, port, true
}

// ipv6WithoutPort is parse_addr's test: a second ':' before any '.'.
func ipv6WithoutPort(s string) bool {
	colons := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '.':
			return false
		case ':':
			if colons++; colons == 2 {
				return true
			}
		}
	}
	return false
}
