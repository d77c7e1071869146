package pebble_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/pebble"
)

// An open stopped by its context during the work it does before the store
// serves — a format 1 or 2 store's migration, the list index's rebuild,
// the read index — returns the context's error after the batch it was in,
// with the store closed; the next open finishes that work, and the store
// answers as one that was opened without a stop. (Red when the work does
// not look at the context: the stopped open succeeds.)
func TestOpenStopped(t *testing.T) {
	ctx := context.Background()
	fixture := func(src string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// links writes 25 links, then drops the list index if dropIndex, as
	// a store of a build before it.
	links := func(dropIndex bool) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			s, err := pebble.Open(dir, pebble.Options{NoIndex: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for i := range 25 {
				l := shortener.Link{ID: fmt.Sprintf("link-%02d", i), URL: fmt.Sprintf("https://site%d.example.com/page/%d", i%4, i),
					CreatedAt: time.Date(2026, 12, 1, 0, i, 0, 0, time.UTC)}
				if i%3 == 0 {
					l.Tags = []string{"campaign"}
				}
				if err := s.Create(ctx, l); err != nil {
					t.Fatal(err)
				}
			}
			if !dropIndex {
				return
			}
			if err := pebble.DropListIndex(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name  string
		make  func(t *testing.T, dir string)
		ids   []string
		noIdx bool
	}{
		{"format 1 migration", fixture("testdata/format1-446e5de"), []string{"fixture-one", "fixture-two", "fixture-three"}, true},
		{"format 2 migration", fixture("testdata/format2-5a7c83a"), []string{"f2-one", "f2-two"}, true},
		{"format 3 migration", fixture("testdata/format3-eb42b6a"), []string{"f3-one", "f3-two", "f3-three", "f3-four"}, true},
		{"list index", links(true), []string{"link-00", "link-07"}, true},
		{"read index", links(false), []string{"link-00", "link-07"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// answers opens the store in dir (stopped at the first step if
			// stop) and describes what it answers.
			answers := func(dir string, stop bool) string {
				t.Helper()
				opts := pebble.Options{NoIndex: c.noIdx, VisitClock: func() time.Time { return format2Now }}
				if stop {
					octx, cancel := context.WithCancel(ctx)
					defer cancel()
					steps := 0
					s, err := pebble.OpenContext(octx, dir, pebble.WithOpenSteps(opts, 2, func() { steps++; cancel() }))
					if !errors.Is(err, context.Canceled) || steps != 1 {
						if err == nil {
							s.Close()
						}
						t.Fatalf("open stopped at its first step: %v after %d steps, want context.Canceled after 1", err, steps)
					}
				}
				s, err := pebble.Open(dir, opts) // the stopped open released the store
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				var b strings.Builder
				for _, id := range c.ids {
					st, err := s.VisitStats(ctx, id)
					fmt.Fprintf(&b, "%s: %+v %v\n", id, st, err)
				}
				for _, g := range []shortener.Granularity{shortener.GranularityDay, shortener.GranularityHour} {
					to := format2Now.Truncate(24*time.Hour).AddDate(0, 0, 1)
					vc, err := s.VisitCounts(ctx, shortener.StatsQuery{From: to.AddDate(0, 0, -7), To: to, Granularity: g})
					fmt.Fprintf(&b, "%s: %+v %v\n", g, vc, err)
				}
				for _, f := range []shortener.ListFilter{{}, {Query: "site2"}, {Tag: "campaign"}, {Query: "page/1", Oldest: true}} {
					p, err := s.Find(ctx, nil, 100, f)
					fmt.Fprintf(&b, "%+v:", f)
					for _, l := range p.Links {
						fmt.Fprintf(&b, " %s", l.ID)
					}
					fmt.Fprintf(&b, " %v\n", err)
				}
				return b.String()
			}
			whole, stopped := filepath.Join(t.TempDir(), "links"), filepath.Join(t.TempDir(), "links")
			c.make(t, whole)
			c.make(t, stopped)
			want := answers(whole, false)
			if got := answers(stopped, true); got != want {
				t.Errorf("after a stopped open:\n%s\nwant (opened without a stop):\n%s", got, want)
			}
		})
	}
}
