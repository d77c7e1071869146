package bench

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestParseStages(t *testing.T) {
	st, err := ParseStages("30s:1000, 1m:5k,30s:0")
	if err != nil {
		t.Fatal(err)
	}
	want := []Stage{{30 * time.Second, 1000}, {time.Minute, 5000}, {30 * time.Second, 0}}
	if len(st) != 3 || st[0] != want[0] || st[1] != want[1] || st[2] != want[2] {
		t.Errorf("got %+v", st)
	}
	if d := StagesDuration(st); d != 2*time.Minute {
		t.Errorf("duration %v", d)
	}
	// 0→1000 over 30 s, 1000→5000 over 60 s, 5000→0 over 30 s.
	if n := StagesRequests(st); n != 15000+180000+75000 {
		t.Errorf("planned %v requests", n)
	}
	for _, bad := range []string{"", "30s", "30s:", ":100", "30s:-5", "x:100", "30s:fast", "0s:100", "10s:0,5s:0",
		"30s:1000,", "30s:2G", "9999999h:1"} {
		if _, err := ParseStages(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestStagesPacer(t *testing.T) {
	// A jump to 100 req/s, held 2 s: request k at (k+1)/100.
	p := newStagesPacer([]Stage{{0, 100}, {2 * time.Second, 100}})
	for _, k := range []int64{0, 1, 99, 199} {
		at, ok := p.at(k)
		if want := time.Duration(k+1) * 10 * time.Millisecond; !ok || absDur(at-want) > time.Microsecond {
			t.Errorf("constant: at(%d) = %v %v, want %v", k, at, ok, want)
		}
	}
	if _, ok := p.at(200); ok {
		t.Error("constant: a 201st request in a schedule of 200")
	}
	// 0 → 100 req/s over 2 s (100 requests), then 100 → 0 over 2 s (100).
	p = newStagesPacer([]Stage{{2 * time.Second, 100}, {2 * time.Second, 0}})
	counts := make([]int, 4)
	prev := time.Duration(-1)
	for k := int64(0); ; k++ {
		at, ok := p.at(k)
		if !ok {
			if k != 200 {
				t.Errorf("schedule ends after %d requests, want 200", k)
			}
			break
		}
		if at < prev || at > 4*time.Second {
			t.Fatalf("at(%d) = %v after %v", k, at, prev)
		}
		prev = at
		counts[min(int(at/time.Second), 3)]++
	}
	// The integral of the ramp per second: 25, 75, 75, 25.
	for i, want := range []int{25, 75, 75, 25} {
		if math.Abs(float64(counts[i]-want)) > 1 {
			t.Errorf("second %d: %d requests, want %d", i, counts[i], want)
		}
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func FuzzParseStages(f *testing.F) {
	for _, s := range []string{"30s:1000,1m:5000,30s:0", "0s:100,10s:100", "1h:1k", "5:10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParseStages(s)
		if err != nil {
			return
		}
		p := newStagesPacer(st)
		total := StagesDuration(st)
		// The schedule is monotonic and within the stages' duration.
		prev := time.Duration(0)
		ks := []int64{0, 1, 2, int64(p.total / 2), int64(p.total) - 1}
		slices.Sort(ks)
		for _, k := range slices.Compact(ks) {
			if k < 0 || float64(k)+1 > p.total {
				continue
			}
			at, ok := p.at(k)
			if !ok || at < 0 || at > total+time.Millisecond || (k > 0 && at+time.Microsecond < prev) {
				t.Fatalf("%q: at(%d) = %v %v (prev %v, total %v)", s, k, at, ok, prev, total)
			}
			prev = at
		}
	})
}
