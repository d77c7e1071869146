package storemetrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/pebble/pebbletest"
	"github.com/linkgate/linkgate/shortener/storemetrics"
	"github.com/linkgate/linkgate/shortener/storetest"
)

func open(t *testing.T, reg prometheus.Registerer) *storemetrics.Store {
	b, _ := pebbletest.Open(t)
	return storemetrics.Wrap(b, reg, "pebble")
}

// The decorator is a Store like any other.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) shortener.Store { return open(t, prometheus.NewRegistry()) })
}

func TestRecordsOperations(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := open(t, reg)
	ctx := t.Context()
	s.Create(ctx, shortener.Link{ID: "abc", URL: "https://x.example/"})
	s.Create(ctx, shortener.Link{ID: "abc", URL: "https://x.example/"})
	s.Get(ctx, "nope")
	if _, _, err := s.AppendURL(ctx, nil, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var key []string
			for _, lp := range m.GetLabel() {
				key = append(key, lp.GetName()+"="+lp.GetValue())
			}
			counts[strings.Join(key, ",")] = m.GetHistogram().GetSampleCount()
		}
	}
	for key, want := range map[string]uint64{
		"backend=pebble,op=create,result=ok":       1,
		"backend=pebble,op=create,result=conflict": 1,
		"backend=pebble,op=get,result=not_found":   1,
		"backend=pebble,op=get,result=ok":          1,
		"backend=pebble,op=delete,result=ok":       0,
	} {
		if counts[key] != want {
			t.Errorf("%s: %d observations, want %d (all: %v)", key, counts[key], want, counts)
		}
	}
}
