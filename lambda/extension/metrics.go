package extension

import (
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/linkgate/linkgate/internal/jsonquote"
)

// Metrics aggregates what the extension learns per invoke — from its own
// event loop and from Telemetry API records — and writes it as CloudWatch
// Embedded Metric Format (EMF) lines: one JSON object per line on Out, which
// Lambda ships to CloudWatch Logs, where the values become metrics. No
// network call, no per-event allocation.
//
// Each metric keeps its values (up to 100, the EMF limit per line) so
// CloudWatch can compute exact averages, maxima and percentiles; a line is
// written when a metric fills up, on Flush (periodically) and at shutdown.
type Metrics struct {
	Namespace    string
	FunctionName string
	Out          io.Writer

	mu       sync.Mutex
	series   [numSeries]series
	counts   [numCounters]int64
	inits    bool // the environment's init was recorded
	batch    Batch
	invokes  [invokeRing]invokeMark
	seq      uint64 // invokes seen
	reported chan struct{}
	line     []byte
	lastErr  error
}

// series are the per-invoke metrics.
const (
	seriesDuration          = iota // platform.report durationMs
	seriesBilledDuration           // platform.report billedDurationMs
	seriesInitDuration             // init duration, once per environment
	seriesMaxMemoryUsed            // platform.report maxMemoryUsedMB
	seriesPostRuntime              // platform.runtimeDone → this extension's next /event/next
	seriesExtensionOverhead        // platform.report span extensionOverhead (all extensions)
	seriesProcessing               // INVOKE received → next /event/next sent, this extension
	numSeries
)

// counters are summed per line.
const (
	counterInvokes     = iota // INVOKE events
	counterColdStarts         // inits seen
	counterLogsDropped        // records Lambda dropped for this subscriber
	counterJunk               // telemetry deliveries rejected
	numCounters
)

var seriesInfo = [numSeries]struct{ name, unit string }{
	seriesDuration:          {"Duration", "Milliseconds"},
	seriesBilledDuration:    {"BilledDuration", "Milliseconds"},
	seriesInitDuration:      {"InitDuration", "Milliseconds"},
	seriesMaxMemoryUsed:     {"MaxMemoryUsed", "Megabytes"},
	seriesPostRuntime:       {"PostRuntimeDuration", "Milliseconds"},
	seriesExtensionOverhead: {"ExtensionOverhead", "Milliseconds"},
	seriesProcessing:        {"ExtensionProcessingTime", "Microseconds"},
}

var counterInfo = [numCounters]string{
	counterInvokes:     "Invokes",
	counterColdStarts:  "ColdStarts",
	counterLogsDropped: "TelemetryDropped",
	counterJunk:        "TelemetryJunk",
}

// maxValues is the most values one EMF metric may carry.
const maxValues = 100

type series struct {
	n    int
	vals [maxValues]float64
}

// invokeRing remembers recent invokes to match telemetry records to them.
const invokeRing = 64

type invokeMark struct {
	seq      uint64
	id       [64]byte
	idLen    uint8
	received time.Time // INVOKE arrived
	ready    time.Time // the request for the next event went out; zero until then
	done     time.Time // platform.runtimeDone, if it came before ready
	reported bool      // platform.report seen
}

func (m *invokeMark) is(id []byte) bool {
	return m.seq != 0 && int(m.idLen) == len(id) && string(m.id[:m.idLen]) == string(id)
}

// add appends a value, writing a line first if the series is full.
func (m *Metrics) add(s int, v float64) {
	if m.series[s].n == maxValues {
		m.flushLocked(time.Now())
	}
	se := &m.series[s]
	se.vals[se.n] = v
	se.n++
}

// Received records an INVOKE event that arrived at the given time.
func (m *Metrics) Received(requestID []byte, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counts[counterInvokes]++
	m.seq++
	mk := &m.invokes[m.seq%invokeRing]
	*mk = invokeMark{seq: m.seq, received: at}
	mk.idLen = uint8(copy(mk.id[:], requestID))
}

// Ready records that the request for the event after the latest INVOKE
// went out at the given time: the extension's turnaround ends there.
func (m *Metrics) Ready(at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seq == 0 {
		return
	}
	mk := &m.invokes[m.seq%invokeRing]
	if !mk.ready.IsZero() {
		return // a retried request after a dropped connection
	}
	mk.ready = at
	m.add(seriesProcessing, float64(at.Sub(mk.received))/float64(time.Microsecond))
	if !mk.done.IsZero() {
		m.postRuntime(mk)
	}
}

// postRuntime adds the time from the runtime being done to the extension
// being ready. The platform stamps records to the millisecond: the runtime
// was done somewhere in [t, t+1ms), so only time the extension certainly
// added counts.
func (m *Metrics) postRuntime(mk *invokeMark) {
	done := mk.done
	if done.Nanosecond()%int(time.Millisecond) == 0 {
		done = done.Add(time.Millisecond)
	}
	m.add(seriesPostRuntime, float64(max(0, mk.ready.Sub(done)))/float64(time.Millisecond))
}

func (m *Metrics) findInvoke(id []byte) *invokeMark {
	for i := uint64(0); i < invokeRing && i < m.seq; i++ {
		mk := &m.invokes[(m.seq-i)%invokeRing]
		if mk.is(id) {
			return mk
		}
	}
	return nil
}

