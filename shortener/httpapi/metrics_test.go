package httpapi

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A visit's time is the request's monotonic start on a wall-clock reading
// at most a second old: a step of the system clock shows within a second.
func TestWallClock(t *testing.T) {
	var c wallClock
	if d := time.Until(c.at(monotonic())).Abs(); d > time.Second {
		t.Fatalf("at(now) is %v off the wall clock", d)
	}
	r := c.last.Load()
	stepped := &wallReading{mono: r.mono, wall: r.wall.Add(-time.Hour)} // the clock was an hour behind
	c.last.Store(stepped)
	if got, want := c.at(r.mono+time.Second/2), stepped.wall.Add(time.Second/2); !got.Equal(want) {
		t.Errorf("within a second of the reading: %v, want %v (no new reading)", got, want)
	}
	if d := time.Until(c.at(monotonic() + time.Second)).Abs(); d > 2*time.Second {
		t.Errorf("a second after the reading: %v off the wall clock, want a new reading", d)
	}
}

// Followed redirects are timed one in redirectSample; failed ones and
// other routes every time; all are counted.
func TestRedirectLatencySampled(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	for range 2*redirectSample + 1 {
		m.observe(routeRedirect, 302, monotonic())
	}
	m.observe(routeRedirect, 404, monotonic())
	m.observe(routeShorten, 201, monotonic())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, x := range mf.GetMetric() {
			key := mf.GetName()
			for _, lp := range x.GetLabel() {
				key += " " + lp.GetValue()
			}
			got[key] = x.GetCounter().GetValue() + float64(x.GetHistogram().GetSampleCount())
		}
	}
	for key, want := range map[string]float64{
		"linkgate_http_request_duration_seconds redirect":    3 + 1, // calls 1, 17 and 33, and the 404
		"linkgate_http_request_duration_seconds shorten_url": 1,
		"linkgate_http_requests_total 302 redirect":          2*redirectSample + 1,
	} {
		if got[key] != want {
			t.Errorf("%s: %v, want %v", key, got[key], want)
		}
	}
}

// TestInflight: one word counts the requests in flight and those started.
func TestInflight(t *testing.T) {
	var in inflight
	for i := range 3 {
		if n := in.begin(); n != int64(i+1) {
			t.Fatalf("begin %d: %d in flight, want %d", i+1, n, i+1)
		}
	}
	in.end()
	in.end()
	if n, s := in.now(), in.started(); n != 1 || s != 3 {
		t.Fatalf("after 3 begins and 2 ends: %d in flight, %d started; want 1, 3", n, s)
	}
	in.end()
	in.begin()
	if n, s := in.now(), in.started(); n != 1 || s != 4 {
		t.Fatalf("after 4 begins and 3 ends: %d in flight, %d started; want 1, 4", n, s)
	}
}
