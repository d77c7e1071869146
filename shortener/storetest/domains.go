package storetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/shortener"
)

// Links of several domains (shortener/domain.go): a store keeps each
// under its key, the bare id on the default domain and domain/id on
// another, and the same id on two domains is two links.

// domainKeys are one id on the default domain and on two others (one
// with a port), plus the longest key there can be.
var domainKeys = []string{
	"same-slug",
	shortener.LinkKey("go.example.com", "same-slug"),
	shortener.LinkKey("sho.rt:8080", "same-slug"),
	shortener.LinkKey(strings.Repeat("d", shortener.MaxDomainLength), strings.Repeat("z", shortener.MaxIDLength)),
}

func runDomains(t *testing.T, newStore func(t *testing.T) shortener.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s shortener.Store)
	}{
		{"DomainsSameSlug", testDomainsSameSlug},
		{"DomainsDeleteLeavesOthers", testDomainsDelete},
		{"DomainsList", testDomainsList},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newStore(t)) })
	}
	runOptional(t, newStore, []optionalTest[shortener.Updater]{{"DomainsUpdateOne", testDomainsUpdate}})
	runOptional(t, newStore, []optionalTest[shortener.VisitStore]{{"DomainsVisitsApart", testDomainsVisits}})
}

func createDomainLinks(t *testing.T, s shortener.Store) map[string]shortener.Link {
	t.Helper()
	want := map[string]shortener.Link{}
	for _, k := range domainKeys {
		l := link(k, "https://target.example/"+k)
		mustCreate(t, s, l)
		want[k] = l
	}
	return want
}

func testDomainsSameSlug(t *testing.T, s shortener.Store) {
	want := createDomainLinks(t, s)
	for k, l := range want {
		wantLink(t, mustGet(t, s, k), l)
	}
	// Each key is taken on its own domain only.
	for _, k := range domainKeys {
		if err := s.Create(ctx(t), link(k, "https://second.example/")); !errors.Is(err, shortener.ErrConflict) {
			t.Errorf("Create(%q) again = %v, want ErrConflict", k, err)
		}
	}
	for _, k := range []string{"other.example/same-slug", "go.example.com/same-slu", "example.com/same-slug"} {
		if _, err := s.Get(ctx(t), k); !errors.Is(err, shortener.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want ErrNotFound", k, err)
		}
	}
}

func testDomainsDelete(t *testing.T, s shortener.Store) {
	want := createDomainLinks(t, s)
	gone := domainKeys[1]
	if err := s.Delete(ctx(t), gone); err != nil {
		t.Fatalf("Delete(%q): %v", gone, err)
	}
	if _, err := s.Get(ctx(t), gone); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("Get(%q) after its Delete = %v, want ErrNotFound", gone, err)
	}
	for k, l := range want {
		if k != gone {
			wantLink(t, mustGet(t, s, k), l)
		}
	}
	// The default domain's link goes alone too.
	if err := s.Delete(ctx(t), domainKeys[0]); err != nil {
		t.Fatal(err)
	}
	wantLink(t, mustGet(t, s, domainKeys[2]), want[domainKeys[2]])
	mustCreate(t, s, link(gone, "https://again.example/"))
}

func testDomainsList(t *testing.T, s shortener.Store) {
	want := createDomainLinks(t, s)
	seen := map[string]int{}
	cursor := ""
	for range 10 {
		p, err := s.List(ctx(t), cursor, 1)
		if err != nil {
			t.Fatalf("List(%q, 1): %v", cursor, err)
		}
		for _, l := range p.Links {
			seen[l.ID]++
			if w, ok := want[l.ID]; ok {
				wantLink(t, l, w)
			}
		}
		if cursor = p.Next; cursor == "" {
			break
		}
	}
	for k := range want {
		if seen[k] != 1 {
			t.Errorf("key %q listed %d times, want once", k, seen[k])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("listed %v, want the keys %q", seen, domainKeys)
	}
}

func testDomainsUpdate(t *testing.T, s shortener.Store, up shortener.Updater) {
	want := createDomainLinks(t, s)
	to := "https://edited.example/"
	got, err := up.Update(ctx(t), domainKeys[2], shortener.LinkUpdate{URL: &to})
	if err != nil {
		t.Fatalf("Update(%q): %v", domainKeys[2], err)
	}
	edited := want[domainKeys[2]]
	edited.URL = to
	wantLink(t, got, edited)
	want[domainKeys[2]] = edited
	for k, l := range want {
		wantLink(t, mustGet(t, s, k), l)
	}
}

func testDomainsVisits(t *testing.T, s shortener.Store, vs shortener.VisitStore) {
	createDomainLinks(t, s)
	st := stats(4, 1, "2026-03-14", "r.example", "Firefox")
	addVisits(t, vs, shortener.VisitDelta{ID: domainKeys[1], Stats: st, CreatedAt: base.Unix()})
	wantStats(t, mustStats(t, vs, domainKeys[1]), st)
	for _, k := range []string{domainKeys[0], domainKeys[2]} {
		wantStats(t, mustStats(t, vs, k), shortener.VisitStats{})
	}
	if err := s.Delete(ctx(t), domainKeys[0]); err != nil {
		t.Fatal(err)
	}
	wantStats(t, mustStats(t, vs, domainKeys[1]), st)
}
