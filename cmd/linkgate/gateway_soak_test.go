//go:build !functiononly

package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/admin"
	"github.com/linkgate/linkgate/gateway/bolt"
	"github.com/linkgate/linkgate/gateway/etcd"
	"github.com/linkgate/linkgate/gateway/plugin/prometheus"
	"github.com/linkgate/linkgate/gateway/plugin/redis"
	"github.com/linkgate/linkgate/gateway/proxy"
	"github.com/linkgate/linkgate/internal/etcdtest"
	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/syncbuf"
)

// soakDuration is how long the writers of each soak run write;
// LINKGATE_SOAK_DURATION (a Go duration) changes it.
func soakDuration(t *testing.T) time.Duration {
	d := 3 * time.Second
	if v := os.Getenv("LINKGATE_SOAK_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("LINKGATE_SOAK_DURATION: %v", err)
		}
	}
	if testing.Short() {
		d = time.Second
	}
	return d
}

// The admin soak of issue 11 §1: writers issue random PUT, POST, PATCH and
// DELETE calls on every kind of resource through the gateways' admin APIs
// (the real fasthttp listener, so request-buffer reuse is exercised) while
// readers send traffic. Afterwards:
//
//   - every configuration a node swapped in equals the configuration the
//     store held at that configuration's revision, built from scratch
//     (store history: a watcher on bolt, etcd's own event history);
//   - every response came from a configuration the node was serving at
//     that moment (between the request's send and its answer), through a
//     route whose stored version carries the response's marker (each route
//     write sets a unique X-Soak header with response-rewrite);
//   - once quiet, each node's live configuration equals a fresh load of
//     the store, route by route, and no reload panicked.
func TestGatewayAdminSoakBolt(t *testing.T) {
	store, err := bolt.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	hist := watchHistory(t, store)
	n := startSoakNode(t, store)
	runSoak(t, []*soakNode{n}, soakDuration(t), func() []gateway.Update { return hist() }, store)
}

func TestGatewayAdminSoakEtcd(t *testing.T) {
	srv := etcdtest.Start(t)
	var nodes []*soakNode
	var stores []gateway.Store
	for range 2 {
		cfg, err := etcd.ParseURL("etcd://" + srv.Endpoint())
		if err != nil {
			t.Fatal(err)
		}
		s, err := etcd.Open(t.Context(), cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
		nodes = append(nodes, startSoakNode(t, s))
	}
	runSoak(t, nodes, soakDuration(t), func() []gateway.Update { return etcdHistory(t, srv.Endpoint()) }, stores[0])
}

// soakNode is one gateway wired as runGateway wires it, with the load
// function recording every configuration swapped in.
type soakNode struct {
	url      string
	reloader *gateway.Reloader
	log      *syncbuf.Buffer
	marks    *markLog

	mu       sync.Mutex
	timeline []swap
	watched  []watched // what the store's Watch delivered, for failures
}

// swap is one configuration load: it served from some instant in
// [before, the next swap's after].
type swap struct {
	before, after time.Time
	c             *gateway.Compiled
}

func startSoakNode(t *testing.T, store gateway.Store) *soakNode {
	t.Helper()
	n := &soakNode{log: &syncbuf.Buffer{}, marks: &markLog{gens: map[string][]string{}}}
	logger := slog.New(slog.NewTextHandler(n.log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pool := redis.NewPool()
	t.Cleanup(func() { pool.Close() })
	reg := newRegistry(logger, gatewayConfig{}, prometheus.New(), pool)
	api := admin.NewHandler(logger, markingStore{store, n.marks}, reg, admin.Options{AdminKeys: []string{seedKey}, Stream: true})
	gw := proxy.New(proxy.Options{Logger: logger, Admin: api, MaxBodySize: 1 << 20})
	n.reloader = gateway.NewReloader(reg, logger, func(c *gateway.Compiled) {
		before := time.Now()
		gw.Load(c)
		after := time.Now()
		n.mu.Lock()
		n.timeline = append(n.timeline, swap{before, after, c})
		n.mu.Unlock()
	})
	ctx, cancel := context.WithCancel(context.Background())
	loaded := make(chan struct{})
	var once sync.Once
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = n.reloader.Run(ctx, loggingWatch{store, n}, func() { once.Do(func() { close(loaded) }) })
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gw.Serve(ln) }()
	t.Cleanup(func() {
		sctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		_ = gw.Shutdown(sctx)
		cancel()
		<-done
	})
	select {
	case <-loaded:
	case <-time.After(10 * time.Second):
		t.Fatal("no configuration loaded in 10s")
	}
	n.url = "http://" + ln.Addr().String()
	return n
}

// watched is one update the store's Watch delivered, summarised.
type watched struct {
	rev  int64
	line string
}

// loggingWatch records what the store's Watch delivers to the node.
type loggingWatch struct {
	gateway.Store
	n *soakNode
}

func (s loggingWatch) Watch(ctx context.Context, fn func(gateway.Update)) error {
	return s.Store.Watch(ctx, func(u gateway.Update) {
		line := fmt.Sprintf("@%d", u.Revision)
		if u.Reset {
			line += fmt.Sprintf(" listing of %d entries", len(u.Entries))
		}
		for _, e := range u.Entries[:min(len(u.Entries), 3)] {
			line += fmt.Sprintf(" %s/%s@%d", e.Kind, e.ID, e.ModifiedIndex)
		}
		for _, e := range u.Deleted {
			line += fmt.Sprintf(" -%s/%s", e.Kind, e.ID)
		}
		s.n.mu.Lock()
		s.n.watched = append(s.n.watched, watched{u.Revision, line})
		s.n.mu.Unlock()
		fn(u)
	})
}

// around is what the node's watch delivered before and after the update
// at revision rev.
func (n *soakNode) around(rev int64) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	k, _ := slices.BinarySearchFunc(n.watched, rev, func(w watched, rev int64) int { return cmp.Compare(w.rev, rev) })
	lo, hi := max(k-8, 0), min(k+4, len(n.watched))
	out := fmt.Sprintf("the node's watch delivered (updates %d–%d of %d):", lo, hi-1, len(n.watched))
	for _, w := range n.watched[lo:hi] {
		mark := "  "
		if w.rev == rev {
			mark = "> "
		}
		out += "\n" + mark + w.line
	}
	return out
}

// markLog maps each X-Soak marker to the stored route versions carrying
// it ("routes/ID@ModifiedIndex").
type markLog struct {
	mu   sync.Mutex
	gens map[string][]string
}

func (m *markLog) versions(gen string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.gens[gen])
}

