package pebble

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Collector exports pebble's own metrics of a store (compactions, flushes,
// WAL fsync latency, block cache, disk usage), read from pebble at each
// scrape.
type Collector struct {
	s                                   *Store
	compactions, compactionDebt         *prometheus.Desc
	flushes, cacheHits, cacheMisses     *prometheus.Desc
	cacheBytes, diskBytes, memtable     *prometheus.Desc
	readAmp, walBytes, walFsync, l0Subs *prometheus.Desc
	free, minFree, refusing, refused    *prometheus.Desc
	enospc, ballast                     *prometheus.Desc
	recUnclean, recTorn, recRecords     *prometheus.Desc
	corruptions, stalls, stallSeconds   *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns the collector of s's metrics.
func NewCollector(s *Store) *Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("linkgate_pebble_"+name, help, nil, nil)
	}
	return &Collector{s: s,
		compactions:    d("compactions_total", "Compactions pebble has run since the store was opened."),
		compactionDebt: d("compaction_debt_bytes", "Estimated bytes pebble still has to compact to reach a stable LSM."),
		flushes:        d("flushes_total", "Memtable flushes since the store was opened."),
		cacheHits:      d("block_cache_hits_total", "Block cache lookups that hit."),
		cacheMisses:    d("block_cache_misses_total", "Block cache lookups that missed (a read from the file)."),
		cacheBytes:     d("block_cache_bytes", "Bytes held by the block cache."),
		diskBytes:      d("disk_usage_bytes", "Bytes the store uses on disk: tables, WAL, manifest, obsolete files not yet deleted."),
		memtable:       d("memtable_bytes", "Bytes of the memtables (in memory, not yet flushed to tables)."),
		readAmp:        d("read_amplification", "Sublevels and levels a point read may look at."),
		walBytes:       d("wal_bytes_written_total", "Bytes written to the write-ahead log."),
		walFsync:       d("wal_fsync_latency_seconds", "Latency of the write-ahead log's fsyncs."),
		l0Subs:         d("l0_sublevels", "Sublevels of L0 (writes stall when they pile up)."),
		free:           d("disk_free_bytes", "Free space of the store's file system, as the free-space guard last read it."),
		minFree:        d("disk_min_free_bytes", "Free space below which the store refuses writes (--store-min-free)."),
		refusing:       d("writes_refused", "1 while the store refuses writes because its file system is nearly full, else 0."),
		refused:        d("writes_refused_total", "Writes (creates, deletes, visit flushes, imports) refused because the file system was nearly full."),
		enospc:         d("enospc_total", "Times pebble met a full disk (ENOSPC) and the ballast was released for it."),
		ballast:        d("ballast", "1 while the ballast file holds its space, else 0 (released, or not made for lack of space)."),
		recUnclean:     d("recovery_unclean", "1 if the store was opened after an unclean stop (the last process that had it open did not close it), else 0."),
		recTorn:        d("recovery_torn_record", "1 if the newest write-ahead log ended in an incomplete record when the store was opened (pebble dropped it; it had not been acknowledged), else 0."),
		recRecords:     d("recovery_wal_records", "Complete records pebble replayed from the newest write-ahead log when the store was opened."),
		corruptions:    d("corruptions_total", "Blocks of the store's files that failed their checksum when read (the log names the file; restore a backup)."),
		stalls:         d("write_stalls_total", "Times pebble stopped writes until a memtable flush or an L0 compaction caught up."),
		stallSeconds:   d("write_stall_seconds_total", "Time writes were stopped by pebble's write stalls."),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.compactions, c.compactionDebt, c.flushes, c.cacheHits, c.cacheMisses,
		c.cacheBytes, c.diskBytes, c.memtable, c.readAmp, c.walBytes, c.walFsync, c.l0Subs,
		c.free, c.minFree, c.refusing, c.refused, c.enospc, c.ballast, c.recUnclean, c.recTorn, c.recRecords, c.corruptions, c.stalls, c.stallSeconds} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.s.closed.Load() {
		return
	}
	m := c.s.db.Metrics()
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter(c.compactions, float64(m.Compact.Count))
	gauge(c.compactionDebt, float64(m.Compact.EstimatedDebt))
	counter(c.flushes, float64(m.Flush.Count))
	counter(c.cacheHits, float64(m.BlockCache.Hits))
	counter(c.cacheMisses, float64(m.BlockCache.Misses))
	gauge(c.cacheBytes, float64(m.BlockCache.Size))
	gauge(c.diskBytes, float64(m.DiskSpaceUsage()))
	gauge(c.memtable, float64(m.MemTable.Size))
	gauge(c.readAmp, float64(m.ReadAmp()))
	counter(c.walBytes, float64(m.WAL.BytesWritten))
	gauge(c.l0Subs, float64(m.Levels[0].Sublevels))
	gauge(c.recUnclean, b2f(c.s.recovery.Unclean))
	gauge(c.recTorn, b2f(c.s.recovery.Torn))
	gauge(c.recRecords, float64(c.s.recovery.Records))
	counter(c.corruptions, float64(c.s.corruptions.Load()))
	stalls, stalled := c.s.events.stalled()
	counter(c.stalls, float64(stalls))
	counter(c.stallSeconds, stalled.Seconds())
	if g, ok := c.s.guard.stats(); ok {
		gauge(c.free, float64(g.free))
		gauge(c.minFree, float64(g.minFree))
		gauge(c.refusing, b2f(g.refusing))
		counter(c.refused, float64(g.refused))
		counter(c.enospc, float64(g.diskFull))
		gauge(c.ballast, b2f(g.ballasted))
	}
	if h := m.LogWriter.FsyncLatency; h != nil {
		// pebble's histogram is in nanoseconds; exported in seconds.
		var pb dto.Metric
		if err := h.Write(&pb); err == nil && pb.Histogram != nil {
			buckets := make(map[float64]uint64, len(pb.Histogram.Bucket))
			for _, b := range pb.Histogram.Bucket {
				buckets[b.GetUpperBound()/1e9] = b.GetCumulativeCount()
			}
			ch <- prometheus.MustNewConstHistogram(c.walFsync, pb.Histogram.GetSampleCount(), pb.Histogram.GetSampleSum()/1e9, buckets)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
