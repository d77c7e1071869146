package shortener_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

func TestAppendForwardQuery(t *testing.T) {
	long := strings.Repeat("a", shortener.MaxForwardedURL)
	many := strings.Repeat("p=1&", 2*shortener.MaxForwardedParams)
	for _, tt := range []struct{ target, query, want string }{
		{"https://e.example/", "utm_source=mail", "https://e.example/?utm_source=mail"},
		{"https://e.example/p?a=1", "b=2&c=3", "https://e.example/p?a=1&b=2&c=3"},
		{"https://e.example/p?a=1#frag", "b=2", "https://e.example/p?a=1&b=2#frag"},
		{"https://e.example/p#frag", "b=2", "https://e.example/p?b=2#frag"},
		{"https://e.example/p?", "b=2", "https://e.example/p?b=2"},
		{"https://e.example/p?a=1&", "b=2", "https://e.example/p?a=1&b=2"},
		// Duplicate names: the target's value wins, the visitor's is dropped
		// (names compared percent-decoded); repeats of the visitor's own stay.
		{"https://e.example/p?ref=owner", "ref=visitor&x=1", "https://e.example/p?ref=owner&x=1"},
		{"https://e.example/p?ref=owner", "r%65f=visitor", "https://e.example/p?ref=owner"},
		{"https://e.example/p?a+b=1", "a%20b=2", "https://e.example/p?a+b=1"},
		{"https://e.example/p?flag", "flag=1&tag=a&tag=b", "https://e.example/p?flag&tag=a&tag=b"},
		{"https://e.example/", "a&&b=&=c", "https://e.example/?a&b=&=c"},
		{"https://e.example/", "", "https://e.example/"},
		{"https://e.example/", "&&", "https://e.example/"},
		// Bytes a Location may not carry are escaped; escapes pass as they are.
		{"https://e.example/", "q=a b\"<>ü", "https://e.example/?q=a%20b%22%3C%3E%C3%BC"},
		{"https://e.example/", "q=%41%zz", "https://e.example/?q=%41%zz"},
		{"https://e.example/", "q=" + long, "https://e.example/"},
		{"https://e.example/", "q=" + long + "&small=1", "https://e.example/?small=1"},
	} {
		got := string(shortener.AppendForwardQuery([]byte("prefix:"), []byte(tt.target), []byte(tt.query)))
		if got != "prefix:"+tt.want {
			t.Errorf("AppendForwardQuery(%q, %.40q) = %.80q, want %.80q", tt.target, tt.query, got, "prefix:"+tt.want)
		}
	}
	got := string(shortener.AppendForwardQuery(nil, []byte("https://e.example/"), []byte(many)))
	if n := strings.Count(got, "p=1"); n != shortener.MaxForwardedParams {
		t.Errorf("forwarded %d parameters, want the first %d", n, shortener.MaxForwardedParams)
	}
}

// Whatever the visitor sends, the result is the target with parameters
// added: it parses, keeps the target's scheme, host, path, fragment and
// parameters, and stays within the bound.
func FuzzAppendForwardQuery(f *testing.F) {
	f.Add("https://e.example/p?a=1#f", "b=2&a=3")
	f.Add("https://e.example/", "%zz&&=&x=%41")
	f.Add("http://e.example/?", "a\x00b=\xff")
	f.Fuzz(func(t *testing.T, target, query string) {
		tu, err := url.Parse(target)
		if err != nil || tu.Host == "" || strings.ContainsAny(target, " \x00\x7f") {
			return
		}
		got := shortener.AppendForwardQuery(nil, []byte(target), []byte(query))
		if len(got) > max(len(target), shortener.MaxForwardedURL) {
			t.Fatalf("%d bytes, over the bound", len(got))
		}
		gu, err := url.Parse(string(got))
		if err != nil {
			t.Fatalf("AppendForwardQuery(%q, %q) = %q, which does not parse: %v", target, query, got, err)
		}
		if gu.Scheme != tu.Scheme || gu.Host != tu.Host || gu.Path != tu.Path || gu.Fragment != tu.Fragment ||
			!strings.HasPrefix(gu.RawQuery, tu.RawQuery) {
			t.Fatalf("AppendForwardQuery(%q, %q) = %q: the target changed", target, query, got)
		}
	})
}

