package gateway

import "strings"

// ACMEHosts returns the names the routes of c ask certificates for
// (ACMELabel), lower case: the exact host names of enabled routes that
// serve (a route failing with a missing reference asks for nothing).
// Wildcard hosts are left out: an ACME CA issues them only by DNS-01,
// which the gateway does not solve.
func (c *Compiled) ACMEHosts() map[string]bool {
	hosts := map[string]bool{}
	for _, r := range c.Routes {
		if !r.ACME || r.Fail != 0 {
			continue
		}
		for _, h := range r.Hosts {
			if h != "" && !strings.Contains(h, "*") {
				hosts[strings.ToLower(strings.TrimSuffix(h, "."))] = true
			}
		}
	}
	return hosts
}
