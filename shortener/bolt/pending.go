package bolt

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/linkgate/linkgate/shortener"
)

// Links created but not yet applied to the bbolt file are pending: they
// are in the create log (wal.go) and in memory, where every read looks
// first. A background applier writes them to the file in one transaction
// every applyDelay (sooner when applyAtOnce are waiting); every other
// write transaction of the Store applies them first too (update), so
// Delete, Import and visit counting see every link that exists.
//
// Applying in large batches is what makes creates cheap: with random ids
// each link dirties about one leaf page of a large tree, and a commit of
// thousands shares its branch pages and its two fsyncs among them
// (docs/serve-benchmarks.md has the figures).
var (
	applyDelay  = 100 * time.Millisecond
	applyAtOnce = 16384 // pending links that start an apply at once
	maxPending  = 65536 // creates wait for an apply beyond this many
	// maxApply bounds the links the applier writes in one transaction:
	// a transaction holds every page it dirties in memory until its
	// commit, about 10 KiB per link of a large store.
	maxApply = 4096
)

// pendingLink is a logged link not yet applied.
type pendingLink struct {
	seq     uint64
	val     []byte      // as stored in the links bucket; never modified
	durable atomic.Bool // its log record is synced: reads may see it
}

type pendingEntry struct {
	id string
	p  *pendingLink
}

// Create stores l unless its id is taken (in the file or pending). It logs
// the link and returns once the log is synced: concurrent creates share
// one write and one fdatasync (group commit). The link is applied to the
// bbolt file later, in a batch; until then reads find it in memory.
//
// If ctx ends first (a stalled disk), Create returns its error without
// waiting: the caller then answers 503, never 201, and the link may or may
// not be stored.
func (s *Store) Create(ctx context.Context, l shortener.Link) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("create link: %w", err)
	}
	p := &pendingLink{val: encode(l)}
	s.mu.Lock()
	for len(s.pending) >= maxPending && !s.closed {
		drained := s.drained
		s.mu.Unlock()
		s.kickApplier(s.applyNow)
		select {
		case <-drained:
		case <-ctx.Done():
			return fmt.Errorf("create link %q: %w", l.ID, ctx.Err())
		}
		s.mu.Lock()
	}
	g, err := s.logCreate(l.ID, p)
	n := len(s.pending)
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("create link %q: %w", l.ID, err)
	}
	s.wal.kick()
	switch n {
	case 1:
		s.kickApplier(s.applyKick)
	case applyAtOnce:
		s.kickApplier(s.applyNow)
	}
	select {
	case <-g.done:
		if g.err != nil {
			return fmt.Errorf("create link %q: %w: %w", l.ID, shortener.ErrUnavailable, g.err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("create link %q: %w", l.ID, ctx.Err())
	}
}

// logCreate checks that id is free and queues its record; s.mu is held.
func (s *Store) logCreate(id string, p *pendingLink) (*group, error) {
	if s.closed {
		return nil, fmt.Errorf("%w: store closed", shortener.ErrUnavailable)
	}
	if s.pending[id] != nil {
		return nil, shortener.ErrConflict
	}
	// A link leaves pending only after its apply is committed and the
	// snapshots retired, so this read sees it if it is not pending.
	sn, err := s.snaps.borrow()
	if err != nil {
		return nil, err
	}
	taken := sn.get([]byte(id)) != nil
	sn.release()
	if taken {
		return nil, shortener.ErrConflict
	}
	p.seq = s.nextSeq + 1
	g, err := s.wal.add(p.seq, id, p)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", shortener.ErrUnavailable, err)
	}
	s.nextSeq = p.seq
	s.pending[id] = p
	s.npending.Store(int64(len(s.pending)))
	return g, nil
}

// pendingValue returns the stored value of a link that is logged but not
// yet applied, or nil. It does not allocate, and costs one atomic load
// when nothing is pending.
func (s *Store) pendingValue(id []byte) []byte {
	if s.npending.Load() == 0 {
		return nil
	}
	s.mu.RLock()
	p := s.pending[string(id)]
	s.mu.RUnlock()
	if p == nil || !p.durable.Load() {
		return nil
	}
	return p.val
}

// update runs fn in a write transaction that first applies every pending
// link. Reads look at pending links before the file, so applied links
// leave pending only once the commit is visible.
func (s *Store) update(fn func(tx *bbolt.Tx) error) error {
	return s.apply(fn, 0)
}

