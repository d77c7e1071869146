// Package router matches requests to gateway routes the way APISIX's
// routers do (apisix.router.http):
//
//   - radixtree_uri (the default): exact paths first, then "prefix*" paths
//     from the longest matching prefix to the shortest; among the routes
//     of one path, higher priority first; each candidate filtered by
//     method, remote address, host and vars;
//   - radixtree_host_uri: the same, but first among the routes whose hosts
//     include the request's host (exact hosts, then wildcards from the
//     longest suffix), and only then among routes without hosts;
//   - radixtree_uri_with_parameter: radixtree_uri where a path may hold
//     ":name" (one segment) and "*name" (the rest) parameters.
//
// A Router is built once per configuration and is immutable: matching is
// safe for concurrent use and allocates nothing.
package router

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"

	"github.com/linkgate/linkgate/gateway"
)

// Mode is the matching algorithm, APISIX's apisix.router.http.
type Mode string

// The modes.
const (
	ModeURI           Mode = "radixtree_uri"
	ModeHostURI       Mode = "radixtree_host_uri"
	ModeURIWithParams Mode = "radixtree_uri_with_parameter"
)

// ParseMode checks a mode name ("" is the default).
func ParseMode(s string) (Mode, bool) {
	switch Mode(s) {
	case "", ModeURI:
		return ModeURI, true
	case ModeHostURI, ModeURIWithParams:
		return Mode(s), true
	}
	return "", false
}

// Router is an immutable index of routes.
type Router struct {
	exact map[string][]*cand
	root  *node
	// radixtree_host_uri: one sub-router per exact host and per wildcard
	// suffix (longest first), then the routes without hosts.
	byHost  map[string]*Router
	bySufx  []suffixRouter
	noHost  *Router
	hostURI bool
}

type suffixRouter struct {
	suffix string // ".example.com"
	r      *Router
}

type cand struct {
	e        *gateway.RouteEntry
	path     string // as configured, for ordering and MatchedURI
	methods  uint16 // 0: any
	hosts    []string
	suffixes []string // from "*.example.com": ".example.com"
	addrs    []netip.Prefix
	order    int
	// params: the path after the node's prefix, by segment (a ":name"
	// segment matches one non-empty segment, "*name" the rest); nil for a
	// plain "prefix*" path, which matches any rest.
	params []string
}

type node struct {
	label    string
	indices  []byte // first byte of each child's label
	children []*node
	cands    []*cand
	up       *node // nearest ancestor with candidates
	depth    int   // length of the prefix this node stands for
}

// Match is the result of a lookup: the route and the path that matched.
type Match struct {
	Route *gateway.RouteEntry
	Path  string // the configured uri that matched ("/anything/*")
}

// Build indexes routes for radixtree_uri. Order among equal candidates
// follows the order of routes (Compile sorts them by id).
func Build(routes []*gateway.RouteEntry) *Router { return BuildMode(routes, ModeURI) }

// BuildMode indexes routes for mode.
func BuildMode(routes []*gateway.RouteEntry, mode Mode) *Router {
	if mode == ModeHostURI {
		return buildHostURI(routes)
	}
	return build(routes, mode == ModeURIWithParams, nil)
}

// buildHostURI makes one sub-router per host key; a route with several
// hosts is in each of their sub-routers.
func buildHostURI(routes []*gateway.RouteEntry) *Router {
	groups := map[string][]*gateway.RouteEntry{}
	var noHost []*gateway.RouteEntry
	for _, e := range routes {
		if len(e.Hosts) == 0 {
			noHost = append(noHost, e)
			continue
		}
		seen := map[string]bool{}
		for _, h := range e.Hosts {
			h = strings.ToLower(h)
			if !seen[h] {
				seen[h] = true
				groups[h] = append(groups[h], e)
			}
		}
	}
	r := &Router{hostURI: true, byHost: map[string]*Router{}, noHost: build(noHost, false, nil)}
	for h, es := range groups {
		sub := build(es, false, func(string) bool { return true })
		if suffix, ok := strings.CutPrefix(h, "*"); ok {
			r.bySufx = append(r.bySufx, suffixRouter{suffix, sub})
		} else {
			r.byHost[h] = sub
		}
	}
	slices.SortFunc(r.bySufx, func(a, b suffixRouter) int {
		if len(a.suffix) != len(b.suffix) {
			return cmp.Compare(len(b.suffix), len(a.suffix))
		}
		return strings.Compare(a.suffix, b.suffix)
	})
	return r
}

