package pebble

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A full disk. Pebble cannot go on after a failed write to its
// write-ahead log or its MANIFEST: it calls the logger's Fatalf (the
// process exits), and a failed WAL rotation panics. What the store
// acknowledged survives that (it is in the synced WAL), but every request
// in flight fails and the server is gone. So the store never lets pebble
// get there:
//
//   - the free-space guard: before every write (create, delete, visit
//     flush, import) the store knows how much space its file
//     system has (statfs, at most every guardInterval, and sooner when
//     the writes since the last look could have used a quarter of the
//     margin). Below Options.MinFreeBytes, writes are refused with
//     shortener.ErrUnavailable (a 503 "unavailable" at the HTTP edge),
//     reads go on, and writes resume by themselves once the space is back
//     above it (plus an eighth, so that the store does not flap at the
//     edge). What pebble still writes by itself — the memtable it
//     flushes, compactions, MANIFEST records — has the margin to itself;
//   - the ballast: a file (DIR/BALLAST, half of MinFreeBytes) whose
//     blocks are allocated at Open. Should pebble meet ENOSPC anyway —
//     another process filled the disk between two looks — the file
//     system pebble writes through (vfs.OnDiskFull) removes the ballast
//     and pebble's write is retried once, into the space it freed, instead
//     of killing the process; the guard then refuses writes until the
//     space is back above MinFreeBytes plus the ballast, and makes the
//     ballast again.
//
// Both are what CockroachDB does on pebble (a ballast and a free-space
// threshold), sized for a store of links.

// DefaultMinFreeBytes is Options.MinFreeBytes when it is 0.
const DefaultMinFreeBytes = 64 << 20

// ballastName is the ballast's file in the store's directory (pebble
// ignores files it does not know).
const ballastName = "BALLAST"

// guardInterval is how long the guard trusts its last look at the free
// space.
const guardInterval = 100 * time.Millisecond

// guard is the free-space guard of a store.
type guard struct {
	fs      vfs.FS // the file system under the disk-full wrapper
	dir     string
	minFree uint64
	ballast uint64 // the ballast's size
	logger  *slog.Logger
	clock   func() time.Time

	budget   atomic.Int64 // bytes writes may use before the next look
	next     atomic.Int64 // when the next look is due, Unix nanoseconds
	refusing atomic.Bool  // the last look said: refuse writes
	// ballastGone: the ballast is not there (released on ENOSPC, or not
	// made yet): writes wait for MinFreeBytes plus its size, unless the
	// file system cannot hold one (noBallast).
	ballastGone atomic.Bool
	noBallast   atomic.Bool

	mu                   sync.Mutex // held by a look
	free                 atomic.Uint64
	refused, diskFull    atomic.Int64
	unsupported, stopped bool // guarded by mu
}

// newGuard returns the guard of the store in dir on fs (the inner file
// system, not the disk-full wrapper), and makes the ballast. minFree < 0:
// no guard (nil).
func newGuard(fs vfs.FS, dir string, minFree int64, logger *slog.Logger, clock func() time.Time) *guard {
	if minFree < 0 {
		return nil
	}
	if minFree == 0 {
		minFree = DefaultMinFreeBytes
	}
	if clock == nil {
		clock = time.Now
	}
	g := &guard{fs: fs, dir: dir, minFree: uint64(minFree), ballast: uint64(minFree / 2), logger: logger, clock: clock}
	g.ballastGone.Store(true)
	if _, err := fs.GetDiskUsage(dir); err != nil {
		// A file system that cannot say (pebble's in-memory one): no
		// guard, no ballast.
		g.unsupported = true
		g.budget.Store(math.MaxInt64)
		g.next.Store(math.MaxInt64)
		return g
	}
	fs.Remove(fs.PathJoin(dir, ballastName)) // made again below, to its size
	g.mu.Lock()
	g.look(g.clock())
	g.mu.Unlock()
	return g
}

// ErrDiskFull is the guard's refusal of a write (the store wraps it in
// shortener.ErrUnavailable).
var ErrDiskFull = errors.New("disk nearly full")

func (g *guard) errDiskFull() error {
	kept := "--store-min-free"
	if g.need() > g.minFree {
		kept += ", and room for the ballast file to be made again"
	}
	return fmt.Errorf("%w: the store's file system has %s free, less than the %s kept free for it (%s); writes are refused until space is freed",
		ErrDiskFull, bytesString(g.free.Load()), bytesString(g.need()), kept)
}

// need is the free space writes need.
func (g *guard) need() uint64 {
	if g.ballastGone.Load() && !g.noBallast.Load() {
		return g.minFree + g.ballast
	}
	return g.minFree
}

