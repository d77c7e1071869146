package dynamodb

import (
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
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
	set.bound(r, 0)
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

// version1Set is sampleSet as the build before the hourly form (5a7c83a)
// encoded it (deltaSet.encodeRaw, version 1): records and state items of
// that build are read as they are.
func version1Set() []byte {
	b, err := hex.DecodeString("0108000a323032362d30332d3331000a323032362d30342d303101082864697265637429010c6e6577732e6578616d706c6502064368726f6d65020746697265666f780308536c61636b626f74040244450306612d6c696e6b00a2050100020001040106622d6c696e6b80c49fd50ca205000001000306622d6c696e6b80c49fd50ca305050106010202010304050406010705")
	if err != nil {
		panic(err)
	}
	return b
}

// hourAt returns the hour (since 1970) of t.
func hourAt(t time.Time) int32 { return int32(t.Unix() / 3600) }

// hourlySet is a batch of the hourly form (the aggregator's) across a
// month's end, of a person and a bot.
func hourlySet() *deltaSet {
	h := hourAt(time.Date(2026, 3, 31, 23, 0, 0, 0, time.UTC))
	b := &shortener.VisitBatch{
		Keys: []shortener.VisitKey{
			{Kind: shortener.KindHour, Hour: h}, {Kind: shortener.KindHour, Hour: h + 1, Bot: true},
			{Kind: shortener.KindReferrer, Name: "news.example", Hour: h}, {Kind: shortener.KindOS, Name: "Linux", Hour: h},
			{Kind: shortener.KindBot, Name: "Slackbot", Hour: h + 1, Bot: true}, {Kind: shortener.KindUTMSource, Name: "mail", Hour: h + 1, Bot: true},
		},
		Links: []shortener.LinkVisits{{ID: "c-link", CreatedAt: 1_700_000_000, Total: 3, Bots: 1,
			Counts: []shortener.KeyCount{{Key: 0, N: 2}, {Key: 1, N: 1}, {Key: 2, N: 2}, {Key: 3, N: 2}, {Key: 4, N: 1}, {Key: 5, N: 1}}}},
	}
	set := newDeltaSet()
	set.addVisits(b, &b.Links[0], 3, time.Unix(int64(h+1)*3600, 0))
	return set
}

// countsOf returns what the rows of set count over [from, to) by g.
func countsOf(set *deltaSet, from, to time.Time, g shortener.Granularity) (*shortener.StatsQuery, shortener.VisitCounts) {
	q := &shortener.StatsQuery{ID: "x", From: from, To: to, Granularity: g}
	c := shortener.NewVisitCounts(q)
	for i := range set.rows {
		set.rangeCounts(&set.rows[i], q, &c)
	}
	return q, c
}

// Rows of the hourly form: per link and month of the hours, round-tripped
// by the encoding, read in the lifetime form (VisitStats) and by range.
func TestDeltaSetHourly(t *testing.T) {
	set := hourlySet()
	april, march := int32((2026-1970)*12+3), int32((2026-1970)*12+2)
	if _, ok := set.pos[rowKey{"c-link", 1_700_000_000, march}]; set.len() != 2 || !ok || set.pos[rowKey{"c-link", 1_700_000_000, april}] != 0 {
		t.Fatalf("rows %+v: want the bot's hour (and the totals) in April, the person's in March", set.rows)
	}
	back := newDeltaSet()
	if err := back.decodeInto(set.encode(nil)); err != nil {
		t.Fatal(err)
	}
	if string(back.encodeRaw(nil)) != string(set.encodeRaw(nil)) {
		t.Fatal("the hourly form does not round-trip")
	}
	var st shortener.VisitStats
	for i := range back.rows {
		st.Add(back.stats(&back.rows[i]))
	}
	want := shortener.VisitStats{Total: 3, Bots: 1, Days: shortener.Breakdown{"2026-03-31": 2, "2026-04-01": 1},
		Referrers: shortener.Breakdown{"news.example": 2}, BotAgents: shortener.Breakdown{"Slackbot": 1}}
	if fmt.Sprint(st) != fmt.Sprint(want) {
		t.Errorf("lifetime form %v, want %v", st, want)
	}
	march31 := time.Date(2026, 3, 31, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		from, to time.Time
		g        shortener.Granularity
		series   []shortener.PeopleBots
		dims     map[shortener.Dimension]map[string]shortener.PeopleBots
	}{
		{"two days", march31, march31.Add(48 * time.Hour), shortener.GranularityDay,
			[]shortener.PeopleBots{{People: 2}, {Bots: 1}},
			map[shortener.Dimension]map[string]shortener.PeopleBots{shortener.DimReferrer: {"news.example": {People: 2}},
				shortener.DimOS: {"Linux": {People: 2}}, shortener.DimBot: {"Slackbot": {Bots: 1}}, shortener.DimUTMSource: {"mail": {Bots: 1}}}},
		{"the bot's hour", march31.Add(24 * time.Hour), march31.Add(25 * time.Hour), shortener.GranularityHour,
			[]shortener.PeopleBots{{Bots: 1}},
			map[shortener.Dimension]map[string]shortener.PeopleBots{shortener.DimBot: {"Slackbot": {Bots: 1}}, shortener.DimUTMSource: {"mail": {Bots: 1}}}},
		{"before", march31, march31.Add(23 * time.Hour), shortener.GranularityHour, make([]shortener.PeopleBots, 23), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, c := countsOf(back, tt.from, tt.to, tt.g)
			if !slices.Equal(c.Series, tt.series) {
				t.Errorf("series %v, want %v", c.Series, tt.series)
			}
			for d := range shortener.NumDimensions {
				if len(c.Dims[d]) != len(tt.dims[d]) || !maps.Equal(c.Dims[d], tt.dims[d]) && len(tt.dims[d]) > 0 {
					t.Errorf("%s: %v, want %v", d, c.Dims[d], tt.dims[d])
				}
			}
		})
	}
}