// build indexes routes; params enables ":name" and "*name" segments;
// anyHost (host-grouped sub-routers) drops the host filter.
func build(routes []*gateway.RouteEntry, params bool, anyHost func(string) bool) *Router {
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
				if anyHost != nil {
					break
				}
				h = strings.ToLower(h)
				if strings.HasPrefix(h, "*") {
					c.suffixes = append(c.suffixes, h[1:])
				} else {
					c.hosts = append(c.hosts, h)
				}
			}
			if i := paramStart(p); params && i >= 0 {
				c.params = strings.Split(p[i:], "/")
				nd := r.root.insert(p[:i])
				nd.cands = append(nd.cands, c)
			} else if prefix, ok := strings.CutSuffix(p, "*"); ok {
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
	r.root.finish(nil, 0)
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

func (n *node) finish(up *node, depth int) {
	sortCands(n.cands)
	n.up, n.depth = up, depth
	if len(n.cands) > 0 {
		up = n
	}
	for _, c := range n.children {
		c.finish(up, depth+len(c.label))
	}
}

func commonPrefix(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// paramStart is the index of the segment holding the first ":name" or
// "*name" of p (a trailing bare "*" is a prefix, not a parameter), or -1.
func paramStart(p string) int {
	for i := 0; i < len(p); i++ {
		if (p[i] == ':' || (p[i] == '*' && i+1 < len(p))) && (i == 0 || p[i-1] == '/') {
			return i
		}
	}
	return -1
}

// matchParams reports whether rest matches the parameter segments.
func matchParams(params []string, rest string) bool {
	for i, seg := range params {
		if strings.HasPrefix(seg, "*") {
			return true // the rest, whatever it is
		}
		part, tail, more := strings.Cut(rest, "/")
		if strings.HasPrefix(seg, ":") {
			if part == "" {
				return false
			}
		} else if part != seg {
			return false
		}
		if i == len(params)-1 {
			return !more
		}
		if !more {
			return false
		}
		rest = tail
	}
	return rest == ""
}

// Match finds the route for a request. host is without port; vars gives
// route "vars" their variables. It returns the zero Match when none fits.
func (r *Router) Match(method, host, path string, addr netip.Addr, vars gateway.Vars) Match {
	if r.hostURI {
		return r.matchHostURI(method, host, path, addr, vars)
	}
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
		if c := pickRest(last, path, mbit, host, addr, vars); c != nil {
			return Match{Route: c.e, Path: c.path}
		}
	}
	return Match{}
}

// pickRest picks among a node's candidates; a parameter path must match
// the rest of the request path after the node's prefix.
func pickRest(n *node, path string, mbit uint16, host string, addr netip.Addr, vars gateway.Vars) *cand {
	for _, c := range n.cands {
		if c.params != nil && !matchParams(c.params, path[n.depth:]) {
			continue
		}
		if c := pick1(c, mbit, host, addr, vars); c != nil {
			return c
		}
	}
	return nil
}

func (r *Router) matchHostURI(method, host, path string, addr netip.Addr, vars gateway.Vars) Match {
	if sub := r.byHost[host]; sub != nil {
		if m := sub.Match(method, host, path, addr, vars); m.Route != nil {
			return m
		}
	} else if hasUpper(host) {
		if sub := r.byHost[strings.ToLower(host)]; sub != nil {
			if m := sub.Match(method, host, path, addr, vars); m.Route != nil {
				return m
			}
		}
	}
	for _, s := range r.bySufx {
		if len(host) >= len(s.suffix) && strings.EqualFold(host[len(host)-len(s.suffix):], s.suffix) {
			if m := s.r.Match(method, host, path, addr, vars); m.Route != nil {
				return m
			}
		}
	}
	return r.noHost.Match(method, host, path, addr, vars)
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
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
		if c := pick1(c, mbit, host, addr, vars); c != nil {
			return c
		}
	}
	return nil
}

// pick1 returns c if it accepts the request.
func pick1(c *cand, mbit uint16, host string, addr netip.Addr, vars gateway.Vars) *cand {
	if c.methods != 0 && c.methods&mbit == 0 {
		return nil
	}
	if len(c.addrs) > 0 && !containsAddr(c.addrs, addr) {
		return nil
	}
	if (len(c.hosts) > 0 || len(c.suffixes) > 0) && !hostMatches(c, host) {
		return nil
	}
	if c.e.Vars != nil && !c.e.Vars.Eval(vars) {
		return nil
	}
	return c
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
		if len(host) >= len(s) && strings.EqualFold(host[len(host)-len(s):], s) {
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
