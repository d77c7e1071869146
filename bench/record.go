package bench

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// recorder holds one thread's figures. Only its thread writes them; the
// snapshot is how the progress line reads them while the run goes on.
type recorder struct {
	latency, uncorrected, lag *hdrhistogram.Histogram
	requests, bytes           int64
	errs                      Errors
	status                    [600]int64 // index: status code (≥ 400 are errors)
	inFlight, unsent          int64
	handshake                 *hdrhistogram.Histogram // TLS handshakes completed in the measured window
	resumed                   int64                   // of which resumed a session
	samples                   []float64               // requests per second, one per SampleInterval

	warmSum, warmCount int64        // corrected latency during the warm-up, for calibration
	calibration        atomic.Int64 // mean warm-up latency in ns, set when calibrated
	calibrated         atomic.Bool

	// The per-second series: the current second's corrected latencies,
	// and every finished second (its histogram encoded).
	sec              *hdrhistogram.Histogram
	secIdx           int
	secReqs, secErrs int64 // totals when the current second started
	seconds          []threadSecond

	// Shared with the progress reader.
	liveRequests atomic.Int64
	liveErrors   atomic.Int64
	closedSecs   atomic.Int64 // seconds of the measured window closed (lastSec is the last of them)
	live         bool         // a progress reader wants lastSec
	snapMu       sync.Mutex
	lastSec      *hdrhistogram.Histogram // the last finished second, for the live line
}

// threadSecond is one second of one thread; bars are its histogram's
// non-empty buckets (value, count), which rebuild it exactly.
type threadSecond struct {
	idx              int
	requests, errors int64
	bars             []hdrhistogram.Bar
}

func newRecorder(duration time.Duration, live bool) *recorder {
	return &recorder{
		live:        live,
		latency:     newHistogram(),
		uncorrected: newHistogram(),
		lag:         newHistogram(),
		handshake:   newHistogram(),
		sec:         newHistogram(),
		samples:     make([]float64, 0, int(duration/SampleInterval)+2),
	}
}

// micros converts a duration to whole microseconds for the histograms,
// clamped to their range.
func micros(d time.Duration) int64 {
	us := int64(d / time.Microsecond)
	switch {
	case us < 0:
		return 0
	case us > histMax:
		return histMax
	}
	return us
}

// lateAtEnd records the send lag of a request that was due at due on a
// free connection and not sent when the run ended at end: the lag a send
// at the end would have had. A generator that falls behind just before the
// end cannot hide it by never sending.
func (r *recorder) lateAtEnd(due, end time.Duration) {
	_ = r.lag.RecordValue(micros(end - due))
}

// latencies records one request's corrected and uncorrected latency, at
// offset at of the measured window (for the per-second series).
func (r *recorder) latencies(corrected, uncorrected, at time.Duration) {
	r.corrected(corrected, at)
	_ = r.uncorrected.RecordValue(micros(uncorrected))
}

// corrected records a corrected latency only (a request never sent).
func (r *recorder) corrected(d, at time.Duration) {
	if s := int(at / time.Second); s != r.secIdx && at >= 0 {
		r.nextSecond(s)
	}
	_ = r.latency.RecordValue(micros(d))
	_ = r.sec.RecordValue(micros(d))
}

// nextSecond closes the current second of the series and starts second s.
// It runs once a second, off the per-request path.
func (r *recorder) nextSecond(s int) {
	if s < r.secIdx {
		return
	}
	errs := r.errorCount()
	if n := r.requests - r.secReqs; n > 0 || errs > r.secErrs || r.sec.TotalCount() > 0 {
		var bars []hdrhistogram.Bar
		for _, b := range r.sec.Distribution() {
			if b.Count > 0 {
				bars = append(bars, b)
			}
		}
		r.seconds = append(r.seconds, threadSecond{idx: r.secIdx, requests: n, errors: errs - r.secErrs, bars: bars})
		if r.live && r.snapMu.TryLock() {
			if r.lastSec == nil {
				r.lastSec = newHistogram()
			}
			r.lastSec.Reset()
			r.lastSec.Merge(r.sec)
			r.snapMu.Unlock()
		}
	}
	r.sec.Reset()
	r.secIdx, r.secReqs, r.secErrs = s, r.requests, errs
	r.closedSecs.Store(int64(s))
}

func (r *recorder) errorCount() int64 {
	n := r.errs.Socket()
	for _, v := range r.status[400:] {
		n += v
	}
	return n
}

// publish makes the live counts visible to the progress reader (the last
// second's histogram is published by nextSecond).
func (r *recorder) publish() {
	r.liveRequests.Store(r.requests)
	r.liveErrors.Store(r.errorCount())
}

// merge combines the threads' recorders into a Result; withTLS adds the
// TLS figures.
func merge(res *Result, recs []*recorder, withTLS bool) {
	if withTLS {
		res.TLS = &TLSResult{Handshake: newHistogram()}
	}
	res.Latency, res.Uncorrected = newHistogram(), newHistogram()
	res.SendLag, res.ReqPerSec = newHistogram(), hdrhistogram.New(1, rateHistMax, histDigits)
	res.Errors.Status = map[int]int64{}
	for _, r := range recs {
		res.Latency.Merge(r.latency)
		res.Uncorrected.Merge(r.uncorrected)
		res.SendLag.Merge(r.lag)
		res.Requests += r.requests
		res.Bytes += r.bytes
		res.Errors.Connect += r.errs.Connect
		res.Errors.Read += r.errs.Read
		res.Errors.Write += r.errs.Write
		res.Errors.Timeout += r.errs.Timeout
		res.Errors.Handshake += r.errs.Handshake
		res.Errors.Certificate += r.errs.Certificate
		if res.TLS != nil {
			res.TLS.Handshake.Merge(r.handshake)
			res.TLS.Resumed += r.resumed
		}
		for code, n := range r.status[400:] {
			if n > 0 {
				res.Errors.Status[400+code] += n
			}
		}
		res.InFlightAtEnd += r.inFlight
		res.UnsentAtEnd += r.unsent
		r.nextSecond(r.secIdx + 1)
		res.Series = mergeThreadSeconds(res.Series, r.seconds)
		for _, s := range r.samples {
			_ = res.ReqPerSec.RecordValue(int64(s + 0.5))
		}
		var mean time.Duration
		if r.warmCount > 0 {
			mean = time.Duration(r.warmSum / r.warmCount)
		}
		res.Calibration = append(res.Calibration, mean)
	}
}
