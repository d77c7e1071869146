package gateway_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/linkgate/linkgate/gateway"
)

// boom is a plugin whose New panics when its configuration says so: a
// stand-in for any bug reached while loading a configuration.
type boom struct{}

func (boom) Name() string  { return "boom" }
func (boom) Priority() int { return 1 }
func (boom) Schema() *gateway.Schema {
	return &gateway.Schema{Type: "object", Properties: map[string]*gateway.Schema{"panic": {Type: "boolean"}}}
}
func (boom) New(conf json.RawMessage, _ gateway.Scope) (any, error) {
	if strings.Contains(string(conf), `"panic":true`) {
		var r *gateway.Route
		_ = r.Status // nil dereference: a real runtime panic, like issue 11's in Compile

	}
	return struct{}{}, nil
}

type loads struct {
	mu   sync.Mutex
	last *gateway.Compiled
	n    int
}

func (l *loads) load(c *gateway.Compiled) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last, l.n = c, l.n+1
}

func routeIDs(c *gateway.Compiled) string {
	var ids []string
	for _, r := range c.Routes {
		ids = append(ids, r.ID)
	}
	return strings.Join(ids, ",")
}

func entry(kind gateway.Kind, id, v string) gateway.Entry {
	return gateway.Entry{Kind: kind, ID: id, Value: []byte(v)}
}

// A config holding a nil resource (what a deleted route left behind before
// issue 11's fix) compiles: the nil entries are reported, the rest serves.
func TestCompileNilEntries(t *testing.T) {
	reg := gateway.NewRegistry()
	cfg := gateway.NewConfig()
	cfg.Apply(gateway.Update{Reset: true, Entries: []gateway.Entry{
		entry(gateway.KindRoute, "1", `{"uri":"/a","upstream":{"type":"roundrobin","nodes":{"a:1":1}}}`),
	}}, reg)
	cfg.Routes["2"] = nil
	cfg.Services["s"] = nil
	cfg.Consumers["c"] = nil
	cfg.GlobalRules["g"] = nil
	cfg.Routes["3"] = &gateway.Route{ID: "3", URI: "/c", ServiceID: "s", Status: 1}
	c, errs := gateway.Compile(cfg, reg)
	// Route 3 names a service that is not loaded: it still matches and
	// answers 404, as APISIX's.
	if routeIDs(c) != "1,3" || c.Routes[1].Fail != 404 {
		t.Errorf("routes served: %s, want 1 and 3 failing with 404", routeIDs(c))
	}
	if len(errs) != 4 {
		t.Errorf("errors: %v, want routes/2, routes/3, consumers/c, global_rules/g", errs)
	}
}

func TestReloaderSkipsAndRecovers(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	reg := gateway.NewRegistry(boom{})
	var l loads
	r := gateway.NewReloader(reg, logger, l.load)
	up := `"upstream":{"type":"roundrobin","nodes":{"a:1":1}}`
	ok := r.Update(gateway.Update{Reset: true, Revision: 3, Entries: []gateway.Entry{
		entry(gateway.KindRoute, "1", `{"uri":"/a",`+up+`}`),
		entry(gateway.KindRoute, "2", `{"uri":"/b","plugins":{"boom":{"panic":true}},`+up+`}`),
		entry(gateway.KindRoute, "3", `{"uri":"/c","plugins":{"nope":{}},`+up+`}`),
		entry(gateway.KindRoute, "4", `{"uri":"/d","service_id":"missing"}`),
		entry(gateway.KindRoute, "5", `{"uri":"/e","filter_func":"function(vars) return true end","plugins":{}}`),
		entry(gateway.KindRoute, "6", `not json`),
	}})
	if !ok || routeIDs(l.last) != "1,4" || l.last.Revision != 3 || l.last.Routes[1].Fail != 404 {
		t.Fatalf("loaded %v: routes %s rev %d, want route 1 (and 4 answering 404) at revision 3", ok, routeIDs(l.last), l.last.Revision)
	}
	want := map[string]int{gateway.SkipPanic: 1, gateway.SkipUnknownPlugin: 1, gateway.SkipMissingRef: 1, gateway.SkipUnsupported: 1, gateway.SkipInvalid: 1}
	if got := r.Skipped(); !equalCounts(got, want) {
		t.Errorf("Skipped() = %v, want %v", got, want)
	}
	if r.Panics() != 1 {
		t.Errorf("Panics() = %d, want 1", r.Panics())
	}
	// Another change reloads everything; the skipped ones are not logged again.
	r.Update(gateway.Update{Revision: 4, Entries: []gateway.Entry{entry(gateway.KindRoute, "7", `{"uri":"/f",`+up+`}`)}})
	if routeIDs(l.last) != "1,4,7" {
		t.Errorf("routes %s, want 1,4,7", routeIDs(l.last))
	}
	if n := strings.Count(logs.String(), `msg="resource skipped"`); n != 5 {
		t.Errorf("logged %d skips, want each of the 5 once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `key=routes/2 reason=panic`) || !strings.Contains(logs.String(), "stack=") {
		t.Errorf("the panic is not logged with its stack:\n%s", logs.String())
	}
	// Fixing or deleting a skipped resource serves it or forgets it.
	r.Update(gateway.Update{Revision: 5, Entries: []gateway.Entry{entry(gateway.KindRoute, "2", `{"uri":"/b",`+up+`}`)},
		Deleted: []gateway.Entry{{Kind: gateway.KindRoute, ID: "6"}}})
	if routeIDs(l.last) != "1,2,4,7" {
		t.Errorf("routes %s, want 1,2,4,7", routeIDs(l.last))
	}
	delete(want, gateway.SkipPanic)
	delete(want, gateway.SkipInvalid)
	if got := r.Skipped(); !equalCounts(got, want) {
		t.Errorf("Skipped() = %v, want %v", got, want)
	}
}

// A panic outside any one resource (here in load, the data plane's swap)
// keeps the last good configuration; the next update rebuilds from the
// store's entries, including the change whose reload panicked.
func TestReloaderPanicKeepsLastGood(t *testing.T) {
	var l loads
	fail := true
	r := gateway.NewReloader(gateway.NewRegistry(), nil, func(c *gateway.Compiled) {
		if len(c.Routes) == 2 && fail {
			fail = false
			panic("load failed")
		}
		l.load(c)
	})
	up := `"upstream":{"type":"roundrobin","nodes":{"a:1":1}}`
	r.Update(gateway.Update{Reset: true, Entries: []gateway.Entry{entry(gateway.KindRoute, "1", `{"uri":"/a",`+up+`}`)}})
	if ok := r.Update(gateway.Update{Revision: 2, Entries: []gateway.Entry{entry(gateway.KindRoute, "2", `{"uri":"/b",`+up+`}`)}}); ok {
		t.Fatal("Update reported success for a reload that panicked")
	}
	if routeIDs(l.last) != "1" || r.Panics() != 1 || routeIDs(r.Compiled()) != "1" {
		t.Fatalf("after the panic: loaded %s, compiled %s, panics %d", routeIDs(l.last), routeIDs(r.Compiled()), r.Panics())
	}
	r.Update(gateway.Update{Revision: 3, Entries: []gateway.Entry{entry(gateway.KindRoute, "3", `{"uri":"/c",`+up+`}`)}})
	if routeIDs(l.last) != "1,2,3" || l.last.Revision != 3 {
		t.Errorf("after the next update: routes %s rev %d, want 1,2,3 at 3", routeIDs(l.last), l.last.Revision)
	}
}

func equalCounts(a, b map[string]int) bool {
	for k, v := range a {
		if v != 0 && b[k] != v {
			return false
		}
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}
