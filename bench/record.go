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

	// Shared with the progress reader.
	liveRequests atomic.Int64
	liveErrors   atomic.Int64
	snapMu       sync.Mutex
	snap         *hdrhistogram.Histogram // copy of latency, refreshed each sample
}

func newRecorder(duration time.Duration) *recorder {
	return &recorder{
		latency:     newHistogram(),
		uncorrected: newHistogram(),
		lag:         newHistogram(),
		handshake:   newHistogram(),
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

// latencies records one request's corrected and uncorrected latency.
func (r *recorder) latencies(corrected, uncorrected time.Duration) {
	_ = r.latency.RecordValue(micros(corrected))
	_ = r.uncorrected.RecordValue(micros(uncorrected))
}

func (r *recorder) errorCount() int64 {
	n := r.errs.Socket()
	for _, v := range r.status[400:] {
		n += v
	}
	return n
}

// publish makes the live figures visible to the progress reader.
func (r *recorder) publish(withHistogram bool) {
	r.liveRequests.Store(r.requests)
	r.liveErrors.Store(r.errorCount())
	if withHistogram {
		r.snapMu.Lock()
		if r.snap == nil {
			r.snap = newHistogram()
		}
		r.snap.Reset()
		r.snap.Merge(r.latency)
		r.snapMu.Unlock()
	}
}

// merge combines the threads' recorders into a Result; withTLS adds the
// TLS figures.
func merge(res *Result, recs []*recorder, withTLS bool) {
	if withTLS {
		res.TLS = &TLSResult{Handshake: newHistogram()}
	}
	res.Latency, res.Uncorrected = newHistogram(), newHistogram()
	res.SendLag, res.ReqPerSec = newHistogram(), hdrhistogram.New(1, 1<<40, histDigits)
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
