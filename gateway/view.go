package gateway

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// View describes a compiled configuration by what it serves and what it
// was built from. Compile is deterministic, so two configurations with
// equal Routes and Shared serve alike: that is how the control API shows
// a node's live router and how tests compare it with a fresh reload.
type View struct {
	Revision int64       `json:"revision"`
	Routes   []RouteView `json:"routes"`
	// Shared lists the global rules and consumers served, as sources.
	Shared []string `json:"shared"`
	// StreamRoutes are the stream routes served.
	StreamRoutes []StreamRouteView `json:"stream_routes,omitempty"`
}

// StreamRouteView is one served stream route.
type StreamRouteView struct {
	ID       string   `json:"id"`
	Sources  []string `json:"sources"`
	Upstream string   `json:"upstream"`
	Nodes    []string `json:"nodes"`
}

// RouteView is one served route.
type RouteView struct {
	ID      string   `json:"id"`
	Sources []string `json:"sources"`
	Paths   []string `json:"paths"`
	Hosts   []string `json:"hosts,omitempty"`
	Methods []string `json:"methods,omitempty"`
	// Plugins in the order they run, with the scope each is configured on.
	Plugins  []string `json:"plugins,omitempty"`
	Priority int      `json:"priority"`
	Upstream string   `json:"upstream,omitempty"`
	Nodes    []string `json:"nodes,omitempty"`
	// Fail is the status a route naming a missing resource answers.
	Fail int `json:"fail,omitempty"`
}

// Describe returns c's View.
func (c *Compiled) Describe() View {
	v := View{Revision: c.Revision, Routes: make([]RouteView, 0, len(c.Routes)), Shared: slices.Clone(c.shared)}
	if v.Shared == nil {
		v.Shared = []string{}
	}
	for _, e := range c.Routes {
		rv := RouteView{ID: e.ID, Sources: e.Sources, Paths: e.Paths, Hosts: e.Hosts, Methods: e.Methods,
			Priority: e.Priority, Upstream: e.UpstreamKey, Fail: e.Fail}
		for _, in := range e.Chain {
			rv.Plugins = append(rv.Plugins, in.Name)
		}
		rv.Nodes = nodeList(e.Upstream)
		v.Routes = append(v.Routes, rv)
	}
	for _, e := range c.StreamRoutes {
		v.StreamRoutes = append(v.StreamRoutes, StreamRouteView{ID: e.ID, Sources: e.Sources, Upstream: e.UpstreamKey, Nodes: nodeList(e.Upstream)})
	}
	return v
}

// nodeList is an upstream's nodes as "host:port#weight" (nil: none).
func nodeList(u *Upstream) []string {
	if u == nil {
		return nil
	}
	out := make([]string, 0, len(u.Nodes))
	for _, n := range u.Nodes {
		out = append(out, n.Addr()+"#"+strconv.Itoa(n.Weight))
	}
	return out
}

// Mirror returns what the reloader last received from its store: "kind/id"
// → ModifiedIndex.
func (r *Reloader) Mirror() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int64, len(r.raw))
	for k, e := range r.raw {
		out[k] = e.ModifiedIndex
	}
	return out
}

// InSync reports whether the reloader has received every change s holds
// now: the same keys at the same revisions. (A change made after the call
// starts may or may not count.)
func (r *Reloader) InSync(ctx context.Context, s Store) (bool, error) {
	stored := map[string]int64{}
	for _, k := range Kinds {
		es, err := s.List(ctx, k)
		if err != nil {
			return false, err
		}
		for _, e := range es {
			stored[string(k)+"/"+e.ID] = e.ModifiedIndex
		}
	}
	return maps.Equal(stored, r.Mirror()), nil
}

// Fresh loads entries from scratch, as a restarted node would: the view a
// live node must equal once it has received every change.
func Fresh(ctx context.Context, s Store, reg *Registry) (*Compiled, error) {
	u := Update{Reset: true}
	for _, k := range Kinds {
		es, err := s.List(ctx, k)
		if err != nil {
			return nil, err
		}
		u.Entries = append(u.Entries, es...)
	}
	var out *Compiled
	NewReloader(reg, nil, func(c *Compiled) { out = c }).Update(u)
	return out, nil
}

// Entries returns the mirrored entries of kind k, by id.
func (r *Reloader) Entries(k Kind) []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Entry
	for _, e := range r.raw {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.ID, b.ID) })
	return out
}
