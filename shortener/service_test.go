package shortener_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/pebble/pebbletest"
)

func openStore(t *testing.T) shortener.Store {
	s, _ := pebbletest.Open(t)
	return s
}

// failing is a Store whose every call fails, as an unreachable backend does.
type failing struct{ shortener.Store }

var errDown = errors.New("connection refused")

func (failing) Create(context.Context, shortener.Link) error { return errDown }
func (failing) Get(context.Context, string) (shortener.Link, error) {
	return shortener.Link{}, errDown
}
func (failing) AppendURL(_ context.Context, dst, _ []byte) ([]byte, shortener.Link, error) {
	return dst, shortener.Link{}, errDown
}
func (failing) Ping(context.Context) error { return errDown }

func ids(list ...string) func() (string, error) {
	return func() (string, error) {
		id := list[0]
		if len(list) > 1 {
			list = list[1:]
		}
		return id, nil
	}
}

func TestServiceCreateRetriesTakenIDs(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	if err := store.Create(ctx, shortener.Link{ID: "taken00001", URL: "https://a.example/"}); err != nil {
		t.Fatal(err)
	}
	s := shortener.NewService(store, shortener.Options{NewID: ids("taken00001", "taken00001", "fresh00001")})
	l, err := s.Create(ctx, shortener.CreateRequest{URL: "https://b.example/"})
	if err != nil || l.ID != "fresh00001" {
		t.Fatalf("Create = %+v, %v; want id fresh00001", l, err)
	}
	// When every attempt collides the client gets 503-class Unavailable.
	s = shortener.NewService(store, shortener.Options{NewID: ids("taken00001"), IDAttempts: 3})
	_, err = s.Create(ctx, shortener.CreateRequest{URL: "https://b.example/"})
	if shortener.ErrorCode(err) != shortener.Unavailable {
		t.Fatalf("all ids taken: %v, want Unavailable", err)
	}
}

func TestServiceCreate(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 500, time.UTC)
	s := shortener.NewService(openStore(t), shortener.Options{Now: func() time.Time { return now }})
	ctx := context.Background()
	tests := []struct {
		name string
		req  shortener.CreateRequest
		want shortener.Code
	}{
		{"plain", shortener.CreateRequest{URL: "https://ok.example/"}, ""},
		{"slug", shortener.CreateRequest{URL: "https://ok.example/", Slug: "my-slug"}, ""},
		{"slug taken", shortener.CreateRequest{URL: "https://ok.example/", Slug: "my-slug"}, shortener.Conflict},
		{"bad slug", shortener.CreateRequest{URL: "https://ok.example/", Slug: "a/b"}, shortener.InvalidSlug},
		{"reserved slug", shortener.CreateRequest{URL: "https://ok.example/", Slug: "metrics"}, shortener.InvalidSlug},
		{"bad url", shortener.CreateRequest{URL: "javascript:alert(1)"}, shortener.SchemeNotAllowed},
		{"self", shortener.CreateRequest{URL: "https://me.example/x", Host: "me.example"}, shortener.SelfReference},
		{"expiry past", shortener.CreateRequest{URL: "https://ok.example/", ExpiresAt: now.Add(-time.Minute)}, shortener.InvalidParameter},
		{"expiry now", shortener.CreateRequest{URL: "https://ok.example/", ExpiresAt: now}, shortener.InvalidParameter},
		{"expiry future", shortener.CreateRequest{URL: "https://ok.example/", ExpiresAt: now.Add(time.Hour)}, ""},
		{"negative visits", shortener.CreateRequest{URL: "https://ok.example/", MaxVisits: -1}, shortener.InvalidParameter},
		{"visits", shortener.CreateRequest{URL: "https://ok.example/", MaxVisits: 3}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := s.Create(ctx, tt.req)
			if got := shortener.ErrorCode(err); got != tt.want {
				t.Fatalf("Create: %v (code %q), want code %q", err, got, tt.want)
			}
			if err != nil {
				return
			}
			if !l.CreatedAt.Equal(now.Truncate(time.Second)) || l.URL != tt.req.URL || l.MaxVisits != tt.req.MaxVisits {
				t.Errorf("link %+v does not reflect request %+v", l, tt.req)
			}
			got, err := s.Get(ctx, "", l.ID)
			if err != nil || got.URL != tt.req.URL {
				t.Errorf("Get(%q) = %+v, %v", l.ID, got, err)
			}
		})
	}
}

func TestServiceResolveEnforcesExpiry(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	clock := now
	store := openStore(t)
	s := shortener.NewService(store, shortener.Options{Now: func() time.Time { return clock }})
	ctx := context.Background()
	l, err := s.Create(ctx, shortener.CreateRequest{URL: "https://soon.example/", ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve(ctx, "", l.ID); err != nil {
		t.Fatalf("Resolve before expiry: %v", err)
	}
	clock = now.Add(time.Hour)
	if _, err := s.Resolve(ctx, "", l.ID); !errors.Is(err, shortener.ErrExpired) {
		t.Fatalf("Resolve at expiry: %v, want ErrExpired", err)
	}
	// The API view still shows it.
	if _, err := s.Get(ctx, "", l.ID); err != nil {
		t.Fatalf("Get of an expired link: %v", err)
	}
	if err := store.Create(ctx, shortener.Link{ID: "usedup0001", URL: "https://u.example/", MaxVisits: 1, Visits: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve(ctx, "", "usedup0001"); !errors.Is(err, shortener.ErrExpired) {
		t.Fatalf("Resolve at visit limit: %v, want ErrExpired", err)
	}
	for _, id := range []string{"unknown001", "", "a/b", "../etc/passwd"} {
		if _, err := s.Resolve(ctx, "", id); !errors.Is(err, shortener.ErrNotFound) {
			t.Errorf("Resolve(%q): %v, want ErrNotFound", id, err)
		}
	}
}

func TestServiceStoreFailureIsUnavailable(t *testing.T) {
	s := shortener.NewService(failing{openStore(t)}, shortener.Options{})
	ctx := context.Background()
	_, err := s.Create(ctx, shortener.CreateRequest{URL: "https://ok.example/"})
	if shortener.ErrorCode(err) != shortener.Unavailable || !errors.Is(err, errDown) {
		t.Errorf("Create on a failing store: %v", err)
	}
	if _, err := s.Resolve(ctx, "", "abcdefghij"); shortener.ErrorCode(err) != shortener.Unavailable {
		t.Errorf("Resolve on a failing store: %v", err)
	}
	if err := s.Ready(ctx); shortener.ErrorCode(err) != shortener.Unavailable {
		t.Errorf("Ready on a failing store: %v", err)
	}
	if shortener.ErrorMessage(err) == errDown.Error() {
		t.Error("store error details leak into the client message")
	}
}

func TestServiceList(t *testing.T) {
	s := shortener.NewService(openStore(t), shortener.Options{})
	ctx := context.Background()
	for _, limit := range []int{0, -1, shortener.MaxPageSize + 1} {
		if _, err := s.List(ctx, "", limit); shortener.ErrorCode(err) != shortener.InvalidParameter {
			t.Errorf("List limit %d: %v", limit, err)
		}
	}
}