// HandleTelemetry reads one Telemetry API delivery into the metrics. A
// malformed delivery is returned as an error (the server counts it as
// junk); records before the error still count.
func (m *Metrics) HandleTelemetry(body []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := &m.batch
	b.Reset(body)
	for b.Next() {
		m.observe(b.Record())
	}
	return b.Err()
}

// CountJunk counts a rejected telemetry delivery.
func (m *Metrics) CountJunk() {
	m.mu.Lock()
	m.counts[counterJunk]++
	m.mu.Unlock()
}

func (m *Metrics) observe(r *Record) {
	switch r.Type {
	case RecordInitReport:
		if r.Has(FieldDuration) {
			m.initSeen(r.DurationMs)
		}
	case RecordRuntimeDone:
		mk := m.findInvoke(r.RequestID)
		if mk == nil || r.Time.IsZero() || !mk.done.IsZero() {
			return
		}
		mk.done = r.Time
		if !mk.ready.IsZero() {
			m.postRuntime(mk)
		}
	case RecordReport:
		if r.Has(FieldDuration) {
			m.add(seriesDuration, r.DurationMs)
		}
		if r.Has(FieldBilledDuration) {
			m.add(seriesBilledDuration, r.BilledDurationMs)
		}
		if r.Has(FieldMaxMemoryUsed) {
			m.add(seriesMaxMemoryUsed, r.MaxMemoryUsedMB)
		}
		if r.Has(FieldInitDuration) {
			m.initSeen(r.InitDurationMs)
		}
		if r.Has(FieldExtensionOverhead) {
			m.add(seriesExtensionOverhead, r.ExtensionOverheadMs)
		}
		if mk := m.findInvoke(r.RequestID); mk != nil {
			mk.reported = true
			select {
			case m.reported <- struct{}{}:
			default:
			}
		}
	case RecordLogsDropped:
		m.counts[counterLogsDropped] += int64(r.DroppedRecords)
	}
}

// initSeen records the environment's init duration once, from
// platform.initReport or from the first report that carries it.
func (m *Metrics) initSeen(ms float64) {
	if m.inits {
		return
	}
	m.inits = true
	m.counts[counterColdStarts]++
	m.add(seriesInitDuration, ms)
}

// WaitLastReport waits up to timeout for the platform.report of the most
// recent invoke (at shutdown, so its figures are not lost).
func (m *Metrics) WaitLastReport(timeout time.Duration) bool {
	m.mu.Lock()
	if m.reported == nil {
		m.reported = make(chan struct{}, 1)
	}
	ch := m.reported
	m.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		m.mu.Lock()
		done := m.seq == 0 || m.invokes[m.seq%invokeRing].reported
		m.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-ch:
		case <-t.C:
			return false
		}
	}
}

// Flush writes a line if anything was recorded since the last one. It
// returns the last write error, if any.
func (m *Metrics) Flush(now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flushLocked(now)
	return m.lastErr
}

func (m *Metrics) flushLocked(now time.Time) {
	empty := true
	for i := range m.series {
		if m.series[i].n > 0 {
			empty = false
		}
	}
	for _, c := range m.counts {
		if c != 0 {
			empty = false
		}
	}
	if empty {
		return
	}
	m.line = m.appendEMF(m.line[:0], now)
	if _, err := m.Out.Write(m.line); err != nil {
		m.lastErr = err
	}
	for i := range m.series {
		m.series[i].n = 0
	}
	m.counts = [numCounters]int64{}
}

// appendEMF appends one EMF document and a newline.
func (m *Metrics) appendEMF(b []byte, now time.Time) []byte {
	b = append(b, `{"_aws":{"Timestamp":`...)
	b = strconv.AppendInt(b, now.UnixMilli(), 10)
	b = append(b, `,"CloudWatchMetrics":[{"Namespace":`...)
	b = jsonquote.Append(b, m.Namespace)
	b = append(b, `,"Dimensions":[["FunctionName"]],"Metrics":[`...)
	first := true
	sep := func() {
		if !first {
			b = append(b, ',')
		}
		first = false
	}
	for i := range m.series {
		if m.series[i].n > 0 {
			sep()
			b = append(b, `{"Name":"`...)
			b = append(b, seriesInfo[i].name...)
			b = append(b, `","Unit":"`...)
			b = append(b, seriesInfo[i].unit...)
			b = append(b, `"}`...)
		}
	}
	for i, c := range m.counts {
		if c != 0 {
			sep()
			b = append(b, `{"Name":"`...)
			b = append(b, counterInfo[i]...)
			b = append(b, `","Unit":"Count"}`...)
		}
	}
	b = append(b, `]}]},"FunctionName":`...)
	b = jsonquote.Append(b, m.FunctionName)
	for i := range m.series {
		se := &m.series[i]
		if se.n == 0 {
			continue
		}
		b = append(b, `,"`...)
		b = append(b, seriesInfo[i].name...)
		b = append(b, `":[`...)
		for j, v := range se.vals[:se.n] {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendFloat(b, v, 'f', -1, 64)
		}
		b = append(b, ']')
	}
	for i, c := range m.counts {
		if c != 0 {
			b = append(b, `,"`...)
			b = append(b, counterInfo[i]...)
			b = append(b, `":`...)
			b = strconv.AppendInt(b, c, 10)
		}
	}
	return append(b, "}\n"...)
}
