// Package storetest is the conformance suite every shortener.Store passes:
// the bolt store, the DynamoDB store and any decorator (read cache,
// instrumentation) over them. An adapter's test calls
//
//	storetest.Run(t, func(t *testing.T) shortener.Store { return openEmptyStore(t) })
//
// newStore must return a new, empty store and arrange (t.Cleanup) to close
// it. The suite checks the contract written on shortener.Store.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

// Run runs the conformance suite against stores made by newStore.
func Run(t *testing.T, newStore func(t *testing.T) shortener.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s shortener.Store)
	}{
		{"CreateGetRoundTrip", testRoundTrip},
		{"GetMissing", testGetMissing},
		{"CreateConflictKeepsOriginal", testConflict},
		{"ConcurrentCreateSameID", testConcurrentSameID},
		{"ConcurrentCreateDistinctIDs", testConcurrentDistinct},
		{"Delete", testDelete},
		{"ExpiredLinksAreReturnedAsStored", testExpired},
		{"ListPaginates", testList},
		{"ListEmpty", testListEmpty},
		{"ListInvalidCursor", testListInvalidCursor},
		{"Ping", testPing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newStore(t))
		})
	}
	runVisits(t, newStore)
	runUpdates(t, newStore)
	runKeys(t, newStore)
	runDomains(t, newStore)
	runRegistry(t, newStore)
}

// base is a second-precision UTC time, as the Service produces.
var base = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

