package pebble

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
)

// events is what the store takes from pebble's EventListener besides data
// corruption (recovery.go): write stalls are counted and timed for
// /metrics and logged; flushes, compactions and write-ahead log rotations
// are logged at debug level with their durations, so that a latency tail
// can be laid against them (--log-level debug).
type events struct {
	logger *slog.Logger
	// stalls counts write stalls, stallNanos their total duration;
	// stallStart is when the current one began (0: none).
	stalls, stallNanos, stallStart atomic.Int64
}

func (e *events) listen(l *pebbledb.EventListener) {
	l.WriteStallBegin = e.stallBegin
	l.WriteStallEnd = e.stallEnd
	if e.debug() {
		l.FlushEnd = e.flushEnd
		l.CompactionEnd = e.compactionEnd
		l.WALCreated = e.walCreated
	}
}

func (e *events) debug() bool {
	return e.logger != nil && e.logger.Enabled(context.Background(), slog.LevelDebug)
}

func (e *events) stallBegin(info pebbledb.WriteStallBeginInfo) {
	e.stalls.Add(1)
	e.stallStart.Store(time.Now().UnixNano())
	if e.logger != nil {
		e.logger.Info("store: writes stalled", "reason", info.Reason)
	}
}

func (e *events) stallEnd() {
	start := e.stallStart.Swap(0)
	if start == 0 {
		return
	}
	d := time.Duration(time.Now().UnixNano() - start)
	e.stallNanos.Add(int64(d))
	if e.logger != nil {
		e.logger.Info("store: writes resumed", "stalled", d)
	}
}

// stalled returns the number of write stalls and their total duration,
// the current one included.
func (e *events) stalled() (int64, time.Duration) {
	d := time.Duration(e.stallNanos.Load())
	if start := e.stallStart.Load(); start != 0 {
		d += time.Duration(time.Now().UnixNano() - start)
	}
	return e.stalls.Load(), d
}

func (e *events) flushEnd(info pebbledb.FlushInfo) {
	var out uint64
	for _, t := range info.Output {
		out += t.Size
	}
	e.logger.Debug("store: memtable flushed", "job", info.JobID, "reason", info.Reason, "memtables", info.Input,
		"in_bytes", info.InputBytes, "out_bytes", out, "took", info.Duration, "total", info.TotalDuration, "error", info.Err)
}

func (e *events) compactionEnd(info pebbledb.CompactionInfo) {
	var in, out uint64
	from := -1 // no input level (not expected from pebble; never an index panic in a listener)
	if len(info.Input) > 0 {
		from = info.Input[0].Level
	}
	for _, l := range info.Input {
		for _, t := range l.Tables {
			in += t.Size
		}
	}
	for _, t := range info.Output.Tables {
		out += t.Size
	}
	e.logger.Debug("store: compacted", "job", info.JobID, "reason", info.Reason, "from", from,
		"to", info.Output.Level, "in_bytes", in, "out_bytes", out, "took", info.Duration, "total", info.TotalDuration, "error", info.Err)
}

func (e *events) walCreated(info pebbledb.WALCreateInfo) {
	e.logger.Debug("store: write-ahead log rotated", "job", info.JobID, "file", info.Path, "recycled", info.RecycledFileNum != 0)
}
