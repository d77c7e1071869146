package gateway

import (
	"fmt"
	"net/netip"
	"strings"
)

// StreamRouteEntry is a stream route ready to serve: its matchers parsed
// and its upstream resolved.
type StreamRouteEntry struct {
	ID string
	// RemoteAddr and ServerAddr are invalid (zero) when the route does not
	// match on them; ServerPort is 0 then.
	RemoteAddr, ServerAddr netip.Prefix
	ServerPort             int
	// SNI is the TLS server name the route matches ("" for any, or for
	// plain TCP); "*.example.com" matches any name under example.com.
	SNI      string
	Upstream *Upstream
	// UpstreamKey names the upstream's runtime state, as RouteEntry's.
	UpstreamKey string
	// Sources are the stored resources the entry was compiled from.
	Sources []string
}

// compileStreamRoute resolves a stream route's upstream: its own, else
// upstream_id's, else its service's.
func compileStreamRoute(cfg *Config, r *StreamRoute) (e *StreamRouteEntry, err error) {
	defer recoverAs(&err)
	if r == nil {
		return nil, errNoValue
	}
	e = &StreamRouteEntry{ID: r.ID, ServerPort: r.ServerPort, SNI: strings.ToLower(r.SNI),
		Sources: []string{cfg.source(KindStreamRoute, r.ID)}}
	if r.RemoteAddr != "" {
		if e.RemoteAddr, err = ParseAddrOrPrefix(r.RemoteAddr); err != nil {
			return nil, err
		}
	}
	if r.ServerAddr != "" {
		if e.ServerAddr, err = ParseAddrOrPrefix(r.ServerAddr); err != nil {
			return nil, err
		}
	}
	upstreamID := r.UpstreamID
	e.Upstream, e.UpstreamKey = r.Upstream, string(KindStreamRoute)+"/"+r.ID
	if r.ServiceID != "" && r.Upstream == nil && upstreamID == "" {
		svc := cfg.Services[string(r.ServiceID)]
		if svc == nil {
			return nil, missingRef(0, "service %s not found", r.ServiceID)
		}
		e.Sources = append(e.Sources, cfg.source(KindService, svc.ID))
		upstreamID = svc.UpstreamID
		e.Upstream, e.UpstreamKey = svc.Upstream, "services/"+svc.ID
	}
	if r.Upstream == nil && upstreamID != "" {
		u := cfg.Upstreams[string(upstreamID)]
		if u == nil {
			return nil, missingRef(0, "upstream %s not found", upstreamID)
		}
		e.Upstream, e.UpstreamKey = u, "upstreams/"+u.ID
		e.Sources = append(e.Sources, cfg.source(KindUpstream, u.ID))
	}
	if e.Upstream == nil {
		return nil, missingRef(0, "stream route %s has no upstream", r.ID)
	}
	if t := e.Upstream.Type; t != "roundrobin" && t != "chash" {
		return nil, &buildError{reason: SkipUnsupported, err: fmt.Errorf("the stream proxy balances roundrobin and chash, not %q", t)}
	}
	return e, nil
}

// MatchStream finds the stream route of a connection from remote to
// local (the listener's address) with TLS server name sni ("" for plain
// TCP), as APISIX's stream router: the routes whose sni matches first
// (exact, else the longest wildcard), then those without an sni; among
// them the first, by id, whose addresses match. nil: no route.
func MatchStream(routes []*StreamRouteEntry, remote, local netip.AddrPort, sni string) *StreamRouteEntry {
	if sni != "" {
		sni = strings.ToLower(sni)
		var best *StreamRouteEntry
		bestScore := 0
		for _, r := range routes {
			score := sniScore(r.SNI, sni)
			if score > bestScore && r.matchAddrs(remote, local) {
				best, bestScore = r, score
			}
		}
		if best != nil {
			return best
		}
	}
	for _, r := range routes {
		if r.SNI == "" && r.matchAddrs(remote, local) {
			return r
		}
	}
	return nil
}

// sniScore ranks how a route's sni matches name: 0 not at all, else the
// higher the closer — an exact name before any wildcard, a longer
// wildcard before a shorter ("*.x.com" matches a.x.com and a.b.x.com:
// APISIX lets a stream route's wildcard match deeper names).
func sniScore(pattern, name string) int {
	if rest, ok := strings.CutPrefix(pattern, "*"); ok && strings.HasSuffix(name, rest) {
		return len(rest)
	}
	if pattern != "" && pattern == name {
		return 1 << 16
	}
	return 0
}

func (r *StreamRouteEntry) matchAddrs(remote, local netip.AddrPort) bool {
	if r.RemoteAddr.IsValid() && !r.RemoteAddr.Contains(remote.Addr().Unmap()) {
		return false
	}
	if r.ServerAddr.IsValid() && !r.ServerAddr.Contains(local.Addr().Unmap()) {
		return false
	}
	return r.ServerPort == 0 || int(local.Port()) == r.ServerPort
}
