package bolt_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/bolt"
	"github.com/linkgate/linkgate/gateway/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) gateway.Store {
		s, err := bolt.Open(filepath.Join(t.TempDir(), "sub", "gw.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// Entries survive reopening the file.
func TestDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gw.db")
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Put(t.Context(), gateway.KindRoute, "1", []byte(`{"uri":"/a"}`), 0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := s.Get(t.Context(), gateway.KindRoute, "1")
	if err != nil || string(e.Value) != `{"uri":"/a"}` {
		t.Fatalf("after reopen: %+v %v", e, err)
	}
	if _, _, err := s.Put(t.Context(), gateway.KindRoute, "2", []byte(`{}`), 0); err != nil {
		t.Fatal(err)
	}
	e2, _ := s.Get(t.Context(), gateway.KindRoute, "2")
	if e2.ModifiedIndex <= e.ModifiedIndex {
		t.Errorf("revision went back after reopen: %d then %d", e.ModifiedIndex, e2.ModifiedIndex)
	}
}

// A watcher that falls behind gets a fresh listing (a reset) instead of the
// changes it missed; the changes queued after the reset, which the listing
// already holds, must not be replayed over it: no entry may go back to an
// older version, as a deleted route coming back for a moment would.
func TestSlowWatcherNeverGoesBack(t *testing.T) {
	s, err := bolt.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	listed, blocked, release, last := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	seen := map[string]int64{} // key → the last ModifiedIndex the watcher saw
	var back []string
	updates, sawLast := 0, false
	done := make(chan error, 1)
	go func() {
		done <- s.Watch(ctx, func(u gateway.Update) {
			switch updates++; updates {
			case 1: // the listing Watch starts with
				close(listed)
			case 2: // the first change: stall here
				close(blocked)
				<-release
			}
			for _, e := range u.Entries {
				if e.ModifiedIndex < seen[e.Key()] {
					back = append(back, fmt.Sprintf("%s: @%d after @%d", e.Key(), e.ModifiedIndex, seen[e.Key()]))
				}
				seen[e.Key()] = e.ModifiedIndex
				if e.ID == "last" && !sawLast {
					sawLast = true
					close(last)
				}
			}
		})
	}()
	put := func(id string) {
		t.Helper()
		if _, _, err := s.Put(t.Context(), gateway.KindRoute, id, []byte(`{"uri":"/`+id+`"}`), 0); err != nil {
			t.Fatal(err)
		}
	}
	<-listed
	put("0")
	<-blocked
	for i := range 400 { // more than the watcher's buffer: a reset, then more changes
		put(fmt.Sprint(i % 3))
	}
	close(release)
	put("last")
	<-last
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(back) > 0 {
		t.Errorf("the watcher saw %d entries go back to older versions, first:\n%s", len(back), back[0])
	}
	for _, id := range []string{"0", "1", "2"} {
		e, err := s.Get(t.Context(), gateway.KindRoute, id)
		if err != nil || seen[e.Key()] != e.ModifiedIndex {
			t.Errorf("routes/%s: the watcher has @%d, the store @%d (%v)", id, seen[e.Key()], e.ModifiedIndex, err)
		}
	}
}
