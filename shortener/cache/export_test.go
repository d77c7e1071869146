package cache

// RefreshesInFlight is how many background reloads are running: tests
// that move a clock wait for it to be 0 before moving it again.
func (c *Store) RefreshesInFlight() int64 { return c.refreshing.Load() }
