//go:build linux

package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The read index: every link's value in memory, found by id with one hash
// probe, so that a redirect does not walk pebble's levels (2–3 µs among a
// million links). It is derived from pebble, never a second source of
// truth: rebuilt from pebble's links at every Open, and changed after each
// commit by the operation that made it, under that id's reservation, so a
// read that starts after a create, delete or import has returned sees it.
//
// The values live in an arena of 64 MiB chunks of a memory-mapped file in
// the store's directory, unlinked once created (nothing is left on disk
// after the process): page cache the kernel can write back and evict, not
// anonymous memory. The table of slots (8 bytes each, at most 3/4 used) is
// anonymous memory, 16 MiB for a million links, mapped outside the Go heap:
// on the heap it counted as live data and the collector's headroom
// (GOGC=100) let garbage grow by as much again. A replaced table is
// unmapped by a cleanup once no reader can hold it (its indexState is
// unreachable), so readers stay lock-free.
//
// A slot is 0 (empty), or a 16-bit tag from the id's hash over the entry's
// arena offset + 1 (48 bits), where offset+1 = tombstone marks a deleted
// entry (probes go past it). An entry is: byte id length, id, uvarint
// value length, value (codec.go). Entries are never changed: a new value
// is a new entry and the slot is swapped atomically; the replaced one is
// garbage, and the arena is rewritten aside once garbage passes its live
// bytes.
const (
	maxChunks  = 1 << 14 // 1 TiB of entries
	offsetMask = 1<<48 - 1
	tombstone  = offsetMask
	minSlots   = 1 << 12
)

// indexSupported: the read index works here (index_other.go: elsewhere).
const indexSupported = true

// chunkShift makes an arena's chunks 1<<chunkShift bytes (a variable for
// tests, which make it small).
var chunkShift uint = 26 // 64 MiB

type index struct {
	mu      sync.Mutex // serialises writers
	cur     atomic.Pointer[indexState]
	seed    maphash.Seed
	dir     string
	n       int      // live entries (writers only)
	used    int      // slots not empty: live + tombstones (writers only)
	retired []*arena // replaced by a compaction; unmapped at close
	// tables counts this index's tables mapped and not yet unmapped
	// (tests); the cleanups that unmap them hold it, not the index.
	tables *atomic.Int64
}

// indexState is a table and the arena its slots point into, swapped as
// one. slots is mapped memory (newState), unmapped once the indexState is
// unreachable: a reader keeps it reachable until it is done with slots
// (runtime.KeepAlive in get).
type indexState struct {
	slots []atomic.Uint64
	mask  uint64
	arena *arena
}

type arena struct {
	chunks  [maxChunks]atomic.Pointer[[]byte] // mapped before any slot refers to them
	nchunks int                               // writers only, from here on
	file    *os.File
	shift   uint   // chunks are 1<<shift bytes
	end     uint64 // next write offset
	live    uint64 // bytes of live entries
}

func (a *arena) chunkSize() uint64 { return 1 << a.shift }

func newIndex(dir string, expect int) (*index, error) {
	ix := &index{seed: maphash.MakeSeed(), dir: dir, tables: new(atomic.Int64)}
	a, err := newArena(dir)
	if err != nil {
		return nil, err
	}
	st, err := ix.newState(max(expect*4/3+1, minSlots), a)
	if err != nil {
		a.close()
		return nil, err
	}
	ix.cur.Store(st)
	return ix, nil
}

// newState maps a table of at least n slots over a.
func (ix *index) newState(n int, a *arena) (*indexState, error) {
	size := 1
	for size < n {
		size <<= 1
	}
	m, err := unix.Mmap(-1, 0, size*8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("read index: map table: %w", err)
	}
	ix.tables.Add(1)
	st := &indexState{
		slots: unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(unsafe.SliceData(m))), size),
		mask:  uint64(size - 1),
		arena: a,
	}
	runtime.AddCleanup(st, unmapTable, mappedTable{m, ix.tables})
	return st, nil
}

type mappedTable struct {
	m      []byte
	tables *atomic.Int64
}

func unmapTable(t mappedTable) {
	unix.Munmap(t.m)
	t.tables.Add(-1)
}

