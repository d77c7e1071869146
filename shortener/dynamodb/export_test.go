package dynamodb

import "context"

// Tick does the visit log's background work due at its clock's time, as
// the background loop does every second (stores with ManualVisits).
func (s *Store) Tick(ctx context.Context) { s.visits.tick(ctx) }

// StopFoldAfter makes the store's folds fail after fold range r, as a
// process that dies half-way would (-1: never).
func (s *Store) StopFoldAfter(r int, err error) {
	s.visits.foldHook = func(got int) error {
		if got == r {
			return err
		}
		return nil
	}
}

// AfterFoldRange calls fn after each fold range r of the store's folds;
// an error it returns stops the fold there.
func (s *Store) AfterFoldRange(fn func(r int) error) { s.visits.foldHook = fn }

// SetStateItemBytes makes state items aim at n bytes until the test ends,
// so that tests grow a month's state past its shards with little data.
func SetStateItemBytes(t interface{ Cleanup(func()) }, n int) {
	old := stateItemBytes
	stateItemBytes = n
	t.Cleanup(func() { stateItemBytes = old })
}

// Internal names the tests use to look at the table.
const (
	ReservedPrefix = reservedPrefix
	KeySeq         = keySeq
	KeyFold        = keyFold
	AttrN          = attrN
	AttrLease      = attrLease
	FoldLease      = foldLease
)