// markingStore records the marker of every route it stores.
type markingStore struct {
	gateway.Store
	marks *markLog
}

func (s markingStore) Put(ctx context.Context, k gateway.Kind, id string, value []byte, prevRev int64) (gateway.Entry, bool, error) {
	e, created, err := s.Store.Put(ctx, k, id, value, prevRev)
	if err == nil && k == gateway.KindRoute {
		if gen := routeMarker(e.Value); gen != "" {
			s.marks.mu.Lock()
			s.marks.gens[gen] = append(s.marks.gens[gen], fmt.Sprintf("routes/%s@%d", e.ID, e.ModifiedIndex))
			s.marks.mu.Unlock()
		}
	}
	return e, created, err
}

func routeMarker(value []byte) string {
	var r struct {
		Plugins struct {
			RR struct {
				Headers map[string]string `json:"headers"`
			} `json:"response-rewrite"`
		} `json:"plugins"`
	}
	_ = json.Unmarshal(value, &r)
	return r.Plugins.RR.Headers["X-Soak"]
}

// answer is one reader request: sent at a, answered at b.
type answer struct {
	node         int
	path, marker string
	status       int
	a, b         time.Time
}

const soakSlots = 6 // routes /soak/1 … /soak/6; ids 1…6 and POSTed ones

