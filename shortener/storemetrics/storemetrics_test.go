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
	for labels, want := range map[string]uint64{
		"op=create,result=ok":       1,
		"op=create,result=conflict": 1,
		"op=get,result=not_found":   1,
		"op=get,result=ok":          1,
		"op=delete,result=ok":       0,
	} {
		if got := sampleCount(t, reg, labels); got != want {
			t.Errorf("%s: %d observations, want %d", labels, got, want)
		}
	}
}

// With SampleLookups(n), AppendURL is timed once every n calls, whatever
// its result; Get still every time.
func TestSampleLookups(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := open(t, reg)
	s.SampleLookups(16)
	ctx := t.Context()
	if err := s.Create(ctx, shortener.Link{ID: "abc", URL: "https://x.example/"}); err != nil {
		t.Fatal(err)
	}
	for range 40 {
		if dst, _, err := s.AppendURL(ctx, nil, []byte("abc")); err != nil || string(dst) != "https://x.example/" {
			t.Fatalf("AppendURL: %q %v", dst, err)
		}
	}
	s.Get(ctx, "abc")
	if got := sampleCount(t, reg, "op=get,result=ok"); got != 4 {
		t.Errorf("op=get result=ok: %d observations, want 4 (3 of 40 lookups, calls 1, 17 and 33, and the Get)", got)
	}
}

// sampleCount returns the observations of the store histogram whose
// labels (other than backend) are labels.
func sampleCount(t *testing.T, reg *prometheus.Registry, labels string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var key []string
			for _, lp := range m.GetLabel() {
				if lp.GetName() != "backend" {
					key = append(key, lp.GetName()+"="+lp.GetValue())
				}
			}
			if strings.Join(key, ",") == labels {
				return m.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}
