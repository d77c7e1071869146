package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

// runKeys checks the KeyStore contract.
func runKeys(t *testing.T, newStore func(t *testing.T) shortener.Store) {
	t.Run("Keys", func(t *testing.T) { testKeys(t, newStore(t)) })
}

func testKeys(t *testing.T, ks shortener.KeyStore) {
	k, _, err := shortener.NewAPIKey("ci pipeline", []shortener.Scope{shortener.ScopeCreate, shortener.ScopeStats}, base)
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := ks.ListKeys(ctx(t)); err != nil || len(keys) != 0 {
		t.Fatalf("ListKeys of an empty store: %v, %v", keys, err)
	}
	if err := ks.CreateKey(ctx(t), k); err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	got, err := ks.GetKey(ctx(t), k.ID)
	if err != nil || !sameKey(got, k) {
		t.Fatalf("GetKey = %+v, %v; want %+v", got, err, k)
	}
	dup := k
	dup.Name = "another"
	if err := ks.CreateKey(ctx(t), dup); !errors.Is(err, shortener.ErrConflict) {
		t.Errorf("CreateKey of a taken id: %v, want ErrConflict", err)
	}
	for _, id := range []string{"absentkey001", "", "key:x", k.ID[:11]} {
		if _, err := ks.GetKey(ctx(t), id); !errors.Is(err, shortener.ErrNotFound) {
			t.Errorf("GetKey(%q): %v, want ErrNotFound", id, err)
		}
	}
	// last_used only moves forward.
	used := base.Add(time.Hour)
	if err := ks.TouchKey(ctx(t), k.ID, used); err != nil {
		t.Fatalf("TouchKey: %v", err)
	}
	if err := ks.TouchKey(ctx(t), k.ID, base.Add(time.Minute)); err != nil {
		t.Fatalf("TouchKey earlier: %v", err)
	}
	if got, _ := ks.GetKey(ctx(t), k.ID); !got.LastUsed.Equal(used) || !sameKey(withLastUsed(got, time.Time{}), k) {
		t.Errorf("after TouchKey: %+v, want last used %v and nothing else changed", got, used)
	}
	if err := ks.TouchKey(ctx(t), "absentkey001", used); err != nil {
		t.Errorf("TouchKey of a missing key: %v", err)
	}
	if _, err := ks.GetKey(ctx(t), "absentkey001"); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("TouchKey created a key: %v", err)
	}
	// Keys are not links: listing links shows none of them, and a link
	// may have any id a key has.

	for i := range 5 {
		m, _, _ := shortener.NewAPIKey(fmt.Sprintf("key %d", i), []shortener.Scope{shortener.ScopeRead}, base)
		if err := ks.CreateKey(ctx(t), m); err != nil {
			t.Fatal(err)
		}

	}
	store := ks.(shortener.Store)
	mustCreate(t, store, link(k.ID[:10], "https://not-a-key.example/"))
	p, err := store.List(ctx(t), "", shortener.MaxPageSize)
	if err != nil || len(p.Links) != 1 || p.Links[0].ID != k.ID[:10] {
		t.Errorf("List with keys stored: %v, %v; want the one link", p.Links, err)
	}
	keys, err := ks.ListKeys(ctx(t))
	if err != nil || len(keys) != 6 || !slices.IsSortedFunc(keys, func(a, b shortener.APIKey) int { return compare(a.ID, b.ID) }) {
		t.Fatalf("ListKeys: %d keys, %v; want 6 by id", len(keys), err)
	}
	// Revocation.
	if err := ks.DeleteKey(ctx(t), k.ID); err != nil {
		t.Fatalf("DeleteKey: %v", err)
	}
	if _, err := ks.GetKey(ctx(t), k.ID); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("GetKey after DeleteKey: %v", err)
	}
	if err := ks.DeleteKey(ctx(t), k.ID); !errors.Is(err, shortener.ErrNotFound) {
		t.Errorf("second DeleteKey: %v, want ErrNotFound", err)
	}
	if _, err := store.Get(ctx(t), k.ID[:10]); err != nil {
		t.Errorf("revoking a key touched the link: %v", err)
	}
	if keys, _ := ks.ListKeys(ctx(t)); len(keys) != 5 {
		t.Errorf("%d keys after a revocation, want 5", len(keys))
	}
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func withLastUsed(k shortener.APIKey, t time.Time) shortener.APIKey { k.LastUsed = t; return k }

func sameKey(a, b shortener.APIKey) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Hash == b.Hash && slices.Equal(a.Scopes, b.Scopes) &&
		a.CreatedAt.Equal(b.CreatedAt) && a.LastUsed.Equal(b.LastUsed)
}
