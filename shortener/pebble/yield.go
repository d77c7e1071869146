package pebble

import (
	"runtime"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// yieldFS is the file system pebble writes through: the goroutines that
// write a memtable flush's or a compaction's sstables stop for a moment
// after every yieldBytes bytes, while the process has a single P, so that
// the requests waiting for that P run first.
//
// With GOMAXPROCS=1 a compaction out of L0 (ids are random: it rewrites
// the whole base level, ~38 MiB with a million links) kept the only P for
// hundreds of milliseconds, and creates and redirects waited for it
// (docs/serve-benchmarks.md, "Background work on one P"). The runtime does
// preempt it every 10 ms, but a preempted goroutine stays runnable and the
// scheduler polls the network only when nothing is runnable (or sysmon,
// at most every 10 ms), so the connections whose requests had arrived were
// found late and then queued behind it; a goroutine asleep on a timer is
// not runnable: the scheduler runs what is ready, polls the network, runs
// the requests it finds, and gives the P back to the compaction when its
// timer has fired and the current request's goroutine has parked.
//
// The stop is yieldPause; on an idle P it lasts about a millisecond (the
// network poller sleeps in whole milliseconds), so a compaction with the
// server idle takes longer, by up to yieldPause's rounding per yieldBytes
// bytes written. The write-ahead log is never paused: creates wait for it.
type yieldFS struct {
	vfs.FS
	// pause stops the calling goroutine; nil: yieldPause.
	pause func()
}

// yieldBytes is how many bytes a flush or compaction writes between two
// pauses: about 2 ms of a compaction's work on this machine (13.2 MB
// written in 371 ms).
const yieldBytes = 64 << 10

// yieldPause is how long a flush or compaction stops, at least: long
// enough that the goroutine is not runnable when the scheduler looks for
// work, and the shortest the timer allows.
const yieldPause = 50 * time.Microsecond

// background reports whether pebble writes files of category c from a
// flush or a compaction (pebble's getDiskWriteCategoryForCompaction).
func background(c vfs.DiskWriteCategory) bool {
	return c == "pebble-compaction" || c == "pebble-memtable-flush" || c == "pebble-blob-file-rewrite"
}

func (fs yieldFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || !background(category) {
		return f, err
	}
	pause := fs.pause
	if pause == nil {
		pause = func() { time.Sleep(yieldPause) }
	}
	return &yieldFile{File: f, pause: pause}, nil
}

// yieldFile is a flush's or compaction's output file: see yieldFS.
type yieldFile struct {
	vfs.File
	pause   func()
	written int // since the last pause
}

func (f *yieldFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.written += n
	if f.written >= yieldBytes {
		f.written = 0
		if runtime.GOMAXPROCS(0) == 1 {
			f.pause()
		}
	}
	return n, err
}