func link(id, url string) shortener.Link {
	return shortener.Link{ID: id, URL: url, CreatedAt: base}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func mustCreate(t *testing.T, s shortener.Store, l shortener.Link) {
	t.Helper()
	if err := s.Create(ctx(t), l); err != nil {
		t.Fatalf("Create(%q): %v", l.ID, err)
	}
}

func mustGet(t *testing.T, s shortener.Store, id string) shortener.Link {
	t.Helper()
	l, err := s.Get(ctx(t), id)
	if err != nil {
		t.Fatalf("Get(%q): %v", id, err)
	}
	return l
}

// Equal reports whether two links are the same, comparing times as
// instants. Adapter tests may use it too.
func Equal(a, b shortener.Link) bool {
	return a.ID == b.ID && a.URL == b.URL && a.CreatedAt.Equal(b.CreatedAt) &&
		a.ExpiresAt.Equal(b.ExpiresAt) && a.MaxVisits == b.MaxVisits && a.Visits == b.Visits &&
		slices.Equal(a.Tags, b.Tags) && a.ForwardQuery == b.ForwardQuery
}

func fmtLink(l shortener.Link) string {
	return fmt.Sprintf("{ID:%q URL:%q CreatedAt:%s ExpiresAt:%s MaxVisits:%d Visits:%d Tags:%q ForwardQuery:%d}",
		l.ID, l.URL, l.CreatedAt.Format(time.RFC3339Nano), l.ExpiresAt.Format(time.RFC3339Nano), l.MaxVisits, l.Visits, l.Tags, l.ForwardQuery)
}

func wantLink(t *testing.T, got, want shortener.Link) {
	t.Helper()
	if !Equal(got, want) {
		t.Errorf("got  %s\nwant %s", fmtLink(got), fmtLink(want))
	}
}

func testRoundTrip(t *testing.T, s shortener.Store) {
	links := []shortener.Link{
		link("abcDEF0123", "https://aws.amazon.com/ec2/graviton/"),
		{ID: "custom-slug_1", URL: "https://h.example/p?q=1&r=2#frag", CreatedAt: base,
			ExpiresAt: base.Add(100 * 365 * 24 * time.Hour), MaxVisits: 1000, Visits: 3},
		link("unicode001", "https://例え.テスト/パス?ü=ö&x=<2>"),
		link("long000001", "https://long.example/"+strings.Repeat("a", shortener.DefaultMaxURLLength-21)),
		// Items written by the seed's app may have an empty URL (its C5 case);
		// stores keep what they are given.
		link("emptyurl01", ""),
		link(strings.Repeat("z", shortener.MaxIDLength), "https://max-id.example/"),
	}
	for _, l := range links {
		mustCreate(t, s, l)
	}
	for _, want := range links {
		wantLink(t, mustGet(t, s, want.ID), want)
	}
	// Times come back as UTC instants with second precision kept exactly.
	got := mustGet(t, s, links[1].ID)
	if got.CreatedAt.Location() != time.UTC || got.ExpiresAt.Location() != time.UTC {
		t.Errorf("times not in UTC: %v, %v", got.CreatedAt.Location(), got.ExpiresAt.Location())
	}
}

func testGetMissing(t *testing.T, s shortener.Store) {
	mustCreate(t, s, link("present001", "https://p.example/"))
	for _, id := range []string{"absent0001", "present00", "present0011", "PRESENT001", "", "a/b", "%2F", "ü", strings.Repeat("x", 300)} {
		_, err := s.Get(ctx(t), id)
		if !errors.Is(err, shortener.ErrNotFound) {
			t.Errorf("Get(%q) error = %v, want ErrNotFound", id, err)
		}
	}
}

func testConflict(t *testing.T, s shortener.Store) {
	orig := link("taken00001", "https://first.example/")
	mustCreate(t, s, orig)
	err := s.Create(ctx(t), link("taken00001", "https://second.example/"))
	if !errors.Is(err, shortener.ErrConflict) {
		t.Fatalf("second Create error = %v, want ErrConflict", err)
	}
	wantLink(t, mustGet(t, s, orig.ID), orig)
}

func testConcurrentSameID(t *testing.T, s shortener.Store) {
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = s.Create(ctx(t), link("samesame01", fmt.Sprintf("https://w%d.example/", i)))
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("creates %d and %d of the same id both succeeded", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, shortener.ErrConflict):
			t.Errorf("create %d: %v, want nil or ErrConflict", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no create of the id succeeded")
	}
	if got := mustGet(t, s, "samesame01").URL; got != fmt.Sprintf("https://w%d.example/", winner) {
		t.Errorf("stored URL %q is not the winner's (%d)", got, winner)
	}
}

func testConcurrentDistinct(t *testing.T, s shortener.Store) {
	const n = 200
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = s.Create(ctx(t), link(fmt.Sprintf("distinct%03d", i), fmt.Sprintf("https://d.example/%d", i)))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	for i := range n {
		if got := mustGet(t, s, fmt.Sprintf("distinct%03d", i)).URL; got != fmt.Sprintf("https://d.example/%d", i) {
			t.Errorf("link %d has URL %q", i, got)
		}
	}
}

func testDelete(t *testing.T, s shortener.Store) {
	mustCreate(t, s, link("delete0001", "https://del.example/"))
	mustCreate(t, s, link("keep000001", "https://keep.example/"))
	if err := s.Delete(ctx(t), "delete0001"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Get(ctx(t), "delete0001"); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx(t), "delete0001"); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("second Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx(t), "never00001"); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("Delete of a missing id: %v, want ErrNotFound", err)
	}
	mustGet(t, s, "keep000001")
	// The id is free again.
	again := link("delete0001", "https://again.example/")
	mustCreate(t, s, again)
	wantLink(t, mustGet(t, s, "delete0001"), again)
}

func testExpired(t *testing.T, s shortener.Store) {
	past := shortener.Link{ID: "expired001", URL: "https://old.example/", CreatedAt: base, ExpiresAt: base.Add(time.Hour)}
	mustCreate(t, s, past)
	// A store with TTL deletion may already have dropped it; otherwise it
	// returns it unchanged and the Service decides.
	got, err := s.Get(ctx(t), past.ID)
	switch {
	case errors.Is(err, shortener.ErrNotFound):
	case err != nil:
		t.Fatalf("Get(expired): %v", err)
	default:
		wantLink(t, got, past)
	}
	// A link that used up its visit limit is expired too, and its id stays
	// taken until it is deleted. (Past-expiry links are not used for this:
	// a TTL-deleting backend may drop them at any moment.)
	exhausted := shortener.Link{ID: "exhausted1", URL: "https://used.example/", CreatedAt: base, MaxVisits: 5, Visits: 5}
	mustCreate(t, s, exhausted)
	wantLink(t, mustGet(t, s, exhausted.ID), exhausted)
	if err := s.Create(ctx(t), link(exhausted.ID, "https://new.example/")); !errors.Is(err, shortener.ErrConflict) {
		t.Errorf("Create over an exhausted link: %v, want ErrConflict", err)
	}
}

func testList(t *testing.T, s shortener.Store) {
	const n = 25
	want := map[string]shortener.Link{}
	for i := range n {
		l := link(fmt.Sprintf("list%06d", (i*7919)%1000003), fmt.Sprintf("https://l.example/%d", i))
		want[l.ID] = l
		mustCreate(t, s, l)
	}
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		p, err := s.List(ctx(t), cursor, 7)
		if err != nil {
			t.Fatalf("List(%q, 7): %v", cursor, err)
		}
		pages++
		if len(p.Links) > 7 {
			t.Fatalf("page of %d links, limit 7", len(p.Links))
		}
		for _, l := range p.Links {
			if seen[l.ID] {
				t.Errorf("link %q listed twice", l.ID)
			}
			seen[l.ID] = true
			w, ok := want[l.ID]
			if !ok {
				t.Errorf("listed unknown link %q", l.ID)
				continue
			}
			wantLink(t, l, w)
		}
		if p.Next == "" {
			break
		}
		if pages > n {
			t.Fatal("listing does not end")
		}
		cursor = p.Next
	}
	if len(seen) != n {
		t.Errorf("listed %d links, want %d", len(seen), n)
	}
	if pages < 4 {
		t.Errorf("%d pages for %d links at 7 per page", pages, n)
	}
	// A page as large as the store returns everything, in one page or a few.
	p, err := s.List(ctx(t), "", shortener.MaxPageSize)
	if err != nil {
		t.Fatalf("List(max): %v", err)
	}
	if len(p.Links) == 0 {
		t.Error("List(max) returned no links")
	}
}

