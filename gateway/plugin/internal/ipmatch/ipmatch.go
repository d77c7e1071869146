// Package ipmatch matches client addresses against lists of IPs and CIDRs
// (ip-restriction's lists, real-ip's trusted addresses): APISIX's ip_def
// schema, its validation, and a matcher that merges the list into sorted,
// disjoint ranges once, so a lookup is a binary search and allocates
// nothing however long the list is.
package ipmatch

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/linkgate/linkgate/gateway"
)

const (
	ipv4 = `([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])\.([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])\.([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])\.([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])`
	ipv6 = `([a-fA-F0-9]{0,4}:){1,8}(:[a-fA-F0-9]{0,4}){0,8}([a-fA-F0-9]{0,4})?`
)

// Patterns of APISIX's schema_def ip_def: IPv4, IPv4/CIDR, IPv6,
// IPv6/CIDR (the ipv4 and ipv6 formats as patterns). Validate is strict.
var Patterns = []*regexp.Regexp{
	regexp.MustCompile(`^` + ipv4 + `$`),
	regexp.MustCompile(`^` + ipv4 + `/([12]?[0-9]|3[0-2])$`),
	regexp.MustCompile(`^` + ipv6 + `$`),
	regexp.MustCompile(`^` + ipv6 + `/[0-9]{1,3}$`),
}

// Parse reads an IP ("1.2.3.4", "::1") or a CIDR ("10.0.0.0/8") as a
// prefix; an IP is a /32 or /128. IPv4-mapped IPv6 addresses are IPv4.
func Parse(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("invalid ip address: %s", s)
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("invalid ip address: %s", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Matcher reports whether an address is in a list.
type Matcher struct {
	v4, v6 []span // sorted, disjoint, not adjacent
}

type span struct{ lo, hi netip.Addr }

// New builds a matcher for list, rejecting what Parse rejects.
func New(list []string) (*Matcher, error) {
	m := &Matcher{}
	for _, s := range list {
		p, err := Parse(s)
		if err != nil {
			return nil, err
		}
		sp := span{p.Addr(), last(p)}
		if p.Addr().Is4() {
			m.v4 = append(m.v4, sp)
		} else {
			m.v6 = append(m.v6, sp)
		}
	}
	m.v4, m.v6 = merge(m.v4), merge(m.v6)
	return m, nil
}

// last is the highest address of p.
func last(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func merge(s []span) []span {
	slices.SortFunc(s, func(a, b span) int { return a.lo.Compare(b.lo) })
	out := s[:0]
	for _, sp := range s {
		if n := len(out); n > 0 {
			prev := &out[n-1]
			// Overlapping or adjacent (prev ends at the family's last address: everything after overlaps).
			if next := prev.hi.Next(); !next.IsValid() || sp.lo.Compare(next) <= 0 {
				if sp.hi.Compare(prev.hi) > 0 {
					prev.hi = sp.hi
				}
				continue
			}
		}
		out = append(out, sp)
	}
	return out
}

// Match reports whether a is in the list; an IPv4-mapped IPv6 address is
// matched as IPv4.
func (m *Matcher) Match(a netip.Addr) bool {
	a = a.Unmap()
	s := m.v6
	if a.Is4() {
		s = m.v4
	}
	i, found := slices.BinarySearchFunc(s, a, func(sp span, a netip.Addr) int { return sp.lo.Compare(a) })
	if found {
		return true
	}
	return i > 0 && a.Compare(s[i-1].hi) <= 0
}

// Len is the number of disjoint ranges (for tests).
func (m *Matcher) Len() int { return len(m.v4) + len(m.v6) }

// Def is APISIX's ip_def as a schema: a string that is an IPv4, IPv4/CIDR,
// IPv6 or IPv6/CIDR; New then checks it strictly.
var Def = func() *gateway.Schema {
	s := &gateway.Schema{}
	for _, p := range Patterns {
		s.AnyOf = append(s.AnyOf, &gateway.Schema{Type: "string", Pattern: p})
	}
	return s
}()
