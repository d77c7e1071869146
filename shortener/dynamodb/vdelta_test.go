package dynamodb

import (
	"fmt"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

func sampleSet() *deltaSet {
	now := time.Date(2026, 3, 31, 23, 59, 0, 0, time.UTC)
	set := newDeltaSet()
	b := shortener.NewVisitBatch(
		shortener.VisitDelta{ID: "b-link", CreatedAt: 1_700_000_000, Stats: shortener.VisitStats{Total: 5, Bots: 1,
			Days:      shortener.Breakdown{"2026-03-31": 3, "2026-04-01": 2}, // a batch across a month's end
			Referrers: shortener.Breakdown{"news.example": 4, shortener.DirectReferrer: 1},
			Browsers:  shortener.Breakdown{"Firefox": 4}, BotAgents: shortener.Breakdown{"Slackbot": 1}, Countries: shortener.Breakdown{"DE": 5}}},
		shortener.VisitDelta{ID: "a-link", Stats: shortener.VisitStats{Total: 1, Days: shortener.Breakdown{"2026-03-31": 1}, Browsers: shortener.Breakdown{"Chrome": 1}}},
	)
	for i := range b.Links {
		set.addVisits(b, &b.Links[i], b.Links[i].Total, now)
	}
	return set
}

// A batch becomes rows per link and month: days in their months, the
// rest with the latest day.
func TestDeltaSetRows(t *testing.T) {
	set := sampleSet()
	april, march := int32((2026-1970)*12+3), int32((2026-1970)*12+2)
	if monthName(april) != "2026-04" || monthName(march) != "2026-03" {
		t.Fatalf("month names %s %s", monthName(april), monthName(march))
	}
	got := map[rowKey]string{}
	for i := range set.rows {
		r := &set.rows[i]
		got[r.rowKey] = fmt.Sprint(set.stats(r))
	}
	want := map[rowKey]string{
		{"b-link", 1_700_000_000, april}: fmt.Sprint(shortener.VisitStats{Total: 5, Bots: 1, Days: shortener.Breakdown{"2026-04-01": 2},
			Referrers: shortener.Breakdown{"news.example": 4, shortener.DirectReferrer: 1}, Browsers: shortener.Breakdown{"Firefox": 4},
			BotAgents: shortener.Breakdown{"Slackbot": 1}, Countries: shortener.Breakdown{"DE": 5}}),
		{"b-link", 1_700_000_000, march}: fmt.Sprint(shortener.VisitStats{Days: shortener.Breakdown{"2026-03-31": 3}}),
		{"a-link", 0, march}:             fmt.Sprint(shortener.VisitStats{Total: 1, Days: shortener.Breakdown{"2026-03-31": 1}, Browsers: shortener.Breakdown{"Chrome": 1}}),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rows\ngot  %v\nwant %v", got, want)
	}
}

// Encoding round-trips, is the same for equal sets (whatever the order
// rows and keys were added in), and part selection keeps whole rows.
func TestDeltaSetEncoding(t *testing.T) {
	set := sampleSet()
	b := set.encode(nil)
	back := newDeltaSet()
	if err := back.decodeInto(b); err != nil {
		t.Fatal(err)
	}
	if again := back.encode(nil); string(again) != string(b) {
		t.Errorf("encode(decode(b)) differs from b:\n%x\n%x", again, b)
	}
	// Decoding adds: twice the rows' counts.
	if err := back.decodeInto(b); err != nil {
		t.Fatal(err)
	}
	r := &back.rows[back.pos[rowKey{"a-link", 0, (2026-1970)*12 + 2}]]
	if st := back.stats(r); st.Total != 2 || st.Browsers["Chrome"] != 2 {
		t.Errorf("decoding twice: %+v", st)
	}
	onlyA := set.encode(func(r *row) bool { return r.ID == "a-link" })
	part := newDeltaSet()
	if err := part.decodeInto(onlyA); err != nil || part.len() != 1 || len(part.keys) != 2 {
		t.Errorf("a part with a-link: %d rows, %d keys, %v; want 1 row and its 2 keys", part.len(), len(part.keys), err)
	}
	for i := range b {
		if err := newDeltaSet().decodeInto(b[:i]); err == nil {
			t.Fatalf("a truncated encoding (%d of %d bytes) decoded", i, len(b))
		}
	}
}

// A row is bounded as stored statistics are.
func TestDeltaSetBound(t *testing.T) {
	set := newDeltaSet()
	st := shortener.VisitStats{Total: 300, Referrers: shortener.Breakdown{}}
	for i := range 300 {
		st.Referrers[fmt.Sprintf("r%03d.example", i)] = 1
	}
	set.addStats("busy", 0, st, time.Now())
	r := &set.rows[0]
	set.bound(r)
	got := set.stats(r)
	if len(got.Referrers) != shortener.MaxStatReferrers || got.Referrers[shortener.OtherKey] != 300-shortener.MaxStatReferrers+1 {
		t.Errorf("bounded: %d referrers, (other) %d", len(got.Referrers), got.Referrers[shortener.OtherKey])
	}
}

func TestParts(t *testing.T) {
	for size, want := range map[int]int{0: 1, partBytes: 1, partBytes + 1: 2, 40 * partBytes: 64, 1 << 30: maxParts} {
		if got := parts(size); got != want {
			t.Errorf("parts(%d) = %d, want %d", size, got, want)
		}
	}
	if partOf(1<<63, 2) != 1 || partOf(1<<63-1, 2) != 0 || partOf(^uint64(0), 256) != 255 || partOf(12345, 1) != 0 {
		t.Error("partOf does not take the hash's top bits")
	}
	if shardOf(^uint64(0), 10) != 1023 || shardOf(1<<60, minShardBits) != 1 || rangeOf(^uint64(0)) != foldRanges-1 {
		t.Error("shardOf does not take the hash's top bits")
	}
	for bytes, want := range map[int64]int{0: minShardBits, 16 << 14: 4, 16<<14 + 1: 5, 1 << 40: maxShardBits} {
		if got := shardBits(bytes); got != want {
			t.Errorf("shardBits(%d) = %d, want %d", bytes, got, want)
		}
	}
	ms := map[int32]monthMeta{671: {k: 4, bytes: 100}, 672: {k: 9, bytes: 1 << 24, old: 8}}
	if back, err := decodeMonths(encodeMonths(ms)); err != nil || fmt.Sprint(back) != fmt.Sprint(ms) {
		t.Errorf("month table round trip: %v, %v", back, err)
	}
}