func runSoak(t *testing.T, nodes []*soakNode, d time.Duration, history func() []gateway.Update, store gateway.Store) {
	up := helloUpstream(t)
	var gen struct {
		sync.Mutex
		n int
	}
	next := func() string {
		gen.Lock()
		defer gen.Unlock()
		gen.n++
		return fmt.Sprint(gen.n)
	}
	// A starting configuration for the writers' references to name.
	inline := fmt.Sprintf(`{"type":"roundrobin","nodes":{%q:1}}`, up)
	for i := 1; i <= 3; i++ {
		for _, w := range [][2]string{
			{fmt.Sprintf("upstreams/%d", i), inline},
			{fmt.Sprintf("services/%d", i), `{"upstream":` + inline + `}`},
			{fmt.Sprintf("plugin_configs/%d", i), `{"plugins":{"request-id":{}}}`},
			{fmt.Sprintf("consumer_groups/%d", i), `{"plugins":{"request-id":{}}}`},
			{fmt.Sprintf("routes/%d", i), fmt.Sprintf(`{"uri":"/soak/%d","upstream_id":"%d","plugins":{"response-rewrite":{"headers":{"X-Soak":"seed%d"}}}}`, i, i, i)},
			{fmt.Sprintf("routes/%d", i+3), fmt.Sprintf(`{"uri":"/soak/%d","service_id":"%d","plugins":{"response-rewrite":{"headers":{"X-Soak":"seed%d"}}}}`, i+3, i, i+3)},
		} {
			if code, resp := do(t, "PUT", nodes[0].url+"/apisix/admin/"+w[0], w[1], "X-API-KEY", seedKey); code >= 300 {
				t.Fatalf("PUT %s: %d %s", w[0], code, resp)
			}
		}
	}
	stop := make(chan struct{})
	var writers, readers sync.WaitGroup
	var mu sync.Mutex
	var answers []answer
	var calls, ok2xx int
	okBy := map[string]int{} // "DELETE routes" → 2xx answers
	for w := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			node := nodes[w%len(nodes)]
			cl := &http.Client{Timeout: 10 * time.Second}
			for deadline := time.Now().Add(d); time.Now().Before(deadline); {
				method, path, body := soakCall(rng, up, next)
				req, _ := http.NewRequest(method, node.url+"/apisix/admin/"+path, strings.NewReader(body))
				req.Header.Set("X-API-KEY", seedKey)
				resp, err := cl.Do(req)
				if err != nil {
					t.Errorf("%s %s: %v", method, path, err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				// A PATCH that lost a race to another write is refused as
				// APISIX refuses it (503, etcd's atomic_set failing).
				if resp.StatusCode >= 500 && !(method == "PATCH" && strings.Contains(string(b), gateway.ErrConflict.Error())) {
					t.Errorf("%s %s %s: %d %s", method, path, body, resp.StatusCode, b)
				}
				mu.Lock()
				calls++
				if resp.StatusCode < 300 {
					ok2xx++
					okBy[method+" "+strings.SplitN(path, "/", 2)[0]]++
				}
				mu.Unlock()
			}
		}()
	}
	read := func(i int, n *soakNode, cl *http.Client, path string) {
		a := time.Now()
		resp, err := cl.Get(n.url + path)
		if err != nil {
			t.Errorf("GET %s: %v", path, err)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		b := time.Now()
		mu.Lock()
		answers = append(answers, answer{i, path, resp.Header.Get("X-Soak"), resp.StatusCode, a, b})
		mu.Unlock()
	}
	for i, n := range nodes {
		for r := range 2 {
			readers.Add(1)
			go func() {
				defer readers.Done()
				rng := rand.New(rand.NewPCG(uint64(i), uint64(r)))
				cl := &http.Client{Timeout: 10 * time.Second}
				for {
					select {
					case <-stop:
						return
					default:
					}
					read(i, n, cl, fmt.Sprintf("/soak/%d", 1+rng.IntN(soakSlots)))
				}
			}()
		}
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	if t.Failed() {
		return
	}

	// Quiet: every node catches up with the store and then equals a fresh
	// load of it, route by route.
	ctx := t.Context()
	reg := newRegistry(slog.New(slog.DiscardHandler), gatewayConfig{}, prometheus.New(), redis.NewPool())
	fresh, err := gateway.Fresh(ctx, store, reg)
	if err != nil {
		t.Fatal(err)
	}
	want := viewOf(fresh)
	for i, n := range nodes {
		if !eventually.Within(10*time.Second, func() bool {
			ok, err := n.reloader.InSync(ctx, store)
			return err == nil && ok
		}) {
			t.Errorf("node %d: not in sync with the store after 10s", i)
		}
		if got := viewOf(n.reloader.Compiled()); got != want {
			t.Errorf("node %d: live configuration differs from a fresh load of the store:\n%s", i, lineDiff(got, want))
		}
		if p := n.reloader.Panics(); p != 0 {
			t.Errorf("node %d: %d reloads panicked:\n%s", i, p, n.log)
		}
		cl := &http.Client{Timeout: 10 * time.Second}
		for s := 1; s <= soakSlots; s++ {
			read(i, n, cl, fmt.Sprintf("/soak/%d", s))
		}
	}

	// Every configuration swapped in was the store's at its revision.
	var revs []int64
	swaps := 0
	for _, n := range nodes {
		n.mu.Lock()
		for _, s := range n.timeline {
			revs = append(revs, s.c.Revision)
		}
		swaps += len(n.timeline)
		n.mu.Unlock()
	}
	compiled := freshViews(history(), revs)
	for i, n := range nodes {
		bad := 0
		for _, s := range n.timeline {
			rev := s.c.Revision
			exp := compiled[rev]
			if got := viewOf(s.c); got != exp && bad < 3 {
				bad++
				t.Errorf("node %d served at revision %d a configuration the store did not hold then:\n%s\n%s", i, rev, lineDiff(got, exp), n.around(rev))
			}
		}
	}

	// Every answer came from a route version served at that moment.
	marks := func(gen string) []string {
		var out []string
		for _, n := range nodes {
			out = append(out, n.marks.versions(gen)...)
		}
		return out
	}
	bad, byRoute := 0, 0
	for _, a := range answers {
		n := nodes[a.node]
		if !answeredByServed(n.timeline, a, marks(a.marker)) {
			if bad++; bad <= 5 {
				t.Errorf("node %d answered GET %s with %d X-Soak=%q (versions %v) between %s and %s: no configuration it served then has that route",
					a.node, a.path, a.status, a.marker, marks(a.marker), a.a.Format(time.StampMicro), a.b.Format(time.StampMicro))
			}
		}
		if a.marker != "" {
			byRoute++
		}
	}
	t.Logf("2xx by call: %v", okBy)
	t.Logf("%d admin calls (%d 2xx), %d configurations swapped in, %d reads (%d by a route, %d checked wrong), %d distinct revisions checked",
		calls, ok2xx, swaps, len(answers), byRoute, bad, len(compiled))
	if byRoute == 0 {
		t.Error("no read reached a route: the soak checked nothing")
	}
}

// soakCall is one random admin call: method, path under /apisix/admin/ and
// body. Ids come from small pools so that calls collide.
func soakCall(rng *rand.Rand, up string, gen func() string) (method, path, body string) {
	id := fmt.Sprint(1 + rng.IntN(soakSlots))
	ref := func(kind string) string { return fmt.Sprintf("%q:%q", kind, fmt.Sprint(1+rng.IntN(3))) }
	inline := fmt.Sprintf(`{"type":"roundrobin","nodes":{%q:1}}`, up)
	var kind string
	methods := []string{"PUT", "PUT", "POST", "PATCH", "DELETE"}
	method = methods[rng.IntN(len(methods))]
	switch rng.IntN(14) {
	case 0, 1, 2, 3, 4, 5: // routes
		g := gen()
		marker := fmt.Sprintf(`"response-rewrite":{"headers":{"X-Soak":%q}}`, g)
		var extra []string
		switch rng.IntN(3) {
		case 0:
			extra = append(extra, `"upstream":`+inline)
		case 1:
			extra = append(extra, ref("upstream_id"))
		case 2:
			extra = append(extra, ref("service_id"))
		}
		if rng.IntN(3) == 0 {
			extra = append(extra, ref("plugin_config_id"))
		}
		switch method {
		case "PATCH":
			return method, "routes/" + id, `{"plugins":{` + marker + `}}`
		case "POST":
			id = ""
		}
		body = fmt.Sprintf(`{"uri":"/soak/%d","plugins":{%s},%s}`, 1+rng.IntN(soakSlots), marker, strings.Join(extra, ","))
		return method, strings.TrimSuffix("routes/"+id, "/"), body
	case 6:
		kind, id = "upstreams", fmt.Sprint(1+rng.IntN(3))
		body = inline
		if method == "PATCH" {
			body = fmt.Sprintf(`{"retries":%d}`, rng.IntN(3))
		}
	case 7:
		kind, id = "services", fmt.Sprint(1+rng.IntN(3))
		if method == "PATCH" {
			return method, "services/" + id, fmt.Sprintf(`{"desc":"s%s"}`, gen())
		}
		switch rng.IntN(3) {
		case 0:
			body = `{"upstream":` + inline + `,"plugins":{"request-id":{}}}`
		case 1:
			body = `{` + ref("upstream_id") + `}`
		case 2:
			body = `{"plugins":{"cors":{}}}`
		}
	case 8: // consumers: PUT carries the username; POST answers 405
		name := "c" + fmt.Sprint(1+rng.IntN(3))
		if rng.IntN(3) == 0 { // APISIX 3.x's credentials: PUT and DELETE; a missing consumer is refused
			path = fmt.Sprintf("consumers/%s/credentials/%d", name, 1+rng.IntN(2))
			if method == "DELETE" {
				return method, path, ""
			}
			return "PUT", path, fmt.Sprintf(`{"plugins":{"key-auth":{"key":"kc%s"}}}`, gen())
		}
		switch method {
		case "DELETE":
			return method, "consumers/" + name, ""
		case "PATCH":
			method = "PUT"
		}
		group := "" // APISIX 3.x's consumer groups: a group that may have been deleted is refused
		if rng.IntN(2) == 0 {
			group = fmt.Sprintf(`,"group_id":"%d"`, 1+rng.IntN(3))
		}
		return method, "consumers", fmt.Sprintf(`{"username":%q,"plugins":{"key-auth":{"key":"k%s"}}%s}`, name, gen(), group)
	case 9:
		kind, id = "plugin_configs", fmt.Sprint(1+rng.IntN(3))
		if method == "PATCH" {
			return method, "plugin_configs/" + id, fmt.Sprintf(`{"desc":"p%s"}`, gen())
		}
		body = fmt.Sprintf(`{"plugins":{"request-id":{"header_name":"X-Req-%d"}}}`, rng.IntN(3))
	case 10: // consumer groups (3.x): PUT, PATCH, DELETE; a group in use is kept
		id = fmt.Sprint(1 + rng.IntN(3))
		switch method {
		case "POST":
			method = "PUT"
		case "PATCH":
			return method, "consumer_groups/" + id, fmt.Sprintf(`{"desc":"g%s"}`, gen())
		case "DELETE":
			return method, "consumer_groups/" + id, ""
		}
		return method, "consumer_groups/" + id, fmt.Sprintf(`{"plugins":{"request-id":{"header_name":"X-Group-%d"}}}`, rng.IntN(3))
	case 11: // plugin metadata: PUT and DELETE, read by the global rules' cors
		if method == "DELETE" {
			return method, "plugin_metadata/cors", ""
		}
		return "PUT", "plugin_metadata/cors", fmt.Sprintf(`{"allow_origins":{"k%d":"http://soak%s.test"}}`, rng.IntN(2), gen())
	case 12: // stream routes: PUT, POST, DELETE (no PATCH in 3.x), inline, by upstream_id or by service
		switch method {
		case "PATCH":
			method = "PUT"
		case "DELETE":
			return method, "stream_routes/" + id, ""
		}
		target := []string{`"upstream":` + inline, ref("upstream_id"), ref("service_id")}[rng.IntN(3)]
		body = fmt.Sprintf(`{"server_port":%d,"remote_addr":"127.0.0.%d",%s}`, 9100+rng.IntN(3), 1+rng.IntN(2), target)
		if method == "POST" {
			return method, "stream_routes", body
		}
		return method, "stream_routes/" + id, body
	default: // global rules
		id = fmt.Sprint(1 + rng.IntN(2))
		if method == "POST" || method == "PATCH" {
			method = "PUT"
		}
		body = fmt.Sprintf(`{"plugins":{"cors":{"max_age":%d,"allow_origins_by_metadata":["k%d"]}}}`, rng.IntN(100), rng.IntN(2))
		return method, "global_rules/" + id, body
	}
	if method == "POST" {
		return method, kind, body
	}
	return method, kind + "/" + id, body
}

// answeredByServed reports whether some configuration the node served
// while a was in flight explains a: its marker's route version serving
// a.path, or, without a marker, no working route for a.path (404) or a
// route for it that answers a.status.
func answeredByServed(tl []swap, a answer, versions []string) bool {
	// Swaps come one after another, so the ones replaced before a was
	// sent are a prefix of the timeline: skip it in one search.
	first, _ := slices.BinarySearchFunc(tl, a.a, func(s swap, sent time.Time) int { return s.after.Compare(sent) })
	for k := max(first-1, 0); k < len(tl); k++ {
		s := tl[k]
		if s.before.After(a.b) {
			break
		}
		if k+1 < len(tl) && tl[k+1].after.Before(a.a) {
			continue
		}
		working := false
		for _, e := range s.c.Routes {
			if !slices.Contains(e.Paths, a.path) {
				continue
			}
			if a.marker != "" && e.Fail == 0 && len(e.Sources) > 0 && slices.Contains(versions, e.Sources[0]) {
				return true
			}
			if a.marker == "" && e.Fail != 0 && e.Fail == a.status {
				return true
			}
			working = working || e.Fail == 0
		}
		if a.marker == "" && a.status == http.StatusNotFound && !working {
			return true
		}
	}
	return false
}

// viewOf is c's view without its revision, one route per line.
func viewOf(c *gateway.Compiled) string {
	if c == nil {
		return "<nil>"
	}
	v := c.Describe()
	var b strings.Builder
	for _, r := range v.Routes {
		line, _ := json.Marshal(r)
		b.Write(line)
		b.WriteByte('\n')
	}
	for _, r := range v.StreamRoutes {
		line, _ := json.Marshal(r)
		b.Write(line)
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "shared %v\n", v.Shared)
	return b.String()
}

func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var out []string
	for _, l := range g {
		if !slices.Contains(w, l) {
			out = append(out, "+ "+l)
		}
	}
	for _, l := range w {
		if !slices.Contains(g, l) {
			out = append(out, "- "+l)
		}
	}
	return strings.Join(out, "\n")
}

// freshViews replays a store's history (its changes, in any order) and
// returns, for each of revs, the view of a configuration compiled from
// scratch out of the store's content at that revision. The history is
// replayed once; the compiles, one per distinct revision, run on every
// core, each worker with a registry of its own.
func freshViews(h []gateway.Update, revs []int64) map[int64]string {
	slices.SortStableFunc(h, func(a, b gateway.Update) int { return cmp.Compare(a.Revision, b.Revision) })
	revs = slices.Clone(revs)
	slices.Sort(revs)
	revs = slices.Compact(revs)
	states := make([]gateway.Update, len(revs))
	state := map[string]gateway.Entry{}
	next := 0
	for i, rev := range revs {
		for ; next < len(h) && h[next].Revision <= rev; next++ {
			u := h[next]
			if u.Reset {
				clear(state)
			}
			for _, e := range u.Entries {
				state[e.Key()] = e
			}
			for _, e := range u.Deleted {
				delete(state, e.Key())
			}
		}
		states[i] = gateway.Update{Reset: true, Revision: rev}
		for _, k := range slices.Sorted(maps.Keys(state)) {
			states[i].Entries = append(states[i].Entries, state[k])
		}
	}
	views := make([]string, len(revs))
	var wg sync.WaitGroup
	var work atomic.Int64
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			pool := redis.NewPool()
			defer pool.Close()
			reg := newRegistry(slog.New(slog.DiscardHandler), gatewayConfig{}, prometheus.New(), pool)
			for i := int(work.Add(1) - 1); i < len(revs); i = int(work.Add(1) - 1) {
				c := gateway.NewConfig()
				c.Apply(states[i], reg)
				fc, _ := gateway.Compile(c, reg)
				views[i] = viewOf(fc)
			}
		})
	}
	wg.Wait()
	out := make(map[int64]string, len(revs))
	for i, rev := range revs {
		out[rev] = views[i]
	}
	return out
}