func testListEmpty(t *testing.T, s shortener.Store) {
	p, err := s.List(ctx(t), "", 10)
	if err != nil {
		t.Fatalf("List on an empty store: %v", err)
	}
	if len(p.Links) != 0 || p.Next != "" {
		t.Errorf("List on an empty store = %d links, next %q", len(p.Links), p.Next)
	}
}

func testListInvalidCursor(t *testing.T, s shortener.Store) {
	mustCreate(t, s, link("cursor0001", "https://c.example/"))
	for _, c := range []string{"!!not a cursor!!", "\x00\xff", strings.Repeat("%", 100)} {
		_, err := s.List(ctx(t), c, 10)
		if shortener.ErrorCode(err) != shortener.InvalidParameter {
			t.Errorf("List(%q) error = %v (code %q), want code %q", c, err, shortener.ErrorCode(err), shortener.InvalidParameter)
		}
	}
}

func testPing(t *testing.T, s shortener.Store) {
	if err := s.Ping(ctx(t)); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

// optionalTest is a case of the contract of a part I of the Store
// (VisitStore, Updater, RecordStore), which every Store implements.
type optionalTest[I any] struct {
	name string
	fn   func(t *testing.T, s shortener.Store, x I)
}

// runOptional runs tests against stores made by newStore, each also seen
// as its part I.
func runOptional[I any](t *testing.T, newStore func(t *testing.T) shortener.Store, tests []optionalTest[I]) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			x, ok := s.(I)
			if !ok {
				t.Fatalf("%T does not implement %v", s, reflect.TypeFor[I]())
			}
			tt.fn(t, s, x)
		})
	}
}