// newArena makes an arena backed by a file in dir, or by anonymous memory
// when dir is "" (stores on a file system other than the operating
// system's: tests).
func newArena(dir string) (*arena, error) {
	if dir == "" {
		return &arena{shift: chunkShift}, nil
	}
	f, err := os.CreateTemp(dir, "readindex-*.tmp")
	if err != nil {
		return nil, fmt.Errorf("read index: %w", err)
	}
	os.Remove(f.Name()) // the open file keeps it; nothing is left behind
	return &arena{file: f, shift: chunkShift}, nil
}

func (a *arena) close() {
	for i := range a.nchunks {
		unix.Munmap(*a.chunks[i].Load())
	}
	if a.file != nil {
		a.file.Close()
	}
}

func (ix *index) close() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.cur.Load().arena.close()
	for _, a := range ix.retired {
		a.close()
	}
}

// get returns the value stored for id, aliasing the arena (valid while the
// store is open), or nil. It does not allocate.
func (ix *index) get(id []byte) []byte {
	st := ix.cur.Load()
	h := maphash.Bytes(ix.seed, id)
	tag := h >> 48
	var v []byte
	for i := h & st.mask; ; i = (i + 1) & st.mask {
		s := st.slots[i].Load()
		if s == 0 {
			break
		}
		if s>>48 == tag && s&offsetMask != tombstone {
			var ok bool
			if v, ok = st.arena.value(s&offsetMask-1, id); ok {
				break
			}
		}
	}
	runtime.KeepAlive(st) // its table stays mapped until here
	return v
}

// touch reads, for each of ids, the first slot and the entry that get
// would read, and discards them: a batch of lookups about to be made one
// by one (a visit flush checking that its links exist) then finds them in
// the processor's cache. get's loads depend on each other (the slot gives
// the entry), so among a million links each lookup waits for two cache
// misses in turn; here each pass's loads are independent of one another
// and the processor overlaps their misses. hs is scratch space, at least
// len(ids) long.
func (ix *index) touch(ids []string, hs []uint64) {
	st := ix.cur.Load()
	for i, id := range ids {
		hs[i] = maphash.String(ix.seed, id)
	}
	for i := range ids {
		hs[i] = st.slots[hs[i]&st.mask].Load() // its tag is not checked: a miss costs get one more probe
	}
	var sink byte
	for i := range ids {
		if ref := hs[i] & offsetMask; ref != 0 && ref != tombstone {
			off := ref - 1
			sink += (*st.arena.chunks[off>>st.arena.shift].Load())[off&(st.arena.chunkSize()-1)]
		}
	}
	runtime.KeepAlive(sink) // the loads are made, not optimised away
	runtime.KeepAlive(st)
}

// value returns the value of the entry at off if its id is id.
func (a *arena) value(off uint64, id []byte) ([]byte, bool) {
	c := *a.chunks[off>>a.shift].Load()
	p := off & (a.chunkSize() - 1)
	n := uint64(c[p])
	if n != uint64(len(id)) || string(c[p+1:p+1+n]) != string(id) {
		return nil, false
	}
	p += 1 + n
	vl, k := binary.Uvarint(c[p:])
	p += uint64(k)
	return c[p : p+vl : p+vl], true
}

// entry returns the id and value of the entry at off and its size.
func (a *arena) entry(off uint64) (id, val []byte, size uint64) {
	c := *a.chunks[off>>a.shift].Load()
	p := off & (a.chunkSize() - 1)
	id = c[p+1 : p+1+uint64(c[p])]
	q := p + 1 + uint64(len(id))
	vl, k := binary.Uvarint(c[q:])
	q += uint64(k)
	return id, c[q : q+vl], q + vl - p
}

// append writes an entry and returns its offset.
func (a *arena) append(id, val []byte) (uint64, error) {
	size := uint64(1 + len(id) + uvarintLen(len(val)) + len(val))
	if len(id) > 255 || size > a.chunkSize() {
		return 0, errors.New("read index: entry too large")
	}
	pos := a.end & (a.chunkSize() - 1)
	if a.end+size > uint64(a.nchunks)<<a.shift { // past the mapped chunks
		if a.nchunks == maxChunks {
			return 0, errors.New("read index: full")
		}
		off := int64(a.nchunks) << a.shift
		c, err := a.mapChunk(off)
		if err != nil {
			return 0, fmt.Errorf("read index: map: %w", err)
		}
		a.chunks[a.nchunks].Store(&c)
		a.nchunks++
		a.end, pos = uint64(off), 0
	}
	c := *a.chunks[a.nchunks-1].Load()
	off := a.end
	p := pos + uint64(copy(c[pos+1:], id)) + 1
	c[pos] = byte(len(id))
	p += uint64(binary.PutUvarint(c[p:], uint64(len(val))))
	copy(c[p:], val)
	a.end += size
	a.live += size
	return off, nil
}

