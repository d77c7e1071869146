package pebble_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/pebble"
)

// scanOnly hides the store's Find: the Service then scans every link,
// which is what the index must agree with.
type scanOnly struct{ shortener.Store }

// pages lists every link passing f, page by page.
func pages(t testing.TB, s *shortener.Service, f shortener.ListFilter, limit int) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for range 10_000 {
		p, err := s.Find(context.Background(), cursor, limit, f)
		if err != nil {
			t.Fatalf("find %+v: %v", f, err)
		}
		for _, l := range p.Links {
			ids = append(ids, l.Key())
		}
		if p.Next == "" {
			return ids
		}
		cursor = p.Next
	}
	t.Fatal("endless listing")
	return nil
}

// The index answers every filter, in both orders and at every page size,
// exactly as the scan of every link does — also after edits (tags, URL
// and expiry), deletes, imports, visits reaching a link's limit, and once
// more after Open rebuilds it: dropped (a store written before the
// index), as 02908ad left it (marker "built", no expiry or trigram
// records), as a410a59 did ("built2", no trigram records), and as a410a59
// did when it opened a newer store and wrote links (both markers).
func TestListIndexAgreesWithScan(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "links")
	store, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now := base.Add(50 * time.Second)
	domains := []string{"", "go.example", "sho.example"}
	tags := []string{"red", "green", "blue"}
	paths := []string{"", "Path/A1", "path/b2?q=Xy", "café/ÉTÉ", "KELVIN-\u212a", "a/Path/a1", "xss\u212akk", "xſtraße/Σίσυφος", "bad/\xffé\xc3/x", "r\u00e9sum\ufffd/ok"}
	randomLink := func(i int) shortener.Link {
		l := shortener.Link{ID: fmt.Sprintf("r%03d", i), URL: fmt.Sprintf("https://s%d.example/%s", rng.IntN(5), paths[rng.IntN(len(paths))]),
			CreatedAt: base.Add(time.Duration(rng.IntN(100)) * time.Second)}
		if rng.IntN(10) == 0 {
			l.CreatedAt = time.Time{} // the seed's items have none
		}
		for _, tag := range tags {
			if rng.IntN(3) == 0 {
				l.Tags = append(l.Tags, tag)
			}
		}
		if rng.IntN(4) == 0 {
			l.ExpiresAt = base.Add(time.Duration(rng.IntN(100)) * time.Second)
		}
		if rng.IntN(5) == 0 { // a visit limit, reached or not
			l.MaxVisits, l.Visits = int64(1+rng.IntN(3)), int64(rng.IntN(4))
		}
		if d := domains[rng.IntN(3)]; d != "" {
			l.ID = d + "/" + l.ID
		}
		return l
	}
	for i := range 400 {
		if err := store.Create(ctx, randomLink(i)); err != nil {
			t.Fatal(err)
		}
	}
	var recs []shortener.LinkRecord
	for i := 400; i < 450; i++ {
		recs = append(recs, shortener.LinkRecord{Link: randomLink(i)})
	}
	if _, err := store.ImportRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	for i := range 60 { // edits: tags, URL and expiry
		l := randomLink(i)
		id := l.ID
		if _, err := store.Get(ctx, id); err != nil {
			continue // another domain this time
		}
		tg := l.Tags
		if _, err := store.Update(ctx, id, shortener.LinkUpdate{Tags: &tg, URL: &l.URL, ExpiresAt: &l.ExpiresAt}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 60; i < 100; i++ { // deletes
		for _, d := range domains {
			store.Delete(ctx, shortener.LinkKey(d, fmt.Sprintf("r%03d", i)))
		}
	}
	for i := 80; i < 90; i++ { // created again, at another time
		l := randomLink(i)
		l.CreatedAt = base.Add(time.Duration(200+i) * time.Second)
		store.Delete(ctx, l.ID)
		if err := store.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	// Visits reach the limit of some links: they expire with no write of
	// the link (its 'e' record cannot tell).
	for i := 100; i < 200; i++ {
		for _, d := range domains {
			key := shortener.LinkKey(d, fmt.Sprintf("r%03d", i))
			if l, err := store.Get(ctx, key); err == nil && l.MaxVisits > 0 {
				if err := store.AddVisits(ctx, shortener.NewVisitBatch(shortener.VisitDelta{ID: key, Limited: true, Stats: shortener.VisitStats{Total: 2}})); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// Every link has exactly its records: one in the order, one in its
	// domain's, one per tag, one if it can expire, one per trigram of its
	// id and URL; none of a link deleted, of a tag removed or of a URL
	// replaced.
	wantRecords := 0
	all, err := shortener.NewService(scanOnly{store}, shortener.Options{}).Find(ctx, "", shortener.MaxPageSize, shortener.ListFilter{Query: "r"})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range all.Links {
		wantRecords += 2 + len(l.Tags) + len(foldedTrigrams(l.ID, l.URL))
		if !l.ExpiresAt.IsZero() || l.MaxVisits > 0 {
			wantRecords++
		}
	}
	if n, err := pebble.ListIndexRecords(store); err != nil || n != wantRecords {
		t.Errorf("%d index records (%v), want %d", n, err, wantRecords)
	}

	str := func(s string) *string { return &s }
	filters := []shortener.ListFilter{
		{Query: "r"},
		{Tag: "red"},
		{Tag: "green", Domain: str("go.example")},
		{Domain: str("")},
		{Domain: str("sho.example"), Query: "s3"},
		{CreatedAfter: base.Add(20 * time.Second), CreatedBefore: base.Add(70 * time.Second)},
		{Tag: "blue", CreatedAfter: base.Add(30 * time.Second)},
		{CreatedBefore: base.Add(10 * time.Second)},
		{State: shortener.StateExpired, Now: now},
		{State: shortener.StateExpired, Now: base.Add(-time.Hour)}, // only visit limits
		{State: shortener.StateExpired, Now: now, Domain: str("go.example")},
		{State: shortener.StateExpired, Now: now, Query: "s2", CreatedAfter: base.Add(30 * time.Second)},
		{State: shortener.StateExpired, Now: now, Tag: "blue"},
		{State: shortener.StateActive, Now: now},
		{State: shortener.StateActive, Now: now, Tag: "red"},
		{Query: "nothing matches this"},
		{Query: "PATH/a"},
		{Query: "path", Tag: "red"},
		{Query: "S3.ex", Domain: str("go.example")},
		{Query: "h/b2?", State: shortener.StateExpired, Now: now},
		{Query: "ath/a1", CreatedAfter: base.Add(40 * time.Second)},
		{Query: "https://s1.example/path/"}, // more trigrams than a search walks
		{Query: "r01"},
		{Query: "2?"},  // too short for a trigram
		{Query: "été"}, // not ASCII: É is é
		{Query: "kelvin-k"},
		{Query: "xſſkkk"}, // ſ is s and K (Kelvin) is k: "xss\u212akk", 8 bytes each, though "kkk" is not in it
		{Query: "example/café"},
		{Query: "xyz"},
		{Query: "XSTRAẞE"},    // ſ is S, ß is ẞ: 9 bytes each
		{Query: "/ΣΊΣΥΦΟΣ"},   // σ, ς and Σ are one letter
		{Query: "\xfeÉ\xc3/"}, // a byte that is not UTF-8 matches any other
		{Query: "é\xc3/X"},    // … and the head of a rune of the URL
		{Query: "\xa9\xc3/x"}, // … and its tail
		{Query: "m\ufffd/O"},  // U+FFFD matches the byte 0xff too
		{Query: "UM\xff"},     // and the byte U+FFFD's first
		{Query: "ÉS", Tag: "red"},
	}
	check := func(t *testing.T) {
		indexed := shortener.NewService(store, shortener.Options{})
		scanned := shortener.NewService(scanOnly{store}, shortener.Options{})
		for _, f := range filters {
			for _, oldest := range []bool{false, true} {
				f.Oldest = oldest
				want := pages(t, scanned, f, 1000)
				for _, limit := range []int{1, 7, 100} {
					if got := pages(t, indexed, f, limit); !slices.Equal(got, want) {
						t.Errorf("%+v, %d a page: the index listed %d links, the scan %d\n%v\n%v", f, limit, len(got), len(want), got[:min(8, len(got))], want[:min(8, len(want))])
					}
				}
			}
		}
	}
	t.Run("maintained", check)

	reopen := func(t *testing.T, older func() error) {
		t.Helper()
		if err := older(); err != nil {
			t.Fatal(err)
		}
		store.Close()
		if store, err = pebble.Open(dir, pebble.Options{}); err != nil {
			t.Fatal(err)
		}
		if n, err := pebble.ListIndexRecords(store); err != nil || n != wantRecords {
			t.Errorf("rebuilt: %d index records (%v), want %d", n, err, wantRecords)
		}
	}
	for _, c := range []struct {
		name  string
		older func() error
	}{
		{"rebuilt", func() error { return pebble.DropListIndex(store) }},
		{"rebuilt from 02908ad", func() error { return pebble.OlderListIndex(store, 1, false) }},
		{"rebuilt from a410a59", func() error { return pebble.OlderListIndex(store, 2, false) }},
		{"rebuilt after a410a59 wrote", func() error { return pebble.OlderListIndex(store, 2, true) }},
		{"reindexed from 043328d", func() error { return pebble.OlderListIndex(store, 3, false) }},
		{"reindexed after 043328d wrote", func() error { return pebble.OlderListIndex(store, 3, true) }},
	} {
		reopen(t, c.older)
		t.Run(c.name, check)
	}
	store.Close()
}

// foldedTrigrams is the set of every three bytes of id (without its
// domain) and url once each rune (a byte that is not UTF-8: U+FFFD) is
// written as the smallest rune that strings.EqualFold finds equal to it,
// an ASCII letter in lower case.
func foldedTrigrams(key, url string) map[string]bool {
	_, id := shortener.SplitKey(key)
	set := map[string]bool{}
	for _, s := range []string{id, url} {
		var folded []byte
		for _, r := range s {
			folded = utf8.AppendRune(folded, smallestFold(r))
		}
		for i := 0; i+3 <= len(folded); i++ {
			set[string(folded[i:i+3])] = true
		}
	}
	return set
}

var smallestFolds = map[rune]rune{}

// smallestFold finds the smallest rune that strings.EqualFold finds equal
// to r by trying every rune from 0.
func smallestFold(r rune) rune {
	if m, ok := smallestFolds[r]; ok {
		return m
	}
	m := r
	for x := rune(0); x < r; x++ {
		if utf8.ValidRune(x) && strings.EqualFold(string(x), string(r)) {
			m = x
			break
		}
	}
	if 'A' <= m && m <= 'Z' {
		m = unicode.ToLower(m)
	}
	smallestFolds[r] = m
	return m
}

// A search answers from the index what the scan of every link does,
// whatever the links' URLs and the query hold: every case of a letter,
// runes that fold into ASCII letters (ſ, the Kelvin sign), bytes that are
// not UTF-8, a query cutting runes in two.
func FuzzListIndexSearch(f *testing.F) {
	for _, c := range []struct{ a, b, q string }{
		{"https://s.example/Path/7", "https://s.example/xss\u212akk", "xſſkkk"},
		{"https://s.example/café/ÉTÉ", "https://s.example/xſtraße", "XSTRAẞE"},
		{"https://s.example/bad/\xffé\xc3/x", "https://s.example/r\u00e9sum\ufffd/ok", "\xa9\xc3/x"},
		{"https://s.example/Σίσυφος", "https://s.example/σίσυφος", "/ΣΊΣΥΦΟΣ"},
		{"https://s.example/ab", "https://s.example/AB", "b"},
	} {
		f.Add(c.a, c.b, c.q)
	}
	f.Fuzz(func(t *testing.T, a, b, q string) {
		if len(q) > shortener.MaxQueryLength {
			return
		}
		store, err := pebble.Open("links", pebble.Options{FS: vfs.NewMem(), NoIndex: true, MinFreeBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		ctx := context.Background()
		base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		for i, u := range []string{a, b, strings.ToUpper(a), strings.ToLower(b)} {
			if err := store.Create(ctx, shortener.Link{ID: fmt.Sprintf("r%d", i), URL: u, CreatedAt: base.Add(time.Duration(i) * time.Second)}); err != nil {
				t.Fatal(err)
			}
		}
		f := shortener.ListFilter{Query: q}
		want := pages(t, shortener.NewService(scanOnly{store}, shortener.Options{}), f, 10)
		if got := pages(t, shortener.NewService(store, shortener.Options{}), f, 10); !slices.Equal(got, want) {
			t.Fatalf("%q in %q, %q: the index listed %v, the scan %v", q, a, b, got, want)
		}
	})
}

// A page reads at most its budget of links (pebble.FindReads; 5 here):
// one that reaches it is cut short, with Scanned and a cursor that goes
// on from the last link read, and the pages together list what the scan
// does. A search of 1–2 bytes that matches nothing ends after as many
// pages as the links take budgets.
func TestFindBudget(t *testing.T) {
	store, err := pebble.Open("links", pebble.WithFindReads(pebble.Options{FS: vfs.NewMem(), NoIndex: true, MinFreeBytes: -1}, 5))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 48 {
		l := shortener.Link{ID: fmt.Sprintf("r%03d", i), URL: fmt.Sprintf("https://s%d.example/p/%d", i%4, i), CreatedAt: base.Add(time.Duration(i/2) * time.Second)}
		if i%3 == 0 {
			l.Tags = []string{"red"}
		}
		if i == 7 || i == 40 {
			l.URL += "/zq"
		}
		if i%5 == 0 {
			l.ExpiresAt = base.Add(10 * time.Second)
		}
		if err := store.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	indexed := shortener.NewService(store, shortener.Options{})
	scanned := shortener.NewService(scanOnly{store}, shortener.Options{})
	for _, c := range []struct {
		f     shortener.ListFilter
		pages int // with 10 a page, newest first
	}{
		{shortener.ListFilter{Query: "nothing"}, 1},                                                      // its trigrams' lists are empty: nothing read
		{shortener.ListFilter{Query: "zz"}, 10},                                                          // 48 links read, 5 a page
		{shortener.ListFilter{Query: "ZQ"}, 10},                                                          // r040 on page 2, r007 on page 9
		{shortener.ListFilter{Query: "/p/1"}, 3},                                                         // 11 links, each read: 5, 5, 1
		{shortener.ListFilter{Query: "s1", Tag: "red"}, 4},                                               // 16 links with the tag read
		{shortener.ListFilter{Query: "p", State: shortener.StateExpired, Now: base.Add(time.Minute)}, 2}, // 10 links that can expire
		{shortener.ListFilter{Query: "z", Tag: "red"}, 4},
		{shortener.ListFilter{}, 10}, // 5 a page (FindReads is never under MaxPageSize)
	} {
		for _, oldest := range []bool{false, true} {
			f := c.f
			f.Oldest = oldest
			want := pages(t, scanned, f, 1000)
			got, cursor, n := []string(nil), "", 0
			for ; n == 0 || cursor != ""; n++ {
				p, err := indexed.Find(ctx, cursor, 10, f)
				if err != nil {
					t.Fatal(err)
				}
				if p.Scanned != 0 && (p.Scanned != 5 || p.Next == "") {
					t.Errorf("%+v: a page cut short after %d links, next %q", f, p.Scanned, p.Next)
				}
				if p.Scanned == 0 && p.Next != "" && len(p.Links) != 10 {
					t.Errorf("%+v: a page of %d links, not cut short, with a next page", f, len(p.Links))
				}
				for _, l := range p.Links {
					got = append(got, l.Key())
				}
				cursor = p.Next
			}
			if !slices.Equal(got, want) {
				t.Errorf("%+v: the index listed %v, the scan %v", f, got, want)
			}
			if !oldest && n != c.pages {
				t.Errorf("%+v: %d pages, want %d", f, n, c.pages)
			}
		}
	}
}
