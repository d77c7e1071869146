package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

// Edits are part of the Store contract: every store edits links in place
// (shortener.Updater), and decorators pass edits through.
var updateTests = []optionalTest[shortener.Updater]{
	{"UpdateEachField", testUpdateFields},
	{"UpdateMissing", testUpdateMissing},
	{"UpdateKeepsVisits", testUpdateKeepsVisits},
	{"ConcurrentUpdatesOfOtherFields", testUpdateConcurrent},
	{"UpdateRacingDelete", testUpdateDeleteRace},
}

func runUpdates(t *testing.T, newStore func(t *testing.T) shortener.Store) {
	runOptional(t, newStore, updateTests)
}

func ptr[T any](v T) *T { return &v }

func mustUpdate(t *testing.T, u shortener.Updater, id string, up shortener.LinkUpdate) shortener.Link {
	t.Helper()
	l, err := u.Update(ctx(t), id, up)
	if err != nil {
		t.Fatalf("Update(%q): %v", id, err)
	}
	return l
}

func testUpdateFields(t *testing.T, s shortener.Store, u shortener.Updater) {
	want := shortener.Link{ID: "edited0001", URL: "https://before.example/", CreatedAt: base, Visits: 4}
	mustCreate(t, s, want)
	steps := []struct {
		name string
		up   shortener.LinkUpdate
	}{
		{"url", shortener.LinkUpdate{URL: ptr("https://after.example/p?q=1#f")}},
		{"expiry", shortener.LinkUpdate{ExpiresAt: ptr(base.Add(50 * 365 * 24 * time.Hour))}},
		{"limit", shortener.LinkUpdate{MaxVisits: ptr(int64(1000))}},
		{"tags", shortener.LinkUpdate{Tags: ptr([]string{"campaign:spring", "mail", "ünï"})}},
		{"forward", shortener.LinkUpdate{ForwardQuery: ptr(shortener.ForwardOn)}},
		{"all at once", shortener.LinkUpdate{URL: ptr("https://third.example/"), ExpiresAt: ptr(base.Add(time.Hour * 24 * 365 * 60)),
			MaxVisits: ptr(int64(7)), Tags: ptr([]string{"x"}), ForwardQuery: ptr(shortener.ForwardOff)}},
		{"clear", shortener.LinkUpdate{ExpiresAt: ptr(time.Time{}), MaxVisits: ptr(int64(0)), Tags: ptr([]string{}), ForwardQuery: ptr(shortener.ForwardDefault)}},
		{"nothing", shortener.LinkUpdate{URL: ptr("https://third.example/")}},
	}
	for _, st := range steps {
		st.up.Apply(&want)
		got := mustUpdate(t, u, want.ID, st.up)
		if !Equal(got, want) {
			t.Errorf("%s: Update returned\n%s, want\n%s", st.name, fmtLink(got), fmtLink(want))
		}
		if got := mustGet(t, s, want.ID); !Equal(got, want) {
			t.Errorf("%s: Get after Update\n%s, want\n%s", st.name, fmtLink(got), fmtLink(want))
		}
	}
	p, err := s.List(ctx(t), "", 10)
	if err != nil || len(p.Links) != 1 || !Equal(p.Links[0], want) {
		t.Errorf("List after updates = %v, %v; want the edited link", p.Links, err)
	}
	// Tags set at create time round-trip too.
	tagged := shortener.Link{ID: "tagged0001", URL: "https://t.example/", CreatedAt: base, Tags: []string{"a", "b-c"}, ForwardQuery: shortener.ForwardOn}
	mustCreate(t, s, tagged)
	wantLink(t, mustGet(t, s, tagged.ID), tagged)
}

func testUpdateMissing(t *testing.T, s shortener.Store, u shortener.Updater) {
	mustCreate(t, s, link("present001", "https://p.example/"))
	for _, id := range []string{"absent0001", "present00", ""} {
		if _, err := u.Update(ctx(t), id, shortener.LinkUpdate{URL: ptr("https://x.example/")}); !errors.Is(err, shortener.ErrNotFound) {
			t.Errorf("Update(%q) = %v, want ErrNotFound", id, err)
		}
	}
	if _, err := s.Get(ctx(t), "absent0001"); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("Get after an Update of a missing link: %v, want ErrNotFound (an update creates nothing)", err)
	}
	// A deleted link stays deleted.
	if err := s.Delete(ctx(t), "present001"); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Update(ctx(t), "present001", shortener.LinkUpdate{Tags: ptr([]string{"t"})}); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("Update after Delete = %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx(t), "present001"); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("Get after Delete and Update: %v, want ErrNotFound", err)
	}
}

