package statsrec

import (
	"bytes"
	"maps"
	"testing"

	"github.com/linkgate/linkgate/shortener"
)

var sample = shortener.VisitStats{Total: 7, Bots: 2, Days: shortener.Breakdown{"2026-03-14": 7},
	Referrers: shortener.Breakdown{"(direct)": 3, "news.example.com": 4}, Browsers: shortener.Breakdown{"Firefox": 5},
	BotAgents: shortener.Breakdown{"Slack": 2}, Countries: shortener.Breakdown{"DE": 1}}

func equal(a, b shortener.VisitStats) bool {
	eq := func(x, y shortener.Breakdown) bool { return len(x) == len(y) && maps.Equal(x, y) }
	return a.Total == b.Total && a.Bots == b.Bots && eq(a.Days, b.Days) && eq(a.Referrers, b.Referrers) &&
		eq(a.Browsers, b.Browsers) && eq(a.BotAgents, b.BotAgents) && eq(a.Countries, b.Countries)
}

// Adding two records (the merge operator's case) gives their sum, and
// Total reads the total without decoding.
func TestAddRecords(t *testing.T) {
	other := shortener.VisitStats{Total: 3, Referrers: shortener.Breakdown{"news.example.com": 1, "a.example": 2},
		Browsers: shortener.Breakdown{"Chrome": 3}, Days: shortener.Breakdown{"2026-03-15": 3}}
	var d Delta
	if err := d.AddRecord(Encode(other)); err != nil {
		t.Fatal(err)
	}
	d.Normalize()
	got, err := Merge(nil, Encode(sample), &d)
	if err != nil {
		t.Fatal(err)
	}
	want := sample
	want.Days = maps.Clone(sample.Days)
	want.Referrers = maps.Clone(sample.Referrers)
	want.Browsers = maps.Clone(sample.Browsers)
	want.Add(other)
	st, err := Decode(got)
	if err != nil || !equal(st, want) {
		t.Fatalf("merged %+v (%v), want %+v", st, err, want)
	}
	if n, err := Total(got); err != nil || n != 10 {
		t.Errorf("Total = %d, %v; want 10", n, err)
	}
	if _, err := Total([]byte{9}); err == nil {
		t.Error("Total of a corrupt record succeeded")
	}
}

// Beyond a bound, Merge folds the smallest counts into (other) and keeps
// the sum.
func TestMergeBounds(t *testing.T) {
	var st shortener.VisitStats
	st.Referrers = shortener.Breakdown{}
	for i := range shortener.MaxStatReferrers + 5 {
		st.Referrers[string(rune('a'+i%26))+string(rune('a'+i/26))] = int64(i + 1)
	}
	st.Total = 0
	for _, n := range st.Referrers {
		st.Total += n
	}
	d := FromStats(&st)
	got, err := Merge(nil, nil, &d)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(got)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, n := range back.Referrers {
		sum += n
	}
	if len(back.Referrers) > shortener.MaxStatReferrers || sum != st.Total || back.Referrers[shortener.OtherKey] == 0 {
		t.Errorf("%d referrers summing to %d (other %d); want ≤ %d summing to %d", len(back.Referrers), sum,
			back.Referrers[shortener.OtherKey], shortener.MaxStatReferrers, st.Total)
	}
}

// FuzzDecode: a record read from disk never panics the decoder, and
// whatever decodes encodes back to the same statistics.
func FuzzDecode(f *testing.F) {
	f.Add(Encode(shortener.VisitStats{}))
	f.Add(Encode(sample))
	f.Add([]byte{1, 0, 0, 200})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := Decode(b)
		var d Delta
		if aerr := d.AddRecord(b); (aerr == nil) != (err == nil) {
			t.Fatalf("Decode and AddRecord disagree on %x: %v vs %v", b, err, aerr)
		}
		if err != nil {
			return
		}
		if again := Encode(st); !bytes.Equal(again, b) {
			// Encoding is canonical (sorted keys); a record with duplicate
			// or unsorted keys decodes but re-encodes differently. It must
			// still decode to the same statistics.
			st2, err := Decode(again)
			if err != nil || st2.Total != st.Total || len(st2.Referrers) != len(st.Referrers) {
				t.Fatalf("round trip changed %x: %+v vs %+v (%v)", b, st, st2, err)
			}
		}
	})
}

// FuzzMerge: the one-pass merge of a stored record and a delta gives the
// same statistics as decoding, adding and encoding.
func FuzzMerge(f *testing.F) {
	f.Add([]byte("a\x01b\x02c"), []byte("b\x05d\x01"), int64(3))
	f.Add([]byte{}, []byte("x\x01"), int64(1))
	f.Fuzz(func(t *testing.T, oldKeys, deltaKeys []byte, bots int64) {
		mk := func(b []byte) shortener.Breakdown {
			m := shortener.Breakdown{}
			for i := 0; i+1 < len(b) && len(m) < 20; i += 2 {
				m[string(b[i:i+1])] += int64(b[i+1]) + 1
			}
			return m
		}
		old := shortener.VisitStats{Total: 50, Bots: bots, Referrers: mk(oldKeys), Days: mk(deltaKeys)}
		delta := shortener.VisitStats{Total: 7, Bots: 1, Referrers: mk(deltaKeys), Browsers: mk(oldKeys)}
		var oldRec []byte
		if len(oldKeys)%3 != 0 {
			oldRec = Encode(old)
		} else {
			old = shortener.VisitStats{}
		}
		d := FromStats(&delta)
		got, ok := mergeRecord([]byte("prefix"), oldRec, &d)
		if !ok {
			t.Fatal("merge refused a record within the bounds")
		}
		want := old
		want.Add(delta)
		if string(got[:6]) != "prefix" || !bytes.Equal(got[6:], Encode(want)) {
			st, err := Decode(got[6:])
			t.Fatalf("merge gave %+v (%v), want %+v", st, err, want)
		}
	})
}
