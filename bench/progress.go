package bench

import (
	"sync"
	"time"
)

// monitor calls the Config's live callbacks from its own goroutine while
// the workers run: OnCalibrated once per thread at the end of the warm-up,
// Progress once a second. The returned function stops it and waits.
func monitor(c *Config, recs []*recorder, base time.Time, warm time.Duration) (stop func()) {
	if c.Progress == nil && (c.OnCalibrated == nil || c.Warmup <= 0) {
		return func() {}
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		reported := make([]bool, len(recs))
		merged := newHistogram()
		// Report each second of the measured window once every worker has
		// closed it (an event, not a time: a worker a loaded machine
		// holds up closes it late), or half a second later without the
		// ones that have not (an HTTP/2 connection that cannot connect
		// closes none), and once a second of the warm-up.
		next := warm%time.Second + time.Second
		reportedSecs := int64(0)
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			now := time.Since(base)
			if c.OnCalibrated != nil && c.Warmup > 0 {
				for i, r := range recs {
					if !reported[i] && r.calibrated.Load() {
						reported[i] = true
						c.OnCalibrated(i, time.Duration(r.calibration.Load()))
					}
				}
			}
			if c.Progress == nil {
				continue
			}
			if now < warm {
				if now < next {
					continue
				}
				for next <= now {
					next += time.Second
				}
			} else {
				closed := recs[0].closedSecs.Load()
				for _, r := range recs[1:] {
					closed = min(closed, r.closedSecs.Load())
				}
				if late := warm + time.Duration(reportedSecs+1)*time.Second + 500*time.Millisecond; closed <= reportedSecs && now < late {
					continue
				}
				reportedSecs = max(closed, int64((now-warm)/time.Second))
			}
			p := Progress{Elapsed: max(now-warm, 0), Total: c.Duration, Warmup: now < warm}
			merged.Reset()
			for _, r := range recs {
				p.Requests += r.liveRequests.Load()
				p.Errors += r.liveErrors.Load()
				r.snapMu.Lock()
				if r.lastSec != nil {
					merged.Merge(r.lastSec)
				}
				r.snapMu.Unlock()
			}
			if p.Elapsed > 0 {
				p.Rate = float64(p.Requests) / p.Elapsed.Seconds()
			}
			p.P99 = time.Duration(merged.ValueAtPercentile(99)) * time.Microsecond
			c.Progress(p)
		}
	}()
	return func() { close(quit); wg.Wait() }
}
