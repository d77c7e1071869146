package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/linkgate/linkgate/shortener"
)

// errInvalid matches any error with Code InvalidParameter.
var errInvalid = &shortener.Error{Code: shortener.InvalidParameter}

// runRegistry checks the DomainStore contract: the domain registry.
func runRegistry(t *testing.T, newStore func(t *testing.T) shortener.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s shortener.Store)
	}{
		{"RegistryAddListDelete", testRegistry},
		{"RegistryConcurrentAdds", testRegistryConcurrent},
		{"RegistryBounded", testRegistryBounded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newStore(t)) })
	}
}

func mustDomains(t *testing.T, s shortener.DomainStore) []shortener.Domain {
	t.Helper()
	ds, err := s.Domains(ctx(t))
	if err != nil {
		t.Fatalf("Domains: %v", err)
	}
	return ds
}

func sameDomains(got, want []shortener.Domain) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].Host != want[i].Host || got[i].Scheme != want[i].Scheme || !got[i].CreatedAt.Equal(want[i].CreatedAt) {
			return false
		}
	}
	return true
}

func testRegistry(t *testing.T, s shortener.Store) {
	if ds := mustDomains(t, s); len(ds) != 0 {
		t.Fatalf("Domains of an empty store = %v", ds)
	}
	long := strings.Repeat("d", shortener.MaxDomainLength-5) + ":8080"
	want := []shortener.Domain{ // by Host
		{Host: "go.example.com", Scheme: "https", CreatedAt: base},
		{Host: "links.example.org:8443", Scheme: "http", CreatedAt: base.Add(1e9)},
		{Host: long, Scheme: "https", CreatedAt: base.Add(2e9)},
		{Host: "xn--r8jz45g.xn--zckzah", Scheme: "https", CreatedAt: base.Add(3e9)},
	}
	for _, i := range []int{2, 0, 3, 1} {
		if err := s.AddDomain(ctx(t), want[i]); err != nil {
			t.Fatalf("AddDomain(%q): %v", want[i].Host, err)
		}
	}
	want[0], want[1], want[2] = want[2], want[0], want[1] // "ddd…" < "go." < "links."
	if got := mustDomains(t, s); !sameDomains(got, want) {
		t.Fatalf("Domains = %+v\nwant %+v", got, want)
	}
	again := want[1]
	again.Scheme = "http"
	if err := s.AddDomain(ctx(t), again); !errors.Is(err, shortener.ErrConflict) {
		t.Errorf("AddDomain of a registered host: %v, want ErrConflict", err)
	}
	for _, bad := range []shortener.Domain{{Host: "", Scheme: "https"}, {Host: "UPPER.example", Scheme: "https"},
		{Host: "a/b", Scheme: "https"}, {Host: "ok.example", Scheme: "ftp"}} {
		if err := s.AddDomain(ctx(t), bad); !errors.Is(err, errInvalid) {
			t.Errorf("AddDomain(%+v): %v, want InvalidParameter", bad, err)
		}
	}
	// Registry entries are not links: no link lists, none is found.
	if p, err := s.List(ctx(t), "", shortener.MaxPageSize); err != nil || len(p.Links) != 0 {
		t.Errorf("List with only domains = %d links, %v", len(p.Links), err)
	}
	if err := s.DeleteDomain(ctx(t), "go.example.com"); err != nil {
		t.Fatalf("DeleteDomain: %v", err)
	}
	if err := s.DeleteDomain(ctx(t), "go.example.com"); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("DeleteDomain again: %v, want ErrNotFound", err)
	}
	for _, h := range []string{"absent.example", "", "a/b"} {
		if err := s.DeleteDomain(ctx(t), h); !errors.Is(err, shortener.ErrNotFound) {
			t.Errorf("DeleteDomain(%q): %v, want ErrNotFound", h, err)
		}
	}
	want = append(want[:1], want[2:]...)
	if got := mustDomains(t, s); !sameDomains(got, want) {
		t.Errorf("after delete: Domains = %+v\nwant %+v", got, want)
	}
	// Added again after a delete, it is a new entry.
	if err := s.AddDomain(ctx(t), shortener.Domain{Host: "go.example.com", Scheme: "http", CreatedAt: base}); err != nil {
		t.Errorf("AddDomain after delete: %v", err)
	}
}

// testRegistryConcurrent adds distinct domains at once, and one domain
// from several callers: every distinct one is kept, the contested one
// once (one nil, the others ErrConflict).
func testRegistryConcurrent(t *testing.T, s shortener.Store) {
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, 2*n)
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs[i] = s.AddDomain(ctx(t), shortener.Domain{Host: fmt.Sprintf("d%d.example", i), Scheme: "https", CreatedAt: base})
		}()
		go func() {
			defer wg.Done()
			errs[n+i] = s.AddDomain(ctx(t), shortener.Domain{Host: "contested.example", Scheme: "https", CreatedAt: base})
		}()
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case i >= n && errors.Is(err, shortener.ErrConflict):
		case err == nil:
			if i >= n {
				won++
			}
		default:
			t.Errorf("AddDomain %d: %v", i, err)
		}
	}
	if won != 1 {
		t.Errorf("the contested domain was added %d times, want 1", won)
	}
	if got := mustDomains(t, s); len(got) != n+1 {
		t.Errorf("Domains = %d entries, want %d: %+v", len(got), n+1, got)
	}
}

// testRegistryBounded fills the registry: one more is refused.
func testRegistryBounded(t *testing.T, s shortener.Store) {
	if testing.Short() {
		t.Skip("fills the registry")
	}
	const workers = 8 // a remote store's round trips, overlapped
	var wg sync.WaitGroup
	errs := make([]error, shortener.MaxRegisteredDomains)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < shortener.MaxRegisteredDomains; i += workers {
				errs[i] = s.AddDomain(ctx(t), shortener.Domain{Host: fmt.Sprintf("d%04d.example", i), Scheme: "https", CreatedAt: base})
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("AddDomain %d: %v", i, err)
		}
	}
	err := s.AddDomain(ctx(t), shortener.Domain{Host: "one-more.example", Scheme: "https", CreatedAt: base})
	if !errors.Is(err, errInvalid) {
		t.Errorf("AddDomain beyond %d: %v, want InvalidParameter", shortener.MaxRegisteredDomains, err)
	}
	if got := mustDomains(t, s); len(got) != shortener.MaxRegisteredDomains {
		t.Errorf("Domains = %d entries", len(got))
	}
}