func BenchmarkAppendForwardQuery(b *testing.B) {
	dst := make([]byte, 0, 512)
	target := []byte("https://shop.example/product/123?ref=owner#reviews")
	query := []byte("utm_source=newsletter&utm_medium=email&utm_campaign=spring&ref=visitor")
	b.ReportAllocs()
	for b.Loop() {
		dst = shortener.AppendForwardQuery(dst[:0], target, query)
	}
}

func TestAppendForwardQueryDoesNotAllocate(t *testing.T) {
	dst := make([]byte, 0, 512)
	target := []byte("https://shop.example/p?ref=owner#top")
	query := []byte("utm_source=mail&ref=x&q=a%20b")
	if n := testing.AllocsPerRun(100, func() { dst = shortener.AppendForwardQuery(dst[:0], target, query) }); n != 0 {
		t.Errorf("%v allocations per call, want 0", n)
	}
}

func TestValidateTags(t *testing.T) {
	got, err := shortener.ValidateTags([]string{"b", "a", "b", "campaign:spring-2026", "ünï", "a/b+c@d.e_f"})
	if err != nil || !slices.Equal(got, []string{"a", "a/b+c@d.e_f", "b", "campaign:spring-2026", "ünï"}) {
		t.Errorf("ValidateTags = %q, %v", got, err)
	}
	if got, err := shortener.ValidateTags(nil); got != nil || err != nil {
		t.Errorf("ValidateTags(nil) = %q, %v", got, err)
	}
	for _, bad := range [][]string{{""}, {"a b"}, {"a,b"}, {"a\x00"}, {"\xff"}, {strings.Repeat("x", shortener.MaxTagLength+1)},
		slices.Repeat([]string{"x"}, shortener.MaxTags+1)} {
		if _, err := shortener.ValidateTags(bad); shortener.ErrorCode(err) != shortener.InvalidParameter {
			t.Errorf("ValidateTags(%.40q) = %v, want invalid_parameter", bad, err)
		}
	}
}

// An edit is validated as a create: the same errors for the same values.
func TestServiceUpdateValidatesAsCreate(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := shortener.NewService(openStore(t), shortener.Options{Now: func() time.Time { return now }})
	l, err := s.Create(context.Background(), shortener.CreateRequest{URL: "https://ok.example/", Slug: "target"})
	if err != nil {
		t.Fatal(err)
	}
	ptr := func(v string) *string { return &v }
	for _, tt := range []struct {
		create shortener.CreateRequest
		update shortener.LinkUpdate
	}{
		{shortener.CreateRequest{URL: "javascript:alert(1)"}, shortener.LinkUpdate{URL: ptr("javascript:alert(1)")}},
		{shortener.CreateRequest{URL: "http://127.0.0.1/"}, shortener.LinkUpdate{URL: ptr("http://127.0.0.1/")}},
		{shortener.CreateRequest{URL: "https://sho.rt/x", Host: "sho.rt"}, shortener.LinkUpdate{URL: ptr("https://sho.rt/x")}},
		{shortener.CreateRequest{URL: "https://ok.example/", ExpiresAt: now}, shortener.LinkUpdate{ExpiresAt: &now}},
		{shortener.CreateRequest{URL: "https://ok.example/", MaxVisits: -1}, shortener.LinkUpdate{MaxVisits: new(int64(-1))}},
		{shortener.CreateRequest{URL: "https://ok.example/", Tags: []string{"a b"}}, shortener.LinkUpdate{Tags: &[]string{"a b"}}},
	} {
		_, cerr := s.Create(context.Background(), tt.create)
		_, uerr := s.Update(context.Background(), "", l.ID, tt.update, tt.create.Host)
		if cerr == nil || shortener.ErrorCode(cerr) != shortener.ErrorCode(uerr) || shortener.ErrorMessage(cerr) != shortener.ErrorMessage(uerr) {
			t.Errorf("%+v: create error %v, update error %v; want the same error", tt.create, cerr, uerr)
		}
	}
	if got, err := s.Get(context.Background(), "", l.ID); err != nil || got.URL != "https://ok.example/" {
		t.Errorf("refused edits changed the link: %+v, %v", got, err)
	}
	if _, err := s.Update(context.Background(), "", "no/such", shortener.LinkUpdate{URL: ptr("https://x.example/")}, ""); err != shortener.ErrNotFound {
		t.Errorf("Update of a malformed id: %v", err)
	}
}

