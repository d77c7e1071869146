// Package router matches requests to gateway routes the way APISIX's
// radixtree_uri router does: exact paths first, then "prefix*" paths from
// the longest matching prefix to the shortest; among the routes of one
// path, higher priority first; each candidate filtered by method, remote
// address, host and vars. A Router is built once per configuration and is
// immutable: matching is safe for concurrent use and allocates nothing.
package router

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"

	"github.com/linkgate/linkgate/gateway"
)

// Router is an immutable index of routes.
type Router struct {
	exact map[string][]*cand
	root  *node
}

type cand struct {
	e        *gateway.RouteEntry
	path     string // as configured, for ordering and MatchedURI
	methods  uint16 // 0: any
	hosts    []string
	suffixes []string // from "*.example.com": ".example.com"
	addrs    []netip.Prefix
	order    int
}

type node struct {
	label    string
	indices  []byte // first byte of each child's label
	children []*node
	cands    []*cand
	up       *node // nearest ancestor with candidates
}

// Match is the result of a lookup: the route and the path that matched.
type Match struct {
	Route *gateway.RouteEntry
	Path  string // the configured uri that matched ("/anything/*")
}

// Build indexes routes. Order among equal candidates follows the order of
// routes (Compile sorts them by id).
func Build(routes []*gateway.RouteEntry) *Router {
	r := &Router{exact: map[string][]*cand{}, root: &node{}}
	n := 0
	for _, e := range routes {
		for _, p := range e.Paths {
			c := &cand{e: e, path: p, addrs: e.RemoteAddrs, order: n}
			n++
			for _, m := range e.Methods {
				c.methods |= methodBit(m)
			}
			for _, h := range e.Hosts {
				h = strings.ToLower(h)
				if strings.HasPrefix(h, "*") {
					c.suffixes = append(c.suffixes, h[1:])
				} else {
					c.hosts = append(c.hosts, h)
				}
			}
			if prefix, ok := strings.CutSuffix(p, "*"); ok {
				nd := r.root.insert(prefix)
				nd.cands = append(nd.cands, c)
			} else {
				r.exact[p] = append(r.exact[p], c)
			}
		}
	}
	for _, cs := range r.exact {
		sortCands(cs)
	}
	r.root.finish(nil)
	return r
}

func sortCands(cs []*cand) {
	slices.SortStableFunc(cs, func(a, b *cand) int {
		if a.e.Priority != b.e.Priority {
			return cmp.Compare(b.e.Priority, a.e.Priority)
		}
		return cmp.Compare(a.order, b.order)
	})
}

// insert returns the node for prefix, splitting edges as needed.
func (n *node) insert(prefix string) *node {
	for {
		if prefix == "" {
			return n
		}
		i := slices.Index(n.indices, prefix[0])
		if i < 0 {
			child := &node{label: prefix}
			n.indices = append(n.indices, prefix[0])
			n.children = append(n.children, child)
			return child
		}
		child := n.children[i]
		common := commonPrefix(child.label, prefix)
		if common < len(child.label) {
			// Split child at common.
			mid := &node{label: child.label[:common], indices: []byte{child.label[common]}, children: []*node{child}}
			child.label = child.label[common:]
			n.children[i] = mid
			child = mid
		}
		n = child
		prefix = prefix[common:]
	}
}

func (n *node) finish(up *node) {
	sortCands(n.cands)
	n.up = up
	if len(n.cands) > 0 {
		up = n
	}
	for _, c := range n.children {
		c.finish(up)
	}
}

func commonPrefix(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// Match finds the route for a request. host is without port; vars gives
// route "vars" their variables. It returns the zero Match when none fits.
func (r *Router) Match(method, host, path string, addr netip.Addr, vars gateway.Vars) Match {
	mbit := methodBit(method)
	if cs, ok := r.exact[path]; ok {
		if c := pick(cs, mbit, host, addr, vars); c != nil {
			return Match{Route: c.e, Path: c.path}
		}
	}
	// Descend to the deepest node whose label path prefixes path.
	n, rest := r.root, path
	var last *node
	for {
		if len(n.cands) > 0 {
			last = n
		}
		if rest == "" {
			break
		}
		i := indexByte(n.indices, rest[0])
		if i < 0 {
			break
		}
		c := n.children[i]
		if !strings.HasPrefix(rest, c.label) {
			break
		}
		rest = rest[len(c.label):]
		n = c
	}
	for ; last != nil; last = last.up {
		if c := pick(last.cands, mbit, host, addr, vars); c != nil {
			return Match{Route: c.e, Path: c.path}
		}
	}
	return Match{}
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func pick(cs []*cand, mbit uint16, host string, addr netip.Addr, vars gateway.Vars) *cand {
	for _, c := range cs {
		if c.methods != 0 && c.methods&mbit == 0 {
			continue
		}
		if len(c.addrs) > 0 && !containsAddr(c.addrs, addr) {
			continue
		}
		if (len(c.hosts) > 0 || len(c.suffixes) > 0) && !hostMatches(c, host) {
			continue
		}
		if c.e.Vars != nil && !c.e.Vars.Eval(vars) {
			continue
		}
		return c
	}
	return nil
}

func containsAddr(ps []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func hostMatches(c *cand, host string) bool {
	for _, h := range c.hosts {
		if strings.EqualFold(h, host) {
			return true
		}
	}
	for _, s := range c.suffixes {
		if len(host) > len(s) && strings.EqualFold(host[len(host)-len(s):], s) {
			return true
		}
	}
	return false
}

// methodBit maps an HTTP method to its bit; unknown methods get a bit no
// route names, so routes with a method list reject them.
func methodBit(m string) uint16 {
	switch m {
	case "GET":
		return 1 << 0
	case "POST":
		return 1 << 1
	case "PUT":
		return 1 << 2
	case "DELETE":
		return 1 << 3
	case "PATCH":
		return 1 << 4
	case "HEAD":
		return 1 << 5
	case "OPTIONS":
		return 1 << 6
	case "CONNECT":
		return 1 << 7
	case "TRACE":
		return 1 << 8
	case "PURGE":
		return 1 << 9
	}
	return 1 << 15
}
