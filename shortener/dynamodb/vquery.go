package dynamodb

import (
	"context"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/linkgate/linkgate/shortener"
)

// Statistics across links (GET /api/v1/stats): every link's rows of the
// months the range meets, in the state items and in the records not
// folded yet, read one fold range (a sixteenth of the ids) at a time so
// that a large month is never in memory whole, plus what this process
// holds and has not written. With a domain, the rows of that domain's
// links; with a tag, of the links that have it now (their items read,
// eventually consistent, 100 to a call). Rows of links deleted since
// count, as on pebble.

// rowRef is a row of a set.
type rowRef struct {
	set *deltaSet
	r   *row
}

// allCounts answers a query across links (q.ID == "").
func (s *Store) allCounts(ctx context.Context, q *shortener.StatsQuery) (shortener.VisitCounts, error) {
	c := shortener.NewVisitCounts(q)
	first, last := monthOfTime(q.From), monthOfTime(q.To.Add(-1))
	inRange := func(r *row) bool {
		if r.Month < first || r.Month > last {
			return false
		}
		if q.DomainSet {
			if d, _ := shortener.SplitKey(r.ID); d != q.Domain {
				return false
			}
		}
		return true
	}
	s.visits.run()
	items, err := s.batchGet(ctx, []string{keySeq, keyFold}, true)
	if err != nil {
		return c, err
	}
	numbered, _ := integer(items[keySeq], attrN)
	f, err := decodeFold(items[keyFold])
	if err != nil {
		return c, err
	}
	// Records after folded: those through target (a fold in progress)
	// may already be in state items stamped target; those after it are
	// in none.
	target := max(f.target, f.folded)
	inFold, err := s.headers(ctx, f.folded+1, target)
	if err != nil {
		return c, err
	}
	after, err := s.headers(ctx, target+1, numbered)
	if err != nil {
		return c, err
	}
	committed := map[int64]bool{}
	for _, hs := range [][]header{inFold, after} {
		for _, h := range hs {
			committed[h.n] = true
		}
	}
	small := map[int64]*deltaSet{}
	for r := range foldRanges {
		if err := ctx.Err(); err != nil {
			return c, err
		}
		var keys []string
		for m, mm := range f.months {
			if m < first || m > last {
				continue
			}
			per := 1 << (mm.k - minShardBits)
			for sh := r * per; sh < (r+1)*per; sh++ {
				keys = append(keys, stateKey(m, mm.k, sh))
			}
		}
		states, err := s.readState(ctx, keys)
		if err != nil {
			return c, err
		}
		var refs []rowRef
		for _, st := range states {
			for i := range st.set.rows {
				if row := &st.set.rows[i]; inRange(row) {
					refs = append(refs, rowRef{st.set, row})
				}
			}
		}
		folding, err := s.rangeDeltas(ctx, inFold, r, small)
		if err != nil {
			return c, err
		}
		for i := range folding.rows {
			row := &folding.rows[i]
			if !inRange(row) {
				continue
			}
			if mm, ok := f.months[row.Month]; ok && states[stateKey(row.Month, mm.k, shardOf(keyHash(row.ID), mm.k))].upto >= target {
				continue // folded into its state item already
			}
			refs = append(refs, rowRef{folding, row})
		}
		unfolded, err := s.rangeDeltas(ctx, after, r, small)
		if err != nil {
			return c, err
		}
		for i := range unfolded.rows {
			if row := &unfolded.rows[i]; inRange(row) {
				refs = append(refs, rowRef{unfolded, row})
			}
		}
		if err := s.countRows(ctx, q, refs, &c); err != nil {
			return c, err
		}
	}
	var refs []rowRef
	s.visits.localRows(func(r *row) bool { return inRange(r) }, func(n int64) bool { return committed[n] }, func(set *deltaSet, r *row) {
		refs = append(refs, rowRef{set, r})
	})
	return c, s.countRows(ctx, q, refs, &c)
}

// countRows adds the rows to c and their links' series to c.Links; with a
// tag, only the rows of links that have it.
func (s *Store) countRows(ctx context.Context, q *shortener.StatsQuery, refs []rowRef, c *shortener.VisitCounts) error {
	if q.Tag != "" {
		var ids []string
		for _, ref := range refs {
			ids = append(ids, ref.r.ID)
		}
		items, err := s.batchGet(ctx, ids, false)
		if err != nil {
			return err
		}
		refs = slices.DeleteFunc(refs, func(ref rowRef) bool {
			item := items[ref.r.ID]
			if item == nil {
				return true
			}
			created, _ := integer(item, AttrCreatedAt)
			tags, _ := item[AttrTags].(*types.AttributeValueMemberSS)
			return !sameLink(ref.r.CreatedAt, created) || tags == nil || !slices.Contains(tags.Value, q.Tag)
		})
	}
	for _, ref := range refs {
		n := ref.set.rangeCounts(ref.r, q, c)
		if n != (shortener.PeopleBots{}) {
			l := c.Links[ref.r.ID]
			l.Add(n)
			c.Links[ref.r.ID] = l
		}
	}
	return nil
}
