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
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.compactions, c.compactionDebt, c.flushes, c.cacheHits, c.cacheMisses,
		c.cacheBytes, c.diskBytes, c.memtable, c.readAmp, c.walBytes, c.walFsync, c.l0Subs} {
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