func TestServiceFind(t *testing.T) {
	store := openStore(t)
	s := shortener.NewService(store, shortener.Options{})
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var want []string     // newest first
	for i := range 2500 { // more than a store page
		l := shortener.Link{ID: fmt.Sprintf("f%05d", i), URL: "https://f.example/", CreatedAt: base.Add(time.Duration(i%1000) * time.Second)}
		if i%10 == 0 {
			l.Tags = []string{"tenth"}
		}
		if err := store.Create(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	// Newest first: by time, then id, descending.
	for tm := 999; tm >= 0; tm-- {
		for _, k := range []int{2000, 1000, 0} {
			if i := k + tm; i < 2500 && i%10 == 0 {
				want = append(want, fmt.Sprintf("f%05d", i))
			}
		}
	}
	var got []string
	cursor := ""
	for {
		p, err := s.Find(context.Background(), cursor, 37, shortener.ListFilter{Tag: "tenth"})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range p.Links {
			got = append(got, l.ID)
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	if !slices.Equal(got, want) {
		t.Errorf("Find(tag) listed %d links, want %d in order (first %v, want %v)", len(got), len(want), got[:min(5, len(got))], want[:5])
	}
	if _, err := s.Find(context.Background(), "", 0, shortener.ListFilter{}); shortener.ErrorCode(err) != shortener.InvalidParameter {
		t.Errorf("limit 0: %v", err)
	}
}

// Find lists oldest first with Oldest (the exact reverse of newest
// first, through cursors of its own), and State selects the links that
// still redirect at Now or no longer do (past their expiry or visit
// limit).
func TestServiceFindOrderAndState(t *testing.T) {
	store := openStore(t)
	s := shortener.NewService(store, shortener.Options{})
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now := base.Add(time.Hour)
	kinds := map[string]bool{} // id → expired at now
	for i := range 300 {
		l := shortener.Link{ID: fmt.Sprintf("o%04d", i), URL: "https://o.example/", CreatedAt: base.Add(time.Duration(i%70) * time.Second)}
		switch i % 4 {
		case 1:
			l.ExpiresAt = now.Add(-time.Minute) // expired
		case 2:
			l.ExpiresAt = now.Add(time.Minute) // not yet
		case 3:
			l.MaxVisits, l.Visits = 2, 2 // used up
		}
		kinds[l.ID] = i%4 == 1 || i%4 == 3
		if err := store.Create(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	all := func(f shortener.ListFilter, limit int) []string {
		t.Helper()
		var ids []string
		cursor := ""
		for {
			p, err := s.Find(context.Background(), cursor, limit, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range p.Links {
				ids = append(ids, l.ID)
			}
			if p.Next == "" {
				return ids
			}
			cursor = p.Next
		}
	}
	newest := all(shortener.ListFilter{Query: "o"}, 41)
	oldest := all(shortener.ListFilter{Query: "o", Oldest: true}, 29)
	if len(newest) != 300 || !equalReversed(oldest, newest) {
		t.Errorf("oldest first is not newest first reversed: %d, %d links; first %v, %v", len(newest), len(oldest), oldest[:3], newest[len(newest)-3:])
	}
	for _, tt := range []struct {
		state   shortener.LinkState
		expired bool
	}{{shortener.StateActive, false}, {shortener.StateExpired, true}} {
		got := all(shortener.ListFilter{State: tt.state, Now: now}, 50)
		if len(got) != 150 {
			t.Errorf("state %s: %d links, want 150", tt.state, len(got))
		}
		for _, id := range got {
			if kinds[id] != tt.expired {
				t.Errorf("state %s listed %s", tt.state, id)
			}
		}
	}
	p, err := s.Find(context.Background(), "", 10, shortener.ListFilter{State: "gone"})
	if shortener.ErrorCode(err) != shortener.InvalidParameter {
		t.Errorf("state gone: %v %v", p, err)
	}
	first, _ := s.Find(context.Background(), "", 5, shortener.ListFilter{Query: "o"})
	if _, err := s.Find(context.Background(), first.Next, 5, shortener.ListFilter{Query: "o", Oldest: true}); shortener.ErrorCode(err) != shortener.InvalidParameter {
		t.Errorf("a newest-first cursor in an oldest-first listing: %v", err)
	}
}

func equalReversed(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[len(b)-1-i] {
			return false
		}
	}
	return true
}
