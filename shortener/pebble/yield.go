package pebble

import (
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/linkgate/linkgate/internal/pace"
)

// yieldFS is the file system pebble writes through: while the process has
// a single P, the goroutines that write a memtable flush's or a
// compaction's sstables are paced (internal/pace): they stop after every
// millisecond of work for twice as long as that work took, so that the
// requests waiting for the P run meanwhile: a flush or compaction gets at
// most a third of a busy P.
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
// How long the pause is matters too. A fixed 50 µs pause after every
// 64 KiB written (the first version) still gave the flush nearly all of
// the P: a timer that fires readies its goroutine into runnext, ahead of
// the requests, so they ran for those 50 µs only, between stretches of
// 2–10 ms of flush work (a flush of visit statistics compresses 4:1, so
// 64 KiB written is 256 KiB of memtable). In a runtime trace of make
// bench-visits' fixed-rate load over a million links the memtable
// flush's goroutine ran 170 ms of a 200 ms window and the connections
// 1.6 ms, and the p99 was a second (docs/visits.md, "Memtables and
// paced background work"). A pause twice as long as the work before it
// bounds the background's share of a busy P whatever its compression
// ratio.
//
// On an idle P a pause is a sleep nobody needed: a flush or compaction
// then takes up to three times as long as it could. The write-ahead log
// is never paused: creates wait for it.
type yieldFS struct {
	vfs.FS
	// pause stops the calling goroutine for d, now is the clock; nil:
	// time.Sleep, time.Now (tests change them).
	pause func(d time.Duration)
	now   func() time.Time
}

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
	return &yieldFile{File: f, pacer: pace.New(fs.pause, fs.now)}, nil
}

// yieldFile is a flush's or compaction's output file: see yieldFS.
type yieldFile struct {
	vfs.File
	pacer pace.Pacer
}

func (f *yieldFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.pacer.Step()
	return n, err
}
