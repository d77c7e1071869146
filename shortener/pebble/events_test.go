package pebble_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkgate/linkgate/internal/syncbuf"
	"github.com/linkgate/linkgate/shortener/pebble"
)

// TestWriteStallsOnMetrics: a write stall pebble reports is counted and
// timed on /metrics, the one under way included, and logged with its
// reason and duration.
func TestWriteStallsOnMetrics(t *testing.T) {
	var logs syncbuf.Buffer
	s, err := pebble.Open(t.TempDir(), pebble.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(pebble.NewCollector(s))
	stalls := func() (n, seconds float64) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			switch mf.GetName() {
			case "linkgate_pebble_write_stalls_total":
				n = mf.GetMetric()[0].GetCounter().GetValue()
			case "linkgate_pebble_write_stall_seconds_total":
				seconds = mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return n, seconds
	}
	if n, sec := stalls(); n != 0 || sec != 0 {
		t.Fatalf("a new store reports %v stalls, %v s", n, sec)
	}
	begin, end := pebble.WriteStall(s)
	begin()
	n, during := stalls()
	if n != 1 || during <= 0 {
		t.Errorf("during a stall: %v stalls, %v s; want 1 and the time so far", n, during)
	}
	end()
	end() // pebble's end without a begin adds nothing
	n, after := stalls()
	if n != 1 || after < during {
		t.Errorf("after the stall: %v stalls, %v s (%v s during it); want 1 and at least as long", n, after, during)
	}
	if _, again := stalls(); again != after {
		t.Errorf("the stall's time went on after it ended: %v s, then %v s", after, again)
	}
	for _, want := range []string{"writes stalled", "memtable count limit reached", "writes resumed"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}
}
