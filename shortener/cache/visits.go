package cache

import (
	"context"

	"github.com/linkgate/linkgate/shortener"
)

var (
	_ shortener.Store           = (*Store)(nil)
	_ shortener.VisitRangeStore = (*Store)(nil)
)

// AddVisits adds the batch to the store, then drops the cached links with
// a visit limit that it touched, so their next read sees the new count:
// the Service enforces limits on the stored count plus the visits not yet
// flushed, and a stale cached count would let a link overshoot its limit
// for up to TTL. Links without a limit stay cached (their count does not
// affect redirects).
func (c *Store) AddVisits(ctx context.Context, batch *shortener.VisitBatch) error {
	err := c.Store.AddVisits(ctx, batch)
	for i := range batch.Links {
		id := batch.Links[i].ID
		if e, ok := c.cache.GetIfPresent(id); ok && e.found && e.link.MaxVisits > 0 {
			c.cache.Invalidate(id)
		}
	}
	return err
}

// VisitStats is not cached: statistics are read rarely, and must be fresh.
func (c *Store) VisitStats(ctx context.Context, id string) (shortener.VisitStats, error) {
	return c.Store.VisitStats(ctx, id)
}

// VisitCounts is not cached either.
func (c *Store) VisitCounts(ctx context.Context, q shortener.StatsQuery) (shortener.VisitCounts, error) {
	rs, ok := c.Store.(shortener.VisitRangeStore)
	if !ok {
		return shortener.VisitCounts{}, shortener.ErrNoRanges
	}
	return rs.VisitCounts(ctx, q)
}