// apply runs fn (nil: none) in a write transaction that first applies
// the pending links: all of them, or the limit (> 0) oldest.
func (s *Store) apply(fn func(tx *bbolt.Tx) error, limit int) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.mu.RLock()
	batch := s.batch[:0]
	for id, p := range s.pending {
		batch = append(batch, pendingEntry{id, p})
	}
	s.mu.RUnlock()
	if limit > 0 && len(batch) > limit {
		// The applied sequence number must cover a prefix of the log.
		slices.SortFunc(batch, func(a, b pendingEntry) int { return cmp.Compare(a.p.seq, b.p.seq) })
		clear(batch[limit:])
		batch = batch[:limit]
	}
	// Key order: neighbouring links share page writes, and bbolt
	// splits pages best when it appends.
	slices.SortFunc(batch, func(a, b pendingEntry) int { return strings.Compare(a.id, b.id) })
	var last uint64
	err := s.db.Update(func(tx *bbolt.Tx) error {
		links, meta := tx.Bucket(linksBucket), tx.Bucket(metaBucket)
		applied := readApplied(meta)
		last = applied
		for _, e := range batch {
			// Already applied by an earlier transaction (and maybe
			// deleted since): applying again would bring it back.
			if e.p.seq <= applied {
				continue
			}
			if err := links.Put([]byte(e.id), e.p.val); err != nil {
				return fmt.Errorf("apply link %q: %w", e.id, err)
			}
			last = max(last, e.p.seq)
		}
		if last > applied {
			if err := meta.Put(appliedKey, binary.BigEndian.AppendUint64(nil, last)); err != nil {
				return err
			}
		}
		if fn != nil {
			return fn(tx)
		}
		return nil
	})
	s.snaps.retire()
	if err == nil && len(batch) > 0 {
		s.applied.Store(last)
		s.mu.Lock()
		for _, e := range batch {
			if s.pending[e.id] == e.p {
				delete(s.pending, e.id)
			}
		}
		s.npending.Store(int64(len(s.pending)))
		close(s.drained)
		s.drained = make(chan struct{})
		s.mu.Unlock()
	}
	clear(batch)
	s.batch = batch[:0]
	return err
}

// settle applies the pending links, if any, so that a read transaction
// sees every link (List, visit statistics).
func (s *Store) settle() error {
	if s.npending.Load() == 0 {
		return nil
	}
	return s.update(nil)
}

func readApplied(meta *bbolt.Bucket) uint64 {
	v := meta.Get(appliedKey)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// kickApplier wakes the applier through ch (s.applyKick: after
// applyDelay; s.applyNow: at once).
func (s *Store) kickApplier(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// applyLoop applies pending links in the background until Close.
func (s *Store) applyLoop() {
	defer close(s.applyDone)
	t := time.NewTimer(0)
	<-t.C
	for {
		select {
		case <-s.applyKick:
			t.Reset(s.applyDelay)
			select { // let a batch gather
			case <-t.C:
			case <-s.applyNow:
				t.Stop()
			case <-s.applyStop:
				return
			}
		case <-s.applyNow:
		case <-s.applyStop:
			return
		}
		err := s.apply(nil, s.maxApply)
		if err != nil {
			err = fmt.Errorf("apply created links: %w", err)
		}
		s.applyErr.Store(&err)
		switch n := s.npending.Load(); {
		case n >= int64(s.maxApply) && err == nil: // a backlog: keep going
			s.kickApplier(s.applyNow)
		case n > 0: // more arrived meanwhile (or a retry after an error)
			s.kickApplier(s.applyKick)
		}
	}
}

// replay applies the log records Open found that are not applied yet, in
// sequence order, in transactions of at most maxApply links, and returns
// the last sequence number applied.
func (s *Store) replay(recs []walRecord) (uint64, error) {
	slices.SortFunc(recs, func(a, b walRecord) int { return cmp.Compare(a.seq, b.seq) })
	var last uint64
	err := s.db.View(func(tx *bbolt.Tx) error {
		last = readApplied(tx.Bucket(metaBucket))
		return nil
	})
	for i := 0; err == nil && i < len(recs); i += s.maxApply {
		chunk := recs[i:min(i+s.maxApply, len(recs))]
		err = s.db.Update(func(tx *bbolt.Tx) error {
			links := tx.Bucket(linksBucket)
			applied := last
			for _, r := range chunk {
				if r.seq <= applied {
					continue
				}
				if err := links.Put([]byte(r.id), r.val); err != nil {
					return fmt.Errorf("replay link %q: %w", r.id, err)
				}
				applied = r.seq
			}
			if applied == last {
				return nil
			}
			last = applied
			return tx.Bucket(metaBucket).Put(appliedKey, binary.BigEndian.AppendUint64(nil, applied))
		})
	}
	s.snaps.retire()
	return last, err
}

// isPending reports whether a link is logged and not yet applied.
func (s *Store) isPending(id string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.pending[id] != nil
}
