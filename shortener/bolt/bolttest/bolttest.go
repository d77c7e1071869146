// Package bolttest gives tests a store written by the linkgate release
// before the pebble store (testdata/release-096063f, made by
// testdata/mkfixture with that release's binary) and what it holds, as
// that release's API answered.
package bolttest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

// Fixture copies the old release's store into a temporary directory and
// returns the path of its links.db (with its -wal.0 and -wal.1 beside it)
// and the records it holds, in id order.
func Fixture(tb testing.TB) (string, []shortener.LinkRecord) {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "..", "testdata", "release-096063f")
	dst := filepath.Join(tb.TempDir(), "data")
	if err := os.MkdirAll(dst, 0o750); err != nil {
		tb.Fatal(err)
	}
	for _, name := range []string{"links.db", "links.db-wal.0", "links.db-wal.1"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(src, "expected.json"))
	if err != nil {
		tb.Fatal(err)
	}
	want, err := parseExpected(b)
	if err != nil {
		tb.Fatalf("expected.json: %v", err)
	}
	return filepath.Join(dst, "links.db"), want
}

type count struct {
	Date, Host, Name, Code string
	Count                  int64
}

// parseExpected reads expected.json: the release's API answers, a link
// (GET /api/v1/links) and its statistics (GET /api/v1/links/{id}/stats).
func parseExpected(b []byte) ([]shortener.LinkRecord, error) {
	var entries []struct {
		Link struct {
			ID, URL   string
			Created   *string `json:"created_at"`
			Expires   *string `json:"expires_at"`
			MaxVisits *int64  `json:"max_visits"`
		}
		Stats struct {
			Total, Bots int64
			ByDay       []count `json:"by_day"`
			Referrers   []count
			Browsers    []count
			BotAgents   []count `json:"bot_agents"`
			Countries   []count
		}
	}
	if err := json.Unmarshal(b, &entries); err != nil {
		return nil, err
	}
	var recs []shortener.LinkRecord
	for _, e := range entries {
		l := shortener.Link{ID: e.Link.ID, URL: e.Link.URL}
		for p, s := range map[*time.Time]*string{&l.CreatedAt: e.Link.Created, &l.ExpiresAt: e.Link.Expires} {
			if s != nil {
				t, err := time.Parse(time.RFC3339, *s)
				if err != nil {
					return nil, err
				}
				*p = t.UTC()
			}
		}
		if e.Link.MaxVisits != nil {
			l.MaxVisits = *e.Link.MaxVisits
		}
		st := shortener.VisitStats{Total: e.Stats.Total, Bots: e.Stats.Bots}
		add := func(bd *shortener.Breakdown, cs []count, key func(count) string) {
			for _, c := range cs {
				if *bd == nil {
					*bd = shortener.Breakdown{}
				}
				(*bd)[key(c)] += c.Count
			}
		}
		add(&st.Days, e.Stats.ByDay, func(c count) string { return c.Date })
		add(&st.Referrers, e.Stats.Referrers, func(c count) string { return c.Host })
		add(&st.Browsers, e.Stats.Browsers, func(c count) string { return c.Name })
		add(&st.BotAgents, e.Stats.BotAgents, func(c count) string { return c.Name })
		add(&st.Countries, e.Stats.Countries, func(c count) string { return c.Code })
		recs = append(recs, shortener.LinkRecord{Link: l, Stats: st})
	}
	slices.SortFunc(recs, func(a, b shortener.LinkRecord) int { return strings.Compare(a.Link.ID, b.Link.ID) })
	return recs, nil
}
