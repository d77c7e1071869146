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
// With GOMAXPROCS=1 a flush of a 4 MiB memtable kept connections waiting
// 232–242 ms, and a compaction out of L0 (ids are random: it rewrites the
// whole base level, ~38 MiB with a million links) longer still
// (docs/serve-benchmarks.md, "Background work on one P"). A runtime trace
// shows why the scheduler let it: pebble's sstable writer hands each
// compressed block to a second goroutine over an unbuffered channel, every
// 30–60 µs, and each of the two readies the other into the P's runnext
// slot, which inherits the time slice. So the local run queue is never
// empty, the P's schedtick advances only when some other goroutine (a
// ticker's) runs, which also keeps sysmon from seeing a 10 ms slice to
// preempt (one preemption in 8 s of trace), and the global run queue, where
// sysmon's network poll puts the connections whose requests have arrived,
// is looked at only on every 61st schedtick. A goroutine asleep on a timer
// is not runnable: with both asleep the local queue empties, the scheduler
// runs the global queue and polls the network, runs the requests it finds,
// and gives the P back to the flush when its timer has fired.
//
// On an idle P the pause lasts about a millisecond (the network poller
// sleeps in whole milliseconds), so with the server idle a compaction
// takes longer by up to that per yieldBytes written. The write-ahead log
// is never paused: creates wait for it.
type yieldFS struct {
	vfs.FS
	// pause stops the calling goroutine; nil: yieldPause.
	pause func()
}

// yieldBytes is how many bytes a flush or compaction writes between two
// pauses: about 2 ms of a compaction's work here (13.2 MB written in
// 371 ms); about 20 in a flush of a 4 MiB memtable (1.4 MB of sstable).
const yieldBytes = 64 << 10

// yieldPause is how long a flush or compaction stops, at least. Its length
// hardly matters under load (what matters is that the goroutine is not
// runnable while the scheduler looks for work); short, so that a busy P
// gives the flush its turn back after the requests it found.
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
