package shortener

import (
	"cmp"
	"container/heap"
	"context"
	"encoding/base64"
	"errors"
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
	Query string // links whose id or URL contains it, compared as strings.EqualFold does (hasSubstringFold)
	// Domain, if set, selects the links of that domain ("": the
	// default); nil: every domain.
	Domain *string
	// CreatedAfter and CreatedBefore bound the creation time: after ≤
	// CreatedAt < before, so that consecutive windows never overlap.
	// Links without a creation time (items of the seed's app) match
	// neither bound.
	CreatedAfter, CreatedBefore time.Time
	// State, if set, selects the links that still redirect at Now
	// (StateActive) or no longer do (StateExpired: past their expiry or
	// visit limit).
	State LinkState
	Now   time.Time
	// Oldest lists oldest first instead of newest first.
	Oldest bool
}

// LinkState is ListFilter.State.
type LinkState string

// The states a listing may select.
const (
	StateActive  LinkState = "active"
	StateExpired LinkState = "expired"
)

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
	case f.State != "" && f.State != StateActive && f.State != StateExpired:
		return Errorf(InvalidParameter, "state must be active or expired")
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
	if f.State != "" && l.Expired(f.Now) != (f.State == StateExpired) {
		return false
	}
	return f.Query == "" || hasSubstringFold(l.ID, f.Query) || hasSubstringFold(l.URL, f.Query)
}

// hasSubstringFold reports whether sub is in s: a window of s of as many
// bytes as sub, starting with sub's first byte (an ASCII letter in either
// case), that strings.EqualFold finds equal to it; it does not allocate.
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

// Finder is the Store extension that finds a page of links in
// ListFilter's order by an index of its own instead of Service.Find's
// scan of every link. after is the position to continue from (nil: the
// start), as ParseFindCursor read it; the links are as stored (Service
// applies fromStore); Page.Next is a FindCursor. It must answer what
// Find's scan would: every link that passes f, in the same order.
// Decorators implement it by passing the call on, answering ErrNoFinder
// when the store they wrap has no Find: the Service then scans.
type Finder interface {
	Find(ctx context.Context, after *Link, limit int, f ListFilter) (Page, error)
}

// ErrNoFinder is a decorating Finder's answer over a store without one.
var ErrNoFinder = errors.New("the store finds no links by itself")

// Newer orders links newest first (see newer); stores that implement
// Finder keep this order.
func Newer(a, b *Link) int { return newer(a, b) }

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

// FindCursor is a position in the newest-first order ("n") or the
// oldest-first one ("o"): the letter, Unix-seconds "." key,
// base64url-encoded. Stores that find links themselves (Finder) use it.
func FindCursor(l *Link, oldest bool) string {
	var t int64
	if !l.CreatedAt.IsZero() {
		t = l.CreatedAt.Unix()
	}
	o := "n"
	if oldest {
		o = "o"
	}
	return base64.RawURLEncoding.EncodeToString([]byte(o + strconv.FormatInt(t, 10) + "." + l.Key()))
}

// ParseFindCursor reads a FindCursor of the order asked for: the link at
// that position (its CreatedAt, Domain and ID).
func ParseFindCursor(c string, oldest bool) (Link, error) {
	bad := Errorf(InvalidParameter, "invalid cursor")
	o := byte('n')
	if oldest {
		o = 'o'
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 2 || b[0] != o {
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
// A store that finds links by an index of its own (Finder: pebble)
// answers from it. Otherwise Find reads the whole store through List for
// every page, keeping only the best limit+1 links in memory: a page costs
// a scan of every link, its memory is bounded by limit. Links that are created, edited or deleted during a listing are
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
		c, err := ParseFindCursor(cursor, f.Oldest)
		if err != nil {
			return Page{}, err
		}
		after = &c
	}
	if f.State != "" && f.Now.IsZero() {
		f.Now = time.Now()
	}
	if fs, ok := s.store.(Finder); ok {
		p, err := fs.Find(ctx, after, limit, f)
		switch {
		case errors.Is(err, ErrNoFinder): // scan below
		case err != nil:
			return Page{}, storeError("find links", err)
		default:
			for i := range p.Links {
				p.Links[i] = fromStore(p.Links[i])
			}
			return p, nil
		}
	}
	dir := 1
	if f.Oldest {
		dir = -1
	}
	best := &topLinks{max: limit + 1, dir: dir}
	next := ""
	for {
		p, err := s.store.List(ctx, next, MaxPageSize)
		if err != nil {
			return Page{}, storeError("list links", err)
		}
		for i := range p.Links {
			l := &p.Links[i]
			*l = fromStore(*l)
			if (after == nil || dir*newer(after, l) < 0) && f.Match(l) {
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
	slices.SortFunc(links, func(a, b Link) int { return dir * newer(&a, &b) })
	var out Page
	if len(links) > limit {
		links = links[:limit]
		out.Next = FindCursor(&links[limit-1], f.Oldest)
	}
	out.Links = links
	return out, nil
}

// topLinks keeps the max newest links offered: a heap whose root is the
// oldest kept.
type topLinks struct {
	links []Link
	max   int
	dir   int // 1: newest first; -1: oldest first
}

func (t *topLinks) Len() int           { return len(t.links) }
func (t *topLinks) Less(i, j int) bool { return t.dir*newer(&t.links[i], &t.links[j]) > 0 }
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
	if t.dir*newer(&l, &t.links[0]) < 0 {
		t.links[0] = l
		heap.Fix(t, 0)
	}
}
