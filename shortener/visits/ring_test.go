package visits

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

// captured keeps the statistics of the batches written to it.
type captured struct {
	mu  sync.Mutex
	got map[string]shortener.VisitStats
}

func (c *captured) AddVisits(_ context.Context, b *shortener.VisitBatch) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.got == nil {
		c.got = map[string]shortener.VisitStats{}
	}
	for i := range b.Links {
		st := c.got[b.Links[i].ID]
		st.Add(b.Stats(i))
		c.got[b.Links[i].ID] = st
		b.Links[i].Applied = true
	}
	return nil
}

func (c *captured) VisitStats(_ context.Context, id string) (shortener.VisitStats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got[id], nil
}

// A visit the same as the last one adds to the last record: a hot link's
// visits take one record of the buffer, not one each, and every visit is
// counted. The buffer here holds 18 records; the drainer is kept waiting.
func TestRepeatsShareARecord(t *testing.T) {
	s := &captured{}
	a, err := New(Config{Store: s, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), FlushInterval: time.Hour, BufferBytes: 2048})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	now := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	visit := func(id, ref string, n int) {
		for range n {
			a.Record([]byte(id), []byte(ref), nil, nil, netip.Addr{}, "", now, shortener.Link{})
		}
	}
	a.aggMu.Lock() // no drain: every visit stays in the buffer
	visit("hot", "https://news.example/", 10000)
	visit("hot", "https://other.example/", 1)
	visit("hot", "https://news.example/", 5000)
	visit("cold", "", 2)
	a.bufMu.Lock()
	var records int
	for b := a.buf; len(b) > 0; records++ {
		var v rawVisit
		b = nextRecord(b, &v)
	}
	a.bufMu.Unlock()
	a.aggMu.Unlock()
	if records != 4 || a.dropped.Load() != 0 {
		t.Errorf("%d records, %d visits dropped; want 4 records, none dropped", records, a.dropped.Load())
	}
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	hot, cold := s.got["hot"], s.got["cold"]
	if hot.Total != 15001 || hot.Referrers["news.example"] != 15000 || hot.Referrers["other.example"] != 1 || hot.Days[now.Format(shortener.DayFormat)] != 15001 {
		t.Errorf("hot: %+v", hot)
	}
	if cold.Total != 2 || cold.Referrers[shortener.DirectReferrer] != 2 {
		t.Errorf("cold: %+v", cold)
	}
}

// A record counts at most math.MaxUint32 visits; the next one starts a
// record of its own.
func TestRepeatSaturates(t *testing.T) {
	v := rawVisit{hash: 1, id: []byte("hot"), host: []byte{}}
	b := appendRecord(make([]byte, 0, 256), &v, 0)
	n := len(b)
	b = appendRecord(b, &v, 0)
	last, rec := b[:n], b[n:]
	if !repeat(last, rec) || binary.LittleEndian.Uint32(last) != 2 {
		t.Fatalf("a repeat was not counted: %v", last)
	}
	binary.LittleEndian.PutUint32(last, math.MaxUint32)
	if repeat(last, rec) || binary.LittleEndian.Uint32(last) != math.MaxUint32 {
		t.Errorf("a full record took one more visit")
	}
	other := rawVisit{hash: 1, id: []byte("hot"), host: []byte{}, hour: 1}
	rec = appendRecord(b[:n], &other, 0)[n:]
	binary.LittleEndian.PutUint32(last, 1)
	if repeat(last, rec) {
		t.Errorf("a visit in another hour was counted as a repeat")
	}
}
