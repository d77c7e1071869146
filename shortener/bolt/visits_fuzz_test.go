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
