package shortener

import (
	"cmp"
	"container/heap"
	"context"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxQueryLength bounds ListFilter.Query, in bytes.
const MaxQueryLength = 256

// ListFilter selects links for Service.Find. Zero fields select
// everything.
type ListFilter struct {
	Tag   string // links with this tag (exact)
	Query string // links whose id or URL contains it, ASCII letters compared case-insensitively
	// Domain, if set, selects the links of that domain ("": the
	// default); nil: every domain.
	Domain *string
	// CreatedAfter and CreatedBefore bound the creation time: after ≤
	// CreatedAt < before, so that consecutive windows never overlap.
	// Links without a creation time (items of the seed's app) match
	// neither bound.
	CreatedAfter, CreatedBefore time.Time
}

// Validate checks the filter. The error has Code InvalidParameter.
func (f ListFilter) Validate() error {
	switch {
	case f.Tag != "" && validateTag(f.Tag) != nil:
		return validateTag(f.Tag)
	case f.Domain != nil && *f.Domain != "" && !ValidDomain(*f.Domain):
		return Errorf(InvalidParameter, "invalid domain %q", *f.Domain)
	case len(f.Query) > MaxQueryLength:
		return Errorf(InvalidParameter, "q is at most %d bytes", MaxQueryLength)
	case !f.CreatedAfter.IsZero() && !f.CreatedBefore.IsZero() && !f.CreatedAfter.Before(f.CreatedBefore):
		return Errorf(InvalidParameter, "created_after must be before created_before")
	}
	return nil
}

// Match reports whether l passes the filter.
func (f ListFilter) Match(l *Link) bool {
	if f.Domain != nil && l.Domain != *f.Domain {
		return false
	}
	if f.Tag != "" {
		if _, found := slices.BinarySearch(l.Tags, f.Tag); !found {
			return false
		}
	}
	if !f.CreatedAfter.IsZero() && (l.CreatedAt.IsZero() || l.CreatedAt.Before(f.CreatedAfter)) {
		return false
	}
	if !f.CreatedBefore.IsZero() && (l.CreatedAt.IsZero() || !l.CreatedAt.Before(f.CreatedBefore)) {
		return false
	}
	return f.Query == "" || hasSubstringFold(l.ID, f.Query) || hasSubstringFold(l.URL, f.Query)
}

// hasSubstringFold reports whether sub is in s, ASCII letters compared
// without case; it does not allocate.
func hasSubstringFold(s, sub string) bool {
	if len(sub) == 0 {
		return true
	}
	first := lower(sub[0])
	for i := 0; i+len(sub) <= len(s); i++ {
		if lower(s[i]) == first && strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// newer orders links newest first: by creation time, then by id, then by
// domain (all descending), so every link has one place in the order and a
// cursor (a position in it) stays valid while links are created, edited or
// deleted.
func newer(a, b *Link) int {
	if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
		return c
	}
	if c := cmp.Compare(b.ID, a.ID); c != 0 {
		return c
	}
	return cmp.Compare(b.Domain, a.Domain)
}

// findCursor is a position in the newest-first order: "n" Unix-seconds
// "." key, base64url-encoded.
func findCursor(l *Link) string {
	var t int64
	if !l.CreatedAt.IsZero() {
		t = l.CreatedAt.Unix()
	}
	return base64.RawURLEncoding.EncodeToString([]byte("n" + strconv.FormatInt(t, 10) + "." + l.Key()))
}

func parseFindCursor(c string) (Link, error) {
	bad := Errorf(InvalidParameter, "invalid cursor")
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 2 || b[0] != 'n' {
		return Link{}, bad
	}
	ts, key, ok := strings.Cut(string(b[1:]), ".")
	t, err := strconv.ParseInt(ts, 10, 64)
	if !ok || err != nil || !ValidKey(key) {
		return Link{}, bad
	}
	l := fromStore(Link{ID: key})
	if t != 0 {
		l.CreatedAt = time.Unix(t, 0).UTC()
	}
	return l, nil
}

// Find returns one page of the links that pass f, newest first (see
// newer), of at most limit links. The cursor is "" or a Page.Next that
// Find returned (with any filter: it is a position in the order).
//
// It reads the whole store through List for every page, keeping only the
// best limit+1 links in memory: a page costs a scan of every link
// (docs/api.md gives the cost on each store), its memory is bounded by
// limit. Links that are created, edited or deleted during a listing are
// listed or not, every other link exactly once.
func (s *Service) Find(ctx context.Context, cursor string, limit int, f ListFilter) (Page, error) {
	if limit < 1 || limit > MaxPageSize {
		return Page{}, Errorf(InvalidParameter, "limit must be between 1 and %d", MaxPageSize)
	}
	if err := f.Validate(); err != nil {
		return Page{}, err
	}
	var after *Link
	if cursor != "" {
		c, err := parseFindCursor(cursor)
		if err != nil {
			return Page{}, err
		}
		after = &c
	}
	best := &topLinks{max: limit + 1}
	next := ""
	for {
		p, err := s.store.List(ctx, next, MaxPageSize)
		if err != nil {
			return Page{}, storeError("list links", err)
		}
		for i := range p.Links {
			l := &p.Links[i]
			*l = fromStore(*l)
			if (after == nil || newer(after, l) < 0) && f.Match(l) {
				best.offer(*l)
			}
		}
		if p.Next == "" {
			break
		}
		next = p.Next
		if err := ctx.Err(); err != nil {
			return Page{}, storeError("list links", err)
		}
	}
	links := best.links
	slices.SortFunc(links, func(a, b Link) int { return newer(&a, &b) })
	var out Page
	if len(links) > limit {
		links = links[:limit]
		out.Next = findCursor(&links[limit-1])
	}
	out.Links = links
	return out, nil
}

// topLinks keeps the max newest links offered: a heap whose root is the
// oldest kept.
type topLinks struct {
	links []Link
	max   int
}

func (t *topLinks) Len() int           { return len(t.links) }
func (t *topLinks) Less(i, j int) bool { return newer(&t.links[i], &t.links[j]) > 0 }
func (t *topLinks) Swap(i, j int)      { t.links[i], t.links[j] = t.links[j], t.links[i] }
func (t *topLinks) Push(x any)         { t.links = append(t.links, x.(Link)) }
func (t *topLinks) Pop() any {
	l := t.links[len(t.links)-1]
	t.links = t.links[:len(t.links)-1]
	return l
}

func (t *topLinks) offer(l Link) {
	if len(t.links) < t.max {
		heap.Push(t, l)
		return
	}
	if newer(&l, &t.links[0]) < 0 {
		t.links[0] = l
		heap.Fix(t, 0)
	}
}
