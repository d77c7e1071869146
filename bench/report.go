package bench

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// ReportPercentiles are the rows of wrk2's latency distribution.
var ReportPercentiles = []float64{50, 75, 90, 99, 99.9, 99.99, 99.999, 100}

const rule = "----------------------------------------------------------\n"

// WriteHeader prints wrk2's first two lines.
func WriteHeader(w io.Writer, url string, duration time.Duration, threads, connections int) error {
	_, err := fmt.Fprintf(w, "Running %s test @ %s\n  %d threads and %d connections\n",
		FormatTimeS(math.Round(duration.Seconds())), url, threads, connections)
	return err
}

// WriteCalibration prints wrk2's per-thread calibration line; linkgate prints
// it at the end of an explicit warm-up, with the warm-up's mean latency.
func WriteCalibration(w io.Writer, mean time.Duration) error {
	_, err := fmt.Fprintf(w, "  Thread calibration: mean lat.: %.3fms, rate sampling interval: %dms\n",
		float64(mean)/1e6, SampleInterval.Milliseconds())
	return err
}

// TextOptions select the optional blocks of the text report.
type TextOptions struct {
	Latency     bool // -L: the corrected latency distribution
	Uncorrected bool // -U: the uncorrected one too
}

// WriteText prints the result as wrk2 does after its header: thread
// statistics, the HdrHistogram latency blocks, the totals, error lines and
// rates — then linkgate's warnings, one "Warning:" line each.
func WriteText(w io.Writer, r *Result, opt TextOptions) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "  Thread Stats%6s%11s%8s%12s\n", "Avg", "Stdev", "Max", "+/- Stdev")
	statsRow(&b, "Latency", r.Latency, float64(r.Latency.Max()), FormatTimeUS)
	statsRow(&b, "Req/Sec", r.ReqPerSec, float64(r.ReqPerSec.Max()), FormatMetric)
	if opt.Latency || opt.Uncorrected {
		latencyBlock(&b, r.Latency, "Recorded Latency")
		b.WriteString(rule)
	}
	if opt.Uncorrected {
		b.WriteString("\n")
		latencyBlock(&b, r.Uncorrected, "Uncorrected Latency (measured without taking delayed starts into account)")
		b.WriteString(rule)
	}
	elapsed := float64(r.Elapsed) / float64(time.Microsecond)
	fmt.Fprintf(&b, "  %d requests in %s, %sB read\n", r.Requests, FormatTimeUS(elapsed), FormatBinary(float64(r.Bytes)))
	if e := r.Errors; e.Connect+e.Read+e.Write+e.Timeout > 0 {
		fmt.Fprintf(&b, "  Socket errors: connect %d, read %d, write %d, timeout %d\n", e.Connect, e.Read, e.Write, e.Timeout)
	}
	if e := r.Errors; e.Handshake+e.Certificate > 0 {
		fmt.Fprintf(&b, "  TLS errors: handshake %d, certificate %d\n", e.Handshake, e.Certificate)
	}
	if h := r.HTTP2; h != nil {
		fmt.Fprintf(&b, "  HTTP/2: %d connections × %d streams; RST_STREAM %d, GOAWAY %d, refused and sent again %d\n",
			h.Connections, h.Streams, h.Resets, h.GoAways, h.Refused)
	}
	if t := r.TLS; t != nil {
		alpn := t.ALPN
		if alpn == "" {
			alpn = "none"
		}
		h := t.Handshake
		fmt.Fprintf(&b, "  %s, ALPN %s: %d handshakes (%d resumed), handshake p50 %s, p99 %s, max %s\n", t.Version, alpn,
			h.TotalCount(), t.Resumed, FormatTimeUS(float64(h.ValueAtPercentile(50))),
			FormatTimeUS(float64(h.ValueAtPercentile(99))), FormatTimeUS(float64(h.Max())))
	}
	if n := r.Errors.StatusTotal(); n > 0 {
		fmt.Fprintf(&b, "  Non-2xx or 3xx responses: %d\n", n)
	}
	secs := r.Elapsed.Seconds()
	if secs <= 0 {
		secs = math.NaN()
	}
	fmt.Fprintf(&b, "Requests/sec: %9.2f\n", float64(r.Requests)/secs)
	fmt.Fprintf(&b, "Transfer/sec: %10sB\n", FormatBinary(float64(r.Bytes)/secs))
	for _, warning := range r.Warnings() {
		fmt.Fprintf(&b, "Warning: %s\n", warning)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// statsRow prints one "Thread Stats" row: mean, standard deviation, max and
// the share of values within one standard deviation of the mean.
func statsRow(b *bytes.Buffer, name string, h *hdrhistogram.Histogram, maxV float64, format func(float64) string) {
	mean, stdev := h.Mean(), h.StdDev()
	fmt.Fprintf(b, "    %-10s", name)
	b.WriteString(padUnits(format(mean), 8))
	b.WriteString(padUnits(format(stdev), 10))
	b.WriteString(padUnits(format(maxV), 9))
	fmt.Fprintf(b, "%8.2f%%\n", withinStdev(h, mean, stdev))
}

// withinStdev is the percentage of recorded values within one standard
// deviation of the mean, computed over the histogram's buckets as wrk2 does.
func withinStdev(h *hdrhistogram.Histogram, mean, stdev float64) float64 {
	total := h.TotalCount()
	if total == 0 {
		return 0
	}
	lower, upper := int64(mean-stdev), int64(mean+stdev)
	var lowerCount, upperCount, cum int64
	found := false
	for _, bar := range h.Distribution() {
		cum += bar.Count
		if lower > bar.From {
			lowerCount = cum
		}
		if upper < bar.To {
			upperCount, found = cum, true
			break
		}
	}
	if !found {
		upperCount = total
	}
	return 100 * float64(upperCount-lowerCount) / float64(total)
}

// latencyBlock prints the eight-row distribution and the detailed percentile
// spectrum of h.
func latencyBlock(b *bytes.Buffer, h *hdrhistogram.Histogram, title string) {
	fmt.Fprintf(b, "  Latency Distribution (HdrHistogram - %s)\n", title)
	for _, p := range ReportPercentiles {
		fmt.Fprintf(b, "%7.3f%%", p)
		b.WriteString(padUnits(FormatTimeUS(float64(h.ValueAtPercentile(p))), 10))
		b.WriteString("\n")
	}
	b.WriteString("\n  Detailed Percentile spectrum:\n")
	_ = WriteSpectrum(b, h)
}

// WriteSpectrum prints h's percentile spectrum in milliseconds, five ticks
// per half-distance, in the classic HdrHistogram layout wrk2 uses — which is
// also the .hgrm format the HdrHistogram plotter reads.
func WriteSpectrum(w io.Writer, h *hdrhistogram.Histogram) error {
	var spec bytes.Buffer
	if _, err := h.PercentilesPrint(&spec, 5, 1000.0); err != nil {
		return err
	}
	// hdrhistogram-go prints a tab-separated header; wrk2 pads to 12 columns.
	body := spec.Bytes()
	if i := bytes.IndexByte(body, '\n'); i >= 0 {
		body = body[i+1:]
	}
	if _, err := fmt.Fprintf(w, "%12s %12s %12s %12s\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)"); err != nil {
		return err
	}
	_, err := w.Write(body)
	return err
}

// Millis is a duration in milliseconds as a float, for reports.
func Millis(us int64) float64 { return float64(us) / 1000 }

// percentileKey is the JSON key of a percentile: "99.9".
func percentileKey(p float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", p), "0"), ".")
}
