package ipmatch

import (
	"net/netip"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1":           "127.0.0.1/32",
		"113.74.26.106/24":    "113.74.26.0/24",
		"::1":                 "::1/128",
		"2001:db8::/32":       "2001:db8::/32",
		"::ffff:10.0.0.1":     "10.0.0.1/32",
		"::ffff:10.0.0.0/104": "10.0.0.0/8",
		"0.0.0.0/0":           "0.0.0.0/0",
	} {
		p, err := Parse(in)
		if err != nil || p.String() != want {
			t.Errorf("Parse(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
	for _, in := range []string{"", "1.2.3", "1.2.3.4/33", "::1/129", "1.2.3.4/", "a.b.c.d", "fe80::1%eth0", "1.2.3.4/-1", "113.74.26.666"} {
		if _, err := Parse(in); err == nil || err.Error() != "invalid ip address: "+in {
			t.Errorf("Parse(%q): %v, want invalid ip address", in, err)
		}
	}
}

func TestMatcher(t *testing.T) {
	m, err := New([]string{"10.0.0.0/8", "10.1.0.0/16", "192.168.1.1", "192.168.1.2", "172.16.0.0/12", "::1", "2001:db8::/32"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Len() != 5 {
		t.Errorf("%d ranges, want nested and adjacent ones merged into 5", m.Len())
	}
	for a, want := range map[string]bool{
		"10.0.0.0": true, "10.255.255.255": true, "11.0.0.0": false, "9.255.255.255": false,
		"192.168.1.1": true, "192.168.1.2": true, "192.168.1.3": false, "192.168.1.0": false,
		"172.31.255.255": true, "172.32.0.0": false, "::1": true, "::2": false,
		"2001:db8:ffff::1": true, "2001:db9::": false, "::ffff:10.2.3.4": true,
	} {
		if got := m.Match(netip.MustParseAddr(a)); got != want {
			t.Errorf("Match(%s) = %v, want %v", a, got, want)
		}
	}
	all, _ := New([]string{"0.0.0.0/0", "255.255.255.255"})
	if !all.Match(netip.MustParseAddr("255.255.255.255")) || all.Len() != 1 {
		t.Errorf("0.0.0.0/0: %d ranges", all.Len())
	}
	if _, err := New([]string{"10.0.0.0/8", "nope"}); err == nil || err.Error() != "invalid ip address: nope" {
		t.Errorf("New with a bad entry: %v", err)
	}
}

// The merged ranges answer as a linear scan of the prefixes does.
func FuzzMatcher(f *testing.F) {
	f.Add("10.0.0.0/8", "10.1.0.0/16", "192.168.1.1", "10.2.3.4")
	f.Add("::/0", "1.2.3.4", "::ffff:1.2.3.0/120", "1.2.3.9")
	f.Fuzz(func(t *testing.T, a, b, c, probe string) {
		var prefixes []netip.Prefix
		var list []string
		for _, s := range []string{a, b, c} {
			if p, err := Parse(s); err == nil {
				prefixes, list = append(prefixes, p), append(list, s)
			}
		}
		addr, err := netip.ParseAddr(probe)
		if err != nil {
			return
		}
		m, err := New(list)
		if err != nil {
			t.Fatal(err)
		}
		want := false
		for _, p := range prefixes {
			if p.Contains(addr.Unmap()) {
				want = true
			}
		}
		if got := m.Match(addr); got != want {
			t.Fatalf("%v in %v: %v, linear scan %v", addr, list, got, want)
		}
	})
}

func BenchmarkMatch(b *testing.B) {
	var list []string
	for i := range 1000 {
		list = append(list, netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}).String()+"/24")
	}
	m, _ := New(list)
	a := netip.MustParseAddr("10.3.200.7")
	b.ReportAllocs()
	for b.Loop() {
		m.Match(a)
	}
}
