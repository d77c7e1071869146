package bench

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histograms are a result's HdrHistograms in the standard compressed
// base64 encoding (V2), in --json, so that results of several generators
// can be merged exactly: bucket counts add, percentiles are never averaged.
type Histograms struct {
	Latency     string `json:"latency"`
	Uncorrected string `json:"uncorrected"`
	SendLag     string `json:"send_lag"`
	ThreadRate  string `json:"thread_requests_per_sec"`
	Handshake   string `json:"tls_handshake,omitempty"`
}

func encode(h *hdrhistogram.Histogram) (string, error) {
	b, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	return string(b), err
}

func (r *Result) encodeHistograms() (*Histograms, error) {
	var hs Histograms
	var err error
	for _, x := range []struct {
		dst *string
		h   *hdrhistogram.Histogram
	}{{&hs.Latency, r.Latency}, {&hs.Uncorrected, r.Uncorrected}, {&hs.SendLag, r.SendLag}, {&hs.ThreadRate, r.ReqPerSec}} {
		if *x.dst, err = encode(x.h); err != nil {
			return nil, err
		}
	}
	if r.TLS != nil {
		if hs.Handshake, err = encode(r.TLS.Handshake); err != nil {
			return nil, err
		}
	}
	return &hs, nil
}

// ResultFromSummary rebuilds the Result a --json file describes, from its
// encoded histograms and its counts.
func ResultFromSummary(s *Summary) (*Result, error) {
	if s.Histograms == nil {
		return nil, errors.New("no histograms in it (written by a linkgate bench without them?)")
	}
	r := &Result{
		URL: s.URL, Threads: s.Threads, Connections: s.Connections, Rate: s.RequestedRate,
		Warmup:   time.Duration(s.WarmupSeconds * float64(time.Second)),
		Duration: time.Duration(s.DurationSeconds * float64(time.Second)),
		Elapsed:  time.Duration(s.ElapsedSeconds * float64(time.Second)),
		Requests: s.Requests, Bytes: s.Bytes, Errors: s.Errors, InFlightAtEnd: s.InFlightEnd, UnsentAtEnd: s.UnsentAtEnd,
	}
	var err error
	if r.Series, err = seriesFromSummary(s.Series); err != nil {
		return nil, err
	}
	if r.Errors.Status == nil {
		r.Errors.Status = map[int]int64{}
	}
	for _, x := range []struct {
		name    string
		enc     string
		highest int64
		dst     **hdrhistogram.Histogram
	}{{"latency", s.Histograms.Latency, histMax, &r.Latency}, {"uncorrected", s.Histograms.Uncorrected, histMax, &r.Uncorrected},
		{"send_lag", s.Histograms.SendLag, histMax, &r.SendLag}, {"thread_requests_per_sec", s.Histograms.ThreadRate, rateHistMax, &r.ReqPerSec}} {
		h, err := decodeHistogram(x.enc, x.highest)
		if err != nil {
			return nil, fmt.Errorf("histogram %s: %w", x.name, err)
		}
		*x.dst = h
	}
	if h := s.HTTP2; h != nil {
		r.HTTP2 = &H2Result{Connections: h.Connections, Streams: h.StreamsPerConnection, Resets: h.RSTStream, GoAways: h.GoAway, Refused: h.Refused}
	}
	if s.TLS != nil {
		r.TLS = &TLSResult{Version: s.TLS.Version, ALPN: s.TLS.ALPN, Resumed: s.TLS.Resumed, Handshake: newHistogram()}
		if s.Histograms.Handshake != "" {
			h, err := decodeHistogram(s.Histograms.Handshake, histMax)
			if err != nil {
				return nil, fmt.Errorf("histogram tls_handshake: %w", err)
			}
			r.TLS.Handshake = h
		}
	}
	return r, nil
}

// rateHistMax bounds the histogram of per-thread request rates.
const rateHistMax = 1 << 40

// decodeHistogram decodes one of a result file's histograms, which must
// have the geometry linkgate bench records with: 1 µs – 1 h (latencies)
// or 1 – highest (rates), at 3 digits.
// That is checked in the header before hdrhistogram.Decode allocates the
// counts the header asks for: a 56-byte histogram of 1 – 2^62 at 5 digits
// would cost 49 MB, and a file can hold thousands.
func decodeHistogram(enc string, highest int64) (*hdrhistogram.Histogram, error) {
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(raw) < 8 {
		return nil, errors.New("not a base64 V2 compressed HdrHistogram")
	}
	z, err := zlib.NewReader(bytes.NewReader(raw[8:]))
	if err != nil {
		return nil, fmt.Errorf("not a V2 compressed HdrHistogram: %w", err)
	}
	var hdr struct {
		Cookie, PayloadLength, NormalizingIndexOffset, Digits int32
		Lowest, Highest                                       int64
	}
	if err := binary.Read(io.LimitReader(z, 32), binary.BigEndian, &hdr); err != nil {
		return nil, fmt.Errorf("not a V2 compressed HdrHistogram: %w", err)
	}
	if hdr.Lowest != histMin || hdr.Highest != highest || hdr.Digits != histDigits {
		return nil, fmt.Errorf("a histogram of %d–%d at %d digits, not linkgate bench's %d–%d at %d", hdr.Lowest, hdr.Highest, hdr.Digits,
			histMin, highest, histDigits)
	}
	return hdrhistogram.Decode([]byte(enc))
}