func testUpdateKeepsVisits(t *testing.T, s shortener.Store, u shortener.Updater) {
	vs := s
	l := shortener.Link{ID: "counted001", URL: "https://c.example/", CreatedAt: base, MaxVisits: 100}
	mustCreate(t, s, l)
	addVisits(t, vs, shortener.VisitDelta{ID: l.ID, Stats: stats(3, 0, "2026-03-14", "news.example", "Firefox"), Limited: true, CreatedAt: base.Unix()})
	got := mustUpdate(t, u, l.ID, shortener.LinkUpdate{URL: ptr("https://moved.example/"), MaxVisits: ptr(int64(50))})
	if got.Visits != 3 || got.MaxVisits != 50 || !got.CreatedAt.Equal(base) {
		t.Errorf("Update returned Visits %d, MaxVisits %d, CreatedAt %s; want 3, 50, %s", got.Visits, got.MaxVisits, got.CreatedAt, base)
	}
	wantStats(t, mustStats(t, vs, l.ID), stats(3, 0, "2026-03-14", "news.example", "Firefox"))
	// Visits recorded after the edit still count for the link (their
	// CreatedAt, which ties them to this link, did not change).
	addVisits(t, vs, shortener.VisitDelta{ID: l.ID, Stats: stats(2, 0, "2026-03-14", "news.example", "Firefox"), Limited: true, CreatedAt: base.Unix()})
	if n := mustGet(t, s, l.ID).Visits; n != 5 {
		t.Errorf("Visits after the edit and 2 more visits = %d, want 5", n)
	}
}

func testUpdateConcurrent(t *testing.T, s shortener.Store, u shortener.Updater) {
	mustCreate(t, s, link("racing0001", "https://r.example/0"))
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	wg.Go(func() {
		for i := 1; i <= n; i++ {
			if _, err := u.Update(ctx(t), "racing0001", shortener.LinkUpdate{URL: ptr(fmt.Sprintf("https://r.example/%d", i))}); err != nil {
				errs <- err
			}
		}
	})
	wg.Go(func() {
		for i := 1; i <= n; i++ {
			if _, err := u.Update(ctx(t), "racing0001", shortener.LinkUpdate{Tags: ptr([]string{fmt.Sprintf("t%02d", i)})}); err != nil {
				errs <- err
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Update: %v", err)
	}
	got := mustGet(t, s, "racing0001")
	if got.URL != fmt.Sprintf("https://r.example/%d", n) || !slices.Equal(got.Tags, []string{fmt.Sprintf("t%02d", n)}) {
		t.Errorf("after concurrent edits of the URL and the tags: %s, want both last edits", fmtLink(got))
	}
}

func testUpdateDeleteRace(t *testing.T, s shortener.Store, u shortener.Updater) {
	for i := range 10 {
		id := fmt.Sprintf("uprace%04d", i)
		mustCreate(t, s, link(id, "https://race.example/"))
		var upErr, delErr error
		var wg sync.WaitGroup
		wg.Go(func() { _, upErr = u.Update(ctx(t), id, shortener.LinkUpdate{URL: ptr("https://edited.example/")}) })
		wg.Go(func() { delErr = s.Delete(ctx(t), id) })
		wg.Wait()
		if delErr != nil {
			t.Errorf("%s: Delete: %v", id, delErr)
		}
		if upErr != nil && !errors.Is(upErr, shortener.ErrNotFound) {
			t.Errorf("%s: Update: %v, want nil or ErrNotFound", id, upErr)
		}
		if l, err := s.Get(ctx(t), id); !errors.Is(err, shortener.ErrNotFound) {
			t.Errorf("%s: after Delete and a racing Update, Get = %s, %v; want ErrNotFound", id, fmtLink(l), err)
		}
	}
}
