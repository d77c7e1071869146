package bolt

import (
	"bytes"
	"fmt"
	"maps"
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

// FuzzLogRecord: a visit log record read from disk never panics the
// reader, whatever its bytes: parsing, walking every link, decoding its
// counts and searching ids either work or return an error.
func FuzzLogRecord(f *testing.F) {
	rec, _ := appendLogRecord(nil, shortener.NewVisitBatch(
		shortener.VisitDelta{ID: "abc", Stats: shortener.VisitStats{Total: 3, Bots: 1,
			Days: shortener.Breakdown{"2026-03-14": 3}, Referrers: shortener.Breakdown{"x.example": 3}}},
		shortener.VisitDelta{ID: "abd", Stats: shortener.VisitStats{Total: 1, Browsers: shortener.Breakdown{"Chrome": 1}}},
	), nil)
	f.Add(rec, []byte("abd"))
	f.Add([]byte{logVersion, 0, 0, 0, 0, 0, 0, 0, 0, 17, 0, 0, 0, 17, 0, 0, 0}, []byte("a"))
	f.Add([]byte{logVersion, 1, 0, 0, 0, 1, 0, 0, 0, 200, 0, 0, 0, 204, 0, 0, 0}, []byte{})
	f.Fuzz(func(t *testing.T, b, id []byte) {
		r, err := parseLogRecord(b)
		if err != nil {
			return
		}
		var d delta
		for off := r.linksFrom; off < r.linksTo; {
			var l logLink
			if l, off, err = r.readLink(off); err != nil {
				break
			}
			if err := r.addTo(&d, &l); err != nil {
				break
			}
		}
		if l, ok, err := r.find(id); err == nil && ok && string(l.id) != string(id) {
			t.Fatalf("find(%q) found %q", id, l.id)
		}
	})
}

// FuzzLogRecordRoundTrip: every link of a batch without a visit limit is
// found in its log record with its counts; limited links are not in it.
func FuzzLogRecordRoundTrip(f *testing.F) {
	f.Add([]byte("a\x01b\x02c\x03"), uint8(1))
	f.Add([]byte("zz\x05yy\x00xx\x09"), uint8(2))
	f.Fuzz(func(t *testing.T, spec []byte, limitEvery uint8) {
		var deltas []shortener.VisitDelta
		for i := 0; i+2 < len(spec) && len(deltas) < 200; i += 3 {
			n := int64(spec[i+2]) + 1
			deltas = append(deltas, shortener.VisitDelta{ID: string(spec[i : i+2]),
				Limited: limitEvery > 0 && len(deltas)%(int(limitEvery)+1) == 0,
				Stats: shortener.VisitStats{Total: n, Bots: n / 2,
					Days:      shortener.Breakdown{fmt.Sprintf("2026-03-%02d", spec[i]%28+1): n},
					Referrers: shortener.Breakdown{string(spec[i+1:i+2]) + ".example": n}}})
		}
		b := shortener.NewVisitBatch(deltas...)
		rec, n := appendLogRecord([]byte("prefix"), b, nil)
		r, err := parseLogRecord(rec[len("prefix"):])
		if err != nil {
			t.Fatal(err)
		}
		if r.nLinks != n {
			t.Fatalf("record holds %d links, appendLogRecord said %d", r.nLinks, n)
		}
		for i := range b.Links {
			l := &b.Links[i]
			e, ok, err := r.find([]byte(l.ID))
			if err != nil || ok == l.Limited {
				t.Fatalf("find(%q, limited %v) = %v, %v", l.ID, l.Limited, ok, err)
			}
			if !ok {
				continue
			}
			var d delta
			if err := r.addTo(&d, &e); err != nil {
				t.Fatal(err)
			}
			got, want := d.stats(), b.Stats(i)
			if got.Total != want.Total || got.Bots != want.Bots || !maps.Equal(got.Days, want.Days) ||
				!maps.Equal(got.Referrers, want.Referrers) {
				t.Fatalf("%q: read %+v, wrote %+v", l.ID, got, want)
			}
		}
	})
}

// FuzzRunChunk: a chunk of folded statistics read from disk never panics
// the reader, and what chunkWriter writes reads back entry for entry.
func FuzzRunChunk(f *testing.F) {
	w := chunkWriter{max: 1 << 20}
	w.add([]byte("abc"), encodeStats(shortener.VisitStats{Total: 2}))
	w.add([]byte("abd"), encodeStats(shortener.VisitStats{Total: 5, Bots: 1}))
	w.cut()
	f.Add(w.chunks[0].v)
	f.Add([]byte{runVersion, 1, 'a', 200})
	f.Fuzz(func(t *testing.T, v []byte) {
		b, err := runEntries(v)
		if err != nil {
			return
		}
		var w chunkWriter
		w.max = 64
		var ids, recs [][]byte
		for len(b) > 0 {
			var id, rec []byte
			if id, rec, b, err = runEntry(b); err != nil {
				return
			}
			ids, recs = append(ids, id), append(recs, rec)
			w.add(id, rec)
		}
		w.cut()
		i := 0
		for _, c := range w.chunks {
			if string(c.k) != string(ids[i]) {
				t.Fatalf("chunk key %q, first id %q", c.k, ids[i])
			}
			b, err := runEntries(c.v)
			if err != nil {
				t.Fatal(err)
			}
			for len(b) > 0 {
				var id, rec []byte
				if id, rec, b, err = runEntry(b); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(id, ids[i]) || !bytes.Equal(rec, recs[i]) {
					t.Fatalf("entry %d reads back as %q %x, wrote %q %x", i, id, rec, ids[i], recs[i])
				}
				i++
			}
		}
		if i != len(ids) {
			t.Fatalf("%d entries read back, %d written", i, len(ids))
		}
	})
}