// Merge combines the results of generators that ran side by side against
// one target (started together with --start-at): histograms merge bucket
// by bucket, counts add up, threads, connections and requested rates add
// up, and the measured window is the longest of theirs.
func Merge(rs []*Result) (*Result, error) {
	if len(rs) == 0 {
		return nil, errors.New("nothing to merge")
	}
	m := &Result{
		Latency: newHistogram(), Uncorrected: newHistogram(), SendLag: newHistogram(),
		ReqPerSec: hdrhistogram.New(1, rateHistMax, histDigits), Errors: Errors{Status: map[int]int64{}},
	}
	var urls []string
	for _, r := range rs {
		if !containsString(urls, r.URL) {
			urls = append(urls, r.URL)
		}
		m.Threads += r.Threads
		m.Connections += r.Connections
		m.Rate += r.Rate
		m.Warmup, m.Duration, m.Elapsed = max(m.Warmup, r.Warmup), max(m.Duration, r.Duration), max(m.Elapsed, r.Elapsed)
		m.Requests += r.Requests
		m.Bytes += r.Bytes
		m.InFlightAtEnd += r.InFlightAtEnd
		m.UnsentAtEnd += r.UnsentAtEnd
		m.Errors.Connect += r.Errors.Connect
		m.Errors.Read += r.Errors.Read
		m.Errors.Write += r.Errors.Write
		m.Errors.Timeout += r.Errors.Timeout
		m.Errors.Handshake += r.Errors.Handshake
		m.Errors.Certificate += r.Errors.Certificate
		for code, n := range r.Errors.Status {
			m.Errors.Status[code] += n
		}
		for _, pair := range []struct{ dst, src *hdrhistogram.Histogram }{
			{m.Latency, r.Latency}, {m.Uncorrected, r.Uncorrected}, {m.SendLag, r.SendLag}, {m.ReqPerSec, r.ReqPerSec}} {
			if dropped := pair.dst.Merge(pair.src); dropped > 0 {
				return nil, fmt.Errorf("%d values out of range in a merged histogram", dropped)
			}
		}
		if r.TLS != nil {
			if m.TLS == nil {
				m.TLS = &TLSResult{Version: r.TLS.Version, ALPN: r.TLS.ALPN, Handshake: newHistogram()}
			}
			m.TLS.Handshake.Merge(r.TLS.Handshake)
			m.TLS.Resumed += r.TLS.Resumed
		}
		m.Series = mergeSeries(m.Series, r.Series)
		if h := r.HTTP2; h != nil {
			if m.HTTP2 == nil {
				m.HTTP2 = &H2Result{Streams: h.Streams}
			}
			m.HTTP2.Connections += h.Connections
			m.HTTP2.Resets += h.Resets
			m.HTTP2.GoAways += h.GoAways
			m.HTTP2.Refused += h.Refused
		}
	}
	m.URL = strings.Join(urls, " ")
	return m, nil
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Concat combines the results of consecutive steps of one run (a run cut
// into steps, each as long as an invocation may last): histograms merge,
// counts add up, the measured windows follow one another — the series of
// each step starts where the previous one's window ended — and threads,
// connections and the requested rate are the steps' (the largest).
func Concat(rs []*Result) (*Result, error) {
	if len(rs) == 0 {
		return nil, errors.New("nothing to concatenate")
	}
	shifted := make([]*Result, len(rs))
	var offset int
	var duration, elapsed time.Duration
	threads, conns, rate := 0, 0, 0.0
	for i, r := range rs {
		c := *r
		c.Series = make([]Second, len(r.Series))
		for j, s := range r.Series {
			s.Index += offset
			c.Series[j] = s
		}
		offset += int((r.Duration + time.Second - 1) / time.Second)
		duration += r.Duration
		elapsed += r.Elapsed
		threads, conns, rate = max(threads, r.Threads), max(conns, r.Connections), max(rate, r.Rate)
		shifted[i] = &c
	}
	m, err := Merge(shifted)
	if err != nil {
		return nil, err
	}
	m.Threads, m.Connections, m.Rate = threads, conns, rate
	m.Duration, m.Elapsed, m.Warmup = duration, elapsed, rs[0].Warmup
	return m, nil
}
