package plugintest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/gateway"
)

// Check validates conf as the admin API does for a route (consumer: as a
// consumer's) and returns APISIX's message, or "" when it is valid.
func Check(tb testing.TB, f gateway.Factory, conf string, consumer bool) string {
	tb.Helper()
	_, err := checked(tb, f, conf, consumer)
	if err != nil {
		return err.Error()
	}
	return ""
}

func checked(tb testing.TB, f gateway.Factory, conf string, consumer bool) (json.RawMessage, error) {
	tb.Helper()
	v, err := gateway.DecodeJSON([]byte(conf))
	if err != nil {
		tb.Fatalf("%s: %v", conf, err)
	}
	plugins := map[string]any{f.Name(): v}
	if err := gateway.NewRegistry(f).Check(plugins, consumer); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(plugins[f.Name()])
	if err != nil {
		tb.Fatal(err)
	}
	return raw, nil
}

// New validates conf (filling defaults in, as stored) and builds an
// instance for routes/1.
func New(tb testing.TB, f gateway.Factory, conf string) any {
	tb.Helper()
	raw, err := checked(tb, f, conf, false)
	if err != nil {
		tb.Fatalf("%s: %v", conf, err)
	}
	in, err := f.New(raw, gateway.Scope{Kind: gateway.KindRoute, ID: "1"})
	if err != nil {
		tb.Fatalf("%s: %v", conf, err)
	}
	return in
}

// Compile validates and compiles resources ("consumers/jack" → JSON) with
// the real pipeline, for a Ctx's consumer lookups.
func Compile(tb testing.TB, reg *gateway.Registry, res map[string]string) *gateway.Compiled {
	tb.Helper()
	cfg := gateway.NewConfig()
	var u gateway.Update
	for key, v := range res {
		kind, id, _ := strings.Cut(key, "/")
		u.Entries = append(u.Entries, gateway.Entry{Kind: gateway.Kind(kind), ID: id, Value: []byte(v)})
	}
	if errs := cfg.Apply(u, reg); len(errs) > 0 {
		tb.Fatalf("apply: %v", errs)
	}
	c, errs := gateway.Compile(cfg, reg)
	if len(errs) > 0 {
		tb.Fatalf("compile: %v", errs)
	}
	return c
}

// FuzzConf checks that any configuration the schema accepts builds an
// instance, and that neither panics on any input.
func FuzzConf(f *testing.F, factory gateway.Factory, seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, conf string) {
		v, err := gateway.DecodeJSON([]byte(conf))
		if err != nil {
			return
		}
		plugins := map[string]any{factory.Name(): v}
		if gateway.NewRegistry(factory).Check(plugins, false) != nil {
			return
		}
		raw, err := json.Marshal(plugins[factory.Name()])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := factory.New(raw, gateway.Scope{Kind: gateway.KindRoute, ID: "1"}); err != nil {
			t.Fatalf("%s passed the checks but does not build: %v", conf, err)
		}
	})
}