// Records and state items of the build before the hourly form (lifetime
// form, version 1) are read as they are, and answer ranges as the pebble
// store's migration of the lifetime form does (VisitBatch.HourlyFrom):
// days as people's visits in their first hour, the breakdowns in the
// first hour of the latest day.
func TestDeltaSetVersion1(t *testing.T) {
	old := newDeltaSet()
	if err := old.decodeInto(version1Set()); err != nil {
		t.Fatal(err)
	}
	if string(old.encodeRaw(nil)) == string(version1Set()) {
		t.Fatal("re-encoded in version 1: want the current version")
	}
	cur := sampleSet()
	for i := range cur.rows {
		r := &cur.rows[i]
		got := old.stats(&old.rows[old.pos[r.rowKey]])
		if fmt.Sprint(got) != fmt.Sprint(cur.stats(r)) {
			t.Errorf("row %v: %v, want %v", r.rowKey, got, cur.stats(r))
		}
	}
	march31 := time.Date(2026, 3, 31, 0, 0, 0, 0, time.UTC)
	_, c := countsOf(old, march31, march31.Add(48*time.Hour), shortener.GranularityDay)
	if want := []shortener.PeopleBots{{People: 4}, {People: 2}}; !slices.Equal(c.Series, want) {
		t.Errorf("series %v, want %v", c.Series, want)
	}
	if got := c.Dims[shortener.DimReferrer]["news.example"]; got != (shortener.PeopleBots{People: 4}) {
		t.Errorf("b-link's referrer (on its latest day, April 1st): %v", got)
	}
	if got := c.Dims[shortener.DimBot]["Slackbot"]; got != (shortener.PeopleBots{Bots: 1}) {
		t.Errorf("bot: %v", got)
	}
	_, c = countsOf(old, march31, march31.Add(24*time.Hour), shortener.GranularityDay)
	if got := c.Dims[shortener.DimBrowser]; !maps.Equal(got, map[string]shortener.PeopleBots{"Chrome": {People: 1}}) {
		t.Errorf("March 31st's browsers: %v, want a-link's Chrome", got)
	}
}

// The hourly form is bounded: of each dimension the MaxDimValues names
// with the most visits in the month keep theirs, the rest count under
// (other) in their hours; hours before dayAfter count in their day's
// first hour; the series and every total stay as they were.
func TestDeltaSetBoundHourly(t *testing.T) {
	day := hourAt(time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC))
	set := newDeltaSet()
	r := set.row(rowKey{ID: "busy", Month: (2026-1970)*12 + 2})
	for i := range MaxDimValues + 5 {
		h := day + int32(i%48)
		set.count(r, set.key(shortener.VisitKey{Kind: shortener.KindHour, Hour: h}), int64(1+i%3))
		set.count(r, set.key(shortener.VisitKey{Kind: shortener.KindReferrer, Name: fmt.Sprintf("r%04d.example", i), Hour: h}), int64(1+i%3))
	}
	from, to := time.Unix(int64(day)*3600, 0), time.Unix(int64(day+48)*3600, 0)
	_, before := countsOf(set, from, to, shortener.GranularityHour)
	set.bound(r, day+24) // the first day by day
	_, after := countsOf(set, from, to, shortener.GranularityHour)
	refs := after.Dims[shortener.DimReferrer]
	var sumBefore, sumAfter int64
	for _, n := range before.Dims[shortener.DimReferrer] {
		sumBefore += n.People
	}
	for _, n := range refs {
		sumAfter += n.People
	}
	if len(refs) != MaxDimValues || sumAfter != sumBefore || refs[shortener.OtherKey].People == 0 {
		t.Errorf("bounded: %d referrers, (other) %v, %d visits of %d", len(refs), refs[shortener.OtherKey], sumAfter, sumBefore)
	}
	if refs["r0002.example"] != (shortener.PeopleBots{People: 3}) {
		t.Errorf("a busiest referrer lost its name: %v", refs["r0002.example"])
	}
	var first, rest shortener.PeopleBots
	for i, p := range after.Series {
		if i < 24 {
			first.Add(p)
		} else {
			rest.Add(p)
		}
		if i > 0 && i < 24 && p != (shortener.PeopleBots{}) {
			t.Fatalf("hour %d of the first day still counted by hour: %v", i, p)
		}
	}
	var firstBefore shortener.PeopleBots
	for _, p := range before.Series[:24] {
		firstBefore.Add(p)
	}
	if first != firstBefore || !slices.Equal(after.Series[24:], before.Series[24:]) {
		t.Errorf("series changed: first day %v (was %v)", first, firstBefore)
	}
}
