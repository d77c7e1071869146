package bolt

import (
	"bytes"
	"testing"

	"github.com/linkgate/linkgate/shortener"
)

// FuzzDecodeStats: a statistics record read from disk never panics the
// decoder, and whatever decodes encodes back to the same bytes.
func FuzzDecodeStats(f *testing.F) {
	f.Add(encodeStats(shortener.VisitStats{}))
	f.Add(encodeStats(shortener.VisitStats{Total: 7, Bots: 2, Days: shortener.Breakdown{"2026-03-14": 7},
		Referrers: shortener.Breakdown{"(direct)": 3, "news.example.com": 4}, Browsers: shortener.Breakdown{"Firefox": 5},
		BotAgents: shortener.Breakdown{"Slack": 2}, Countries: shortener.Breakdown{"DE": 1}}))
	f.Add([]byte{1, 0, 0, 200})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeStats(b)
		if err != nil {
			return
		}
		if again := encodeStats(st); !bytes.Equal(again, b) {
			// Encoding is canonical (sorted keys); a record with duplicate
			// or unsorted keys decodes but re-encodes differently. It must
			// still decode to the same statistics.
			st2, err := decodeStats(again)
			if err != nil || st2.Total != st.Total || len(st2.Referrers) != len(st.Referrers) {
				t.Fatalf("round trip changed %x: %+v vs %+v (%v)", b, st, st2, err)
			}
		}
	})
}

// FuzzMergeStats: the in-place merge of a stored record and a delta gives
// the same statistics as decoding, adding and encoding.
func FuzzMergeStats(f *testing.F) {
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
			oldRec = encodeStats(old)
		} else {
			old = shortener.VisitStats{}
		}
		got, ok := mergeStats([]byte("prefix"), oldRec, &delta)
		if !ok {
			t.Fatal("merge refused a record within the bounds")
		}
		want := old
		want.Add(delta)
		if string(got[:6]) != "prefix" || !bytes.Equal(got[6:], encodeStats(want)) {
			st, err := decodeStats(got[6:])
			t.Fatalf("merge gave %+v (%v), want %+v", st, err, want)
		}
	})
}
