package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
)

// PowerLoss is a store whose storage can lose power, for the power-loss
// case: a file system that keeps apart what was synced (pebble's
// vfs.NewCrashableMem and its CrashClone, for instance).
type PowerLoss struct {
	// Open opens the store on the storage as it is now.
	Open func() (shortener.Store, error)
	// Cut cuts the power: from then on, Open sees only what had been
	// synced before the call. The store opened before keeps running on
	// the storage it had (its later writes are lost).
	Cut func()
}

// RunPowerLoss runs the power-loss case rounds times, with a new random
// seed each time (logged, for a replay with CheckPowerLoss).
func RunPowerLoss(t *testing.T, p func() PowerLoss, rounds int) {
	for range rounds {
		seed := rand.Uint64()
		if err := CheckPowerLoss(p(), seed); err != nil {
			t.Fatalf("power loss (seed %d): %v", seed, err)
		}
	}
}

// CheckPowerLoss runs one round of the power-loss case and returns the
// first promise it finds broken: random concurrent creates, deletes and
// visit flushes, the power cut at a random moment, the store reopened
// from what was synced. Then every create acknowledged before the cut is
// there with its exact URL, no link whose delete was acknowledged is back,
// and each link's visit total is at least what was acknowledged flushed
// and at most what was sent: its total and, on a store that keeps
// statistics by range, its day's count, every link's count across links
// and their sum.
func CheckPowerLoss(p PowerLoss, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	s, err := p.Open()
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	ctx := context.Background()
	var vs shortener.VisitStore = s
	// Links whose visits are counted; never deleted.
	counted := make([]string, 16)
	for i := range counted {
		counted[i] = fmt.Sprintf("visited%03d", i)
		if err := s.Create(ctx, link(counted[i], "https://v.example/"+counted[i])); err != nil {
			s.Close()
			return fmt.Errorf("create %s: %w", counted[i], err)
		}
	}

	var mu sync.Mutex
	acked := map[string]string{}  // id → URL of every acknowledged create
	var ackedIDs []string         // the same ids, for deleters to pick from
	deleting := map[string]bool{} // a delete was started
	deleted := map[string]bool{}  // a delete was acknowledged
	sent := map[string]int64{}    // visits handed to AddVisits
	flushed := map[string]int64{} // visits AddVisits acknowledged

	stop := make(chan struct{})
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
		}
		return false
	}
	// The power is cut by a creator right after a create is acknowledged,
	// the moment that tells a synced create from one still in a buffer,
	// with mu held: what was recorded until then was acknowledged before
	// the cut and must survive it.
	var cutNow atomic.Bool
	cutDone := make(chan struct{})
	var mustHave map[string]string
	var mustNotHave []string
	atLeast := map[string]int64{}
	cut := func() {
		p.Cut()
		mustHave = map[string]string{}
		for id, url := range acked {
			if !deleting[id] {
				mustHave[id] = url
			}
		}
		for id := range deleted {
			mustNotHave = append(mustNotHave, id)
		}
		for id, n := range flushed {
			atLeast[id] = n
		}
		close(cutDone)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; !stopped(); i++ {
				id := fmt.Sprintf("p%d-%d-%d", seed%1000, w, i)
				url := fmt.Sprintf("https://p.example/%d/%d?seed=%d", w, i, seed)
				if s.Create(ctx, link(id, url)) == nil {
					mu.Lock()
					acked[id] = url
					ackedIDs = append(ackedIDs, id)
					if cutNow.CompareAndSwap(true, false) {
						cut()
					}
					mu.Unlock()
				}
			}
		})
	}
	for w := range 2 {
		drng := rand.New(rand.NewPCG(seed, uint64(w)))
		wg.Go(func() {
			for !stopped() {
				time.Sleep(4 * time.Millisecond)
				mu.Lock()
				if len(ackedIDs) == 0 {
					mu.Unlock()
					continue
				}
				id := ackedIDs[drng.IntN(len(ackedIDs))]
				if deleting[id] {
					mu.Unlock()
					continue
				}
				deleting[id] = true
				mu.Unlock()
				if s.Delete(ctx, id) == nil {
					mu.Lock()
					deleted[id] = true
					mu.Unlock()
				}
			}
		})
	}
	vrng := rand.New(rand.NewPCG(seed, 99))
	day := time.Now().UTC().Truncate(24 * time.Hour) // within any retention
	wg.Go(func() {
		for !stopped() {
			time.Sleep(10 * time.Millisecond)
			var deltas []shortener.VisitDelta
			for _, id := range counted {
				if n := vrng.Int64N(4); n > 0 {
					deltas = append(deltas, shortener.VisitDelta{ID: id, Stats: shortener.VisitStats{Total: n,
						Days: shortener.Breakdown{day.Format(shortener.DayFormat): n}, Browsers: shortener.Breakdown{"Firefox": n}}})
				}
			}
			mu.Lock()
			for _, d := range deltas {
				sent[d.ID] += d.Stats.Total
			}
			mu.Unlock()
			if vs.AddVisits(ctx, shortener.NewVisitBatch(deltas...)) == nil {
				mu.Lock()
				for _, d := range deltas {
					flushed[d.ID] += d.Stats.Total
				}
				mu.Unlock()
			}
		}
	})

	time.Sleep(time.Duration(20+rng.IntN(100)) * time.Millisecond)
	cutNow.Store(true)
	<-cutDone
	close(stop)
	wg.Wait()
	s.Close() // on the storage that lost power: errors say nothing

	s, err = p.Open()
	if err != nil {
		return fmt.Errorf("reopen after the power loss: %w", err)
	}
	defer s.Close()
	vs = s
	if len(mustHave) == 0 {
		return errors.New("no create was acknowledged before the power loss: the load did not run")
	}
	lost := 0
	var example string
	for id, url := range mustHave {
		l, err := s.Get(ctx, id)
		switch {
		case errors.Is(err, shortener.ErrNotFound):
			lost++
			example = id
		case err != nil:
			return fmt.Errorf("get %s after the power loss: %w", id, err)
		case l.URL != url:
			return fmt.Errorf("link %s has URL %q after the power loss, want %q", id, l.URL, url)
		}
	}
	if lost > 0 {
		return fmt.Errorf("%d of %d acknowledged creates lost in the power loss (e.g. %s)", lost, len(mustHave), example)
	}
	for _, id := range mustNotHave {
		if _, err := s.Get(ctx, id); !errors.Is(err, shortener.ErrNotFound) {
			return fmt.Errorf("link %s, whose delete was acknowledged, is back after the power loss (%v)", id, err)
		}
	}
	for _, id := range counted {
		st, err := vs.VisitStats(ctx, id)
		if err != nil {
			return fmt.Errorf("visit stats %s after the power loss: %w", id, err)
		}
		if st.Total < atLeast[id] || st.Total > sent[id] {
			return fmt.Errorf("link %s has %d visits after the power loss; %d were acknowledged, %d sent", id, st.Total, atLeast[id], sent[id])
		}
	}
	if rs, ok := s.(shortener.VisitRangeStore); ok {
		// Top 0: every link's counts (shortener.VisitCounts).
		q := shortener.StatsQuery{From: day, To: day.Add(24 * time.Hour), Granularity: shortener.GranularityDay}
		all, err := rs.VisitCounts(ctx, q)
		if err != nil {
			return fmt.Errorf("visit counts after the power loss: %w", err)
		}
		var sumAcked, sumSent int64
		for _, id := range counted {
			sumAcked += atLeast[id]
			sumSent += sent[id]
			q.ID = id
			one, err := rs.VisitCounts(ctx, q)
			if err != nil {
				return fmt.Errorf("visit counts of %s after the power loss: %w", id, err)
			}
			pb, across := one.Series[0], all.Links[id]
			for what, n := range map[string]int64{"its day": pb.People + pb.Bots, "across links": across.People + across.Bots} {
				if n < atLeast[id] || n > sent[id] {
					return fmt.Errorf("link %s has %d visits (%s) after the power loss; %d were acknowledged, %d sent", id, n, what, atLeast[id], sent[id])
				}
			}
		}
		if n := all.Series[0].People + all.Series[0].Bots; n < sumAcked || n > sumSent {
			return fmt.Errorf("all links have %d visits after the power loss; %d were acknowledged, %d sent", n, sumAcked, sumSent)
		}
	}
	return nil
}
