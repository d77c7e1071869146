package bolt

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkgate/linkgate/gateway"
)

// A watcher that fell behind must get every change in order until it
// re-lists, never one with earlier ones missing. notify used to throw a
// full queue's changes away while the watcher could still be receiving
// from it, so the watcher could take one from the middle: a node served
// its old configuration plus that one change ("node 0 served at revision
// 737 a configuration the store did not hold then", TestGatewayAdminSoakBolt),
// or notify could block for good when the watcher took the last one.
//
// Each round holds the watcher while the writer fills its queue, then
// lets it go and writes once more while the watcher, after a random
// delay about as long as a write, receives again: the write finding the
// queue full and the watcher's receiving overlap in many rounds. Rounds
// go on until the watcher has re-listed 16 times (100 rounds at most).
func TestSlowWatcherMissesNoChange(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.db.NoSync = true // writes as fast as the watcher's queue can take them
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	type round struct {
		at      int64         // hold the watcher at this revision
		held    chan struct{} // closed by the watcher once held
		release chan struct{} // closed by the writer
		awake   atomic.Bool   // set by the watcher once released
		spin    time.Duration // the watcher's delay after that
	}
	rounds := make(chan *round, 1)
	var cur *round
	var last int64 // the watcher's revision: its listing's or its last change's
	var gaps []string
	var relists atomic.Int64 // the first listing is not one
	relists.Store(-1)
	done := make(chan error, 1)
	go func() {
		done <- s.Watch(ctx, func(u gateway.Update) {
			if u.Reset {
				relists.Add(1)
			} else if u.Revision != last+1 { // one writer, no NextID: revisions are consecutive
				gaps = append(gaps, fmt.Sprintf("change @%d after @%d", u.Revision, last))
			}
			last = u.Revision
			if cur == nil {
				select {
				case cur = <-rounds:
				default:
				}
			}
			if cur != nil && last >= cur.at {
				r := cur
				cur = nil
				close(r.held)
				<-r.release
				r.awake.Store(true)
				for end := time.Now().Add(r.spin); time.Now().Before(end); {
				}
			}
		})
	}()
	var rev int64
	put := func() {
		t.Helper()
		e, _, err := s.Put(t.Context(), gateway.KindRoute, fmt.Sprint(rev%8), []byte(`{"uri":"/x"}`), 0)
		if err != nil {
			t.Fatal(err)
		}
		rev = e.ModifiedIndex
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; relists.Load() < 16 && i < 100; i++ {
		r := &round{at: rev + 1, held: make(chan struct{}), release: make(chan struct{})}
		rounds <- r
		put()
		<-r.held
		start := time.Now()
		for range watchQueue { // the queue is now full
			put()
		}
		per := time.Since(start) / watchQueue
		r.spin = per/2 + time.Duration(rng.Int64N(int64(2*per)+1))
		close(r.release)
		for !r.awake.Load() {
		}
		put() // finds the queue full, unless the watcher was quicker
	}
	// The watcher has had every change once it holds at the last one.
	r := &round{at: rev + 1, held: make(chan struct{}), release: make(chan struct{})}
	rounds <- r
	put()
	<-r.held
	close(r.release)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if relists.Load() == 0 {
		t.Fatal("the watcher never fell behind: the test checked nothing")
	}
	if len(gaps) > 0 {
		t.Errorf("%d times (in %d re-listings) the watcher got a change with earlier ones missing, first: %s", len(gaps), relists.Load(), gaps[0])
	}
	t.Logf("%d re-listings", relists.Load())
}