// admit says whether a write of about n bytes may go to pebble: nil, or
// an error matching ErrDiskFull. It allocates nothing on the way in.
func (g *guard) admit(n int) error {
	if g == nil {
		return nil
	}
	now := g.clock().UnixNano()
	if !g.refusing.Load() && now < g.next.Load() && g.budget.Add(-int64(n)) >= 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if now >= g.next.Load() || !g.refusing.Load() && g.budget.Load() < 0 {
		g.look(time.Unix(0, now))
	}
	if g.refusing.Load() {
		g.refused.Add(1)
		return g.errDiskFull()
	}
	return nil
}

// look reads the free space and decides; g.mu is held.
func (g *guard) look(now time.Time) {
	if g.unsupported || g.stopped {
		return
	}
	du, err := g.fs.GetDiskUsage(g.dir)
	if err != nil {
		// Not knowing is not a reason to refuse: pebble says soon enough.
		if g.logger != nil {
			g.logger.Warn("store: cannot read the free space of its file system", "dir", g.dir, "error", err)
		}
		g.budget.Store(math.MaxInt64)
		g.next.Store(now.Add(guardInterval).UnixNano())
		return
	}
	free := du.AvailBytes
	if g.ballastGone.Load() && !g.noBallast.Load() && free >= g.minFree+g.ballast+g.minFree/8 {
		switch err := g.makeBallast(); {
		case err == nil:
			g.ballastGone.Store(false)
			free -= min(free, g.ballast)
		case !errors.Is(err, syscall.ENOSPC):
			// Not for lack of space: go on without one.
			g.noBallast.Store(true)
			if g.logger != nil {
				g.logger.Warn("store: cannot make the ballast file; going on without it", "file", g.fs.PathJoin(g.dir, ballastName), "error", err)
			}
		}
	}
	g.free.Store(free)
	was := g.refusing.Load()
	resume := g.need()
	if was {
		resume += g.minFree / 8
	}
	refuse := free < resume
	g.refusing.Store(refuse)
	if refuse {
		g.budget.Store(0)
	} else {
		g.budget.Store(int64((free - g.minFree) / 4))
	}
	g.next.Store(now.Add(guardInterval).UnixNano())
	switch {
	case refuse && !was && g.logger != nil:
		g.logger.Error("store: its file system is nearly full; writes are refused (503 unavailable) until space is freed, reads go on",
			"dir", g.dir, "free", bytesString(free), "kept_free", bytesString(g.need()))
	case !refuse && was && g.logger != nil:
		g.logger.Info("store: space is back; writes resume", "dir", g.dir, "free", bytesString(free))
	}
}

// makeBallast allocates the ballast's blocks.
func (g *guard) makeBallast() error {
	path := g.fs.PathJoin(g.dir, ballastName)
	f, err := g.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if err := allocate(f, int64(g.ballast)); err != nil {
		f.Close()
		g.fs.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		g.fs.Remove(path)
		return err
	}
	return f.Close()
}

// onDiskFull is called by the disk-full wrapper, with pebble's writes
// held, when one of them met ENOSPC: the ballast goes, so that the write
// is retried into the space it held, and writes are refused at once.
func (g *guard) onDiskFull() {
	g.diskFull.Add(1)
	released := !g.ballastGone.Swap(true)
	if released {
		g.fs.Remove(g.fs.PathJoin(g.dir, ballastName))
	}
	g.refusing.Store(true)
	g.budget.Store(0)
	if g.logger != nil {
		g.logger.Error("store: pebble met a full disk (ENOSPC); the ballast was released so that it can finish its write; writes are refused until space is freed",
			"dir", g.dir, "ballast_released", released, "ballast", bytesString(g.ballast))
	}
}

// stop ends the guard's looks (the store is closing).
func (g *guard) stop() {
	if g == nil {
		return
	}
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
}

// guardStats are the guard's figures, for metrics.
type guardStats struct {
	free, minFree       uint64
	refusing, ballasted bool
	refused, diskFull   int64
}

func (g *guard) stats() (guardStats, bool) {
	if g == nil || g.unsupported {
		return guardStats{}, false
	}
	return guardStats{free: g.free.Load(), minFree: g.minFree, refusing: g.refusing.Load(), ballasted: !g.ballastGone.Load() && !g.noBallast.Load(),
		refused: g.refused.Load(), diskFull: g.diskFull.Load()}, true
}

// bytesString says n bytes in MiB, or bytes below one.
func bytesString(n uint64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// writeZeros writes n zero bytes to f.
func writeZeros(f vfs.File, n int64) error {
	buf := make([]byte, min(n, 1<<20))
	for n > 0 {
		k, err := f.Write(buf[:min(n, int64(len(buf)))])
		if err != nil {
			return err
		}
		n -= int64(k)
	}
	return nil
}