// put makes val (copied) the value of id.
func (ix *index) put(id, val []byte) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	st := ix.cur.Load()
	if uint64(ix.used) >= st.mask { // maintain could not map a larger table
		return errors.New("read index: table full")
	}
	off, err := st.arena.append(id, val)
	if err != nil {
		return err
	}
	ix.set(st, id, off+1)
	return nil
}

// delete forgets id.
func (ix *index) delete(id []byte) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.set(ix.cur.Load(), id, tombstone)
}

// set points id's slot at the entry ref-1, or marks it deleted (ref =
// tombstone). ix.mu is held.
func (ix *index) set(st *indexState, id []byte, ref uint64) {
	h := maphash.Bytes(ix.seed, id)
	tag := h >> 48
	free := int64(-1)
	for i := h & st.mask; ; i = (i + 1) & st.mask {
		s := st.slots[i].Load()
		if s == 0 {
			if ref == tombstone {
				return // not there
			}
			if free < 0 {
				free = int64(i)
				ix.used++
			}
			st.slots[free].Store(tag<<48 | ref)
			ix.n++
			ix.maintain(st)
			return
		}
		if s&offsetMask == tombstone {
			if free < 0 {
				free = int64(i)
			}
			continue
		}
		if s>>48 != tag {
			continue
		}
		if _, ok := st.arena.value(s&offsetMask-1, id); ok {
			_, _, size := st.arena.entry(s&offsetMask - 1)
			st.arena.live -= size
			if ref == tombstone {
				ix.n--
			}
			st.slots[i].Store(tag<<48 | ref)
			ix.maintain(st)
			return
		}
	}
}

// maintain rebuilds the table (and the arena, if it is mostly garbage)
// aside and swaps them in: when the table is 3/4 used (larger, or just
// without tombstones), or when the arena's garbage passes its live bytes
// and a chunk.
func (ix *index) maintain(st *indexState) {
	garbage := st.arena.end - st.arena.live
	compact := garbage > st.arena.chunkSize() && garbage > st.arena.live
	if !compact && uint64(ix.used) < (st.mask+1)*3/4 {
		return
	}
	a := st.arena
	if compact {
		var err error
		if a, err = newArena(ix.dir); err != nil {
			return // keep the garbage; tried again on a later change
		}
	}
	ns, err := ix.newState(max(ix.n*2, minSlots), a)
	if err != nil {
		if compact {
			a.close()
		}
		return // tried again on a later change
	}
	for i := range st.slots {
		s := st.slots[i].Load()
		if s == 0 || s&offsetMask == tombstone {
			continue
		}
		ref := s & offsetMask
		id, val, _ := st.arena.entry(ref - 1)
		if compact {
			off, err := a.append(id, val)
			if err != nil {
				a.close()
				return
			}
			ref = off + 1
		}
		h := maphash.Bytes(ix.seed, id)
		for j := h & ns.mask; ; j = (j + 1) & ns.mask {
			if ns.slots[j].Load() == 0 {
				ns.slots[j].Store(s&^offsetMask | ref)
				break
			}
		}
	}
	ix.used = ix.n
	if compact {
		ix.retired = append(ix.retired, st.arena)
	}
	ix.cur.Store(ns)
}

// mapChunk maps the chunk at file offset off.
func (a *arena) mapChunk(off int64) ([]byte, error) {
	if a.file == nil {
		return unix.Mmap(-1, 0, int(a.chunkSize()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	}
	// Blocks are allocated now, so that a full disk fails here rather
	// than as a SIGBUS when a write to the mapping finds no block.
	if err := unix.Fallocate(int(a.file.Fd()), 0, off, int64(a.chunkSize())); err != nil {
		return nil, fmt.Errorf("read index: grow: %w", err)
	}
	return unix.Mmap(int(a.file.Fd()), off, int(a.chunkSize()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
}