// watchHistory records every change of s from now on (bolt notifies each
// commit with its revision).
func watchHistory(t *testing.T, s gateway.Store) func() []gateway.Update {
	var mu sync.Mutex
	var h []gateway.Update
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	var once sync.Once
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Watch(ctx, func(u gateway.Update) {
			mu.Lock()
			h = append(h, u)
			mu.Unlock()
			once.Do(func() { close(started) })
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	<-started
	return func() []gateway.Update {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(h)
	}
}

// etcdHistory reads every event etcd kept under /apisix/, one update per
// revision.
func etcdHistory(t *testing.T, endpoint string) []gateway.Update {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	now, err := cli.Get(ctx, "/apisix/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	var h []gateway.Update
	for wr := range cli.Watch(ctx, "/apisix/", clientv3.WithPrefix(), clientv3.WithRev(1)) {
		if err := wr.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range wr.Events {
			kind, id, ok := strings.Cut(strings.TrimPrefix(string(ev.Kv.Key), "/apisix/"), "/")
			k, known := gateway.ParseKind(kind)
			if !ok || !known || id == "" {
				continue
			}
			e := gateway.Entry{Kind: k, ID: id, Value: ev.Kv.Value, CreatedIndex: ev.Kv.CreateRevision, ModifiedIndex: ev.Kv.ModRevision}
			u := gateway.Update{Revision: ev.Kv.ModRevision}
			if ev.Type == clientv3.EventTypeDelete {
				u.Deleted = []gateway.Entry{e}
			} else {
				u.Entries = []gateway.Entry{e}
			}
			h = append(h, u)
		}
		if wr.Header.Revision >= now.Header.Revision && len(wr.Events) > 0 && wr.Events[len(wr.Events)-1].Kv.ModRevision >= now.Header.Revision {
			break
		}
	}
	return h
}
