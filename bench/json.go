package bench

import (
	"encoding/json"
	"io"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Summary is the machine-readable form of a Result (linkgate bench --json).
// Latencies are in milliseconds.
type Summary struct {
	URL             string         `json:"url"`
	Mode            string         `json:"mode"` // "constant-rate", "stages" or "closed-loop"
	Stages          []StageSummary `json:"stages,omitempty"`
	Threads         int            `json:"threads"`
	Connections     int            `json:"connections"`
	RequestedRate   float64        `json:"requested_rate,omitempty"`
	WarmupSeconds   float64        `json:"warmup_seconds"`
	DurationSeconds float64        `json:"duration_seconds"`
	ElapsedSeconds  float64        `json:"elapsed_seconds"`
	Requests        int64          `json:"requests"`
	Bytes           int64          `json:"bytes"`
	RequestsPerSec  float64        `json:"requests_per_sec"`
	BytesPerSec     float64        `json:"bytes_per_sec"`

	Latency     LatencySummary     `json:"latency"`
	Uncorrected LatencySummary     `json:"uncorrected_latency"`
	ThreadRate  RateSummary        `json:"thread_requests_per_sec"`
	Errors      Errors             `json:"errors"`
	ErrorsTotal int64              `json:"errors_total"`
	InFlightEnd int64              `json:"in_flight_at_end"`
	UnsentAtEnd int64              `json:"unsent_at_end"`
	Generator   GeneratorCheck     `json:"generator"`
	TLS         *TLSSummary        `json:"tls,omitempty"`
	HTTP2       *H2Summary         `json:"http2,omitempty"`
	Thresholds  []ThresholdVerdict `json:"thresholds,omitempty"`
	// Series is the measured window second by second; Histograms are the
	// run's histograms encoded, for linkgate bench merge.
	Series     []SecondSummary `json:"series"`
	Histograms *Histograms     `json:"histograms,omitempty"`
	Warnings   []string        `json:"warnings"`
	// Agents are the agents of a distributed run (--agents), one row
	// each; Invalid says, naming them, why the run is not to be trusted.
	Agents  []AgentSummary `json:"agents,omitempty"`
	Invalid []string       `json:"invalid,omitempty"`
}

// AgentSummary is one agent's part of a distributed run: its share, what
// it achieved, its send lag, its clock, and what went wrong.
type AgentSummary struct {
	Agent          string   `json:"agent"`
	Weight         float64  `json:"weight"`
	RequestedRate  float64  `json:"requested_rate,omitempty"`
	Connections    int      `json:"connections"`
	Requests       int64    `json:"requests"`
	RequestsPerSec float64  `json:"requests_per_sec"`
	Errors         int64    `json:"errors_total"`
	SendLagP99Ms   float64  `json:"send_lag_p99_ms"`
	StartLagMs     float64  `json:"start_lag_ms"`
	ClockOffsetMs  float64  `json:"clock_offset_ms"`
	ClockRTTMs     float64  `json:"clock_rtt_ms"`
	Error          string   `json:"error,omitempty"`
	Problems       []string `json:"problems"`
}

// StageSummary is one stage of a --stages ramp.
type StageSummary struct {
	DurationSeconds float64 `json:"duration_seconds"`
	Target          float64 `json:"target_rate"`
}

// H2Summary is the HTTP/2 side of a run.
type H2Summary struct {
	Connections          int   `json:"connections"`
	StreamsPerConnection int   `json:"streams_per_connection"`
	RSTStream            int64 `json:"rst_stream"`
	GoAway               int64 `json:"goaway"`
	Refused              int64 `json:"refused_sent_again"`
}

// ThresholdVerdict is a checked --threshold: its text, the value found (µs
// for latencies, a share or a count for errors, req/s for rps) and
// whether it held.
type ThresholdVerdict struct {
	Threshold string  `json:"threshold"`
	Value     float64 `json:"value"`
	Pass      bool    `json:"pass"`
}

// WithVerdicts adds checked thresholds to a summary.
func (s *Summary) WithVerdicts(vs []Verdict) {
	for _, v := range vs {
		s.Thresholds = append(s.Thresholds, ThresholdVerdict{Threshold: v.Threshold.String(), Value: v.Got, Pass: v.Pass})
	}
}

// TLSSummary describes the TLS side of an https run: the version and ALPN
// protocol negotiated, the handshakes completed in the measured window and
// how long they took (TCP connect excluded).
type TLSSummary struct {
	Version    string         `json:"version"`
	ALPN       string         `json:"alpn"`
	Handshakes int64          `json:"handshakes"`
	Resumed    int64          `json:"resumed"`
	Handshake  LatencySummary `json:"handshake"`
}

// LatencySummary describes one latency histogram.
type LatencySummary struct {
	Count       int64              `json:"count"`
	MinMs       float64            `json:"min_ms"`
	MeanMs      float64            `json:"mean_ms"`
	StdevMs     float64            `json:"stdev_ms"`
	MaxMs       float64            `json:"max_ms"`
	Percentiles map[string]float64 `json:"percentiles_ms"`
	Spectrum    []SpectrumPoint    `json:"spectrum,omitempty"`
}

// SpectrumPoint is one row of the detailed percentile spectrum.
type SpectrumPoint struct {
	Percentile float64 `json:"percentile"`
	ValueMs    float64 `json:"value_ms"`
	Count      int64   `json:"count"`
}

// RateSummary describes the per-thread request rate samples.
type RateSummary struct {
	Mean  float64 `json:"mean"`
	Stdev float64 `json:"stdev"`
	Max   float64 `json:"max"`
}

// GeneratorCheck is the generator's verdict on itself.
type GeneratorCheck struct {
	Limited           bool           `json:"limited"`
	Reasons           []string       `json:"reasons"`
	SendLag           LatencySummary `json:"send_lag"`
	ConnectionsNeeded float64        `json:"connections_needed,omitempty"`
}

// Summarize builds the Summary of r; spectrum adds the full percentile
// spectrum of both latency histograms.
func (r *Result) Summarize(spectrum bool) Summary {
	s := Summary{
		URL: r.URL, Mode: "closed-loop", Threads: r.Threads, Connections: r.Connections,
		RequestedRate: r.Rate, WarmupSeconds: r.Warmup.Seconds(), DurationSeconds: r.Duration.Seconds(),
		ElapsedSeconds: r.Elapsed.Seconds(), Requests: r.Requests, Bytes: r.Bytes,
		RequestsPerSec: r.Achieved(),
		Latency:        summarizeLatency(r.Latency, spectrum),
		Uncorrected:    summarizeLatency(r.Uncorrected, spectrum),
		ThreadRate:     RateSummary{Mean: r.ReqPerSec.Mean(), Stdev: r.ReqPerSec.StdDev(), Max: float64(r.ReqPerSec.Max())},
		Errors:         r.Errors,
		ErrorsTotal:    r.Errors.Total(),
		InFlightEnd:    r.InFlightAtEnd,
		UnsentAtEnd:    r.UnsentAtEnd,
		Warnings:       r.Warnings(),
	}
	if r.Rate > 0 {
		s.Mode = "constant-rate"
	}
	if len(r.Stages) > 0 {
		s.Mode = "stages"
		for _, st := range r.Stages {
			s.Stages = append(s.Stages, StageSummary{DurationSeconds: st.Duration.Seconds(), Target: st.Target})
		}
	}
	if h := r.HTTP2; h != nil {
		s.HTTP2 = &H2Summary{Connections: h.Connections, StreamsPerConnection: h.Streams, RSTStream: h.Resets, GoAway: h.GoAways, Refused: h.Refused}
	}
	if t := r.TLS; t != nil {
		s.TLS = &TLSSummary{Version: t.Version, ALPN: t.ALPN, Handshakes: t.Handshake.TotalCount(), Resumed: t.Resumed,
			Handshake: summarizeLatency(t.Handshake, false)}
	}
	if r.Elapsed > 0 {
		s.BytesPerSec = float64(r.Bytes) / r.Elapsed.Seconds()
	}
	s.Series = summarizeSeries(r.Series)
	s.Histograms, _ = r.encodeHistograms()
	s.Generator.Limited, s.Generator.Reasons = r.GeneratorLimited()
	s.Generator.SendLag = summarizeLatency(r.SendLag, false)
	s.Generator.ConnectionsNeeded = r.ConnectionsNeeded()
	if s.Warnings == nil {
		s.Warnings = []string{}
	}
	if s.Generator.Reasons == nil {
		s.Generator.Reasons = []string{}
	}
	return s
}

func summarizeLatency(h *hdrhistogram.Histogram, spectrum bool) LatencySummary {
	l := LatencySummary{
		Count: h.TotalCount(), MinMs: Millis(h.Min()), MeanMs: h.Mean() / 1000,
		StdevMs: h.StdDev() / 1000, MaxMs: Millis(h.Max()),
		Percentiles: map[string]float64{},
	}
	for _, p := range ReportPercentiles {
		l.Percentiles[percentileKey(p)] = Millis(h.ValueAtPercentile(p))
	}
	if spectrum {
		for _, b := range h.CumulativeDistributionWithTicks(5) {
			l.Spectrum = append(l.Spectrum, SpectrumPoint{Percentile: b.Quantile, ValueMs: Millis(b.ValueAt), Count: b.Count})
		}
	}
	return l
}

// WriteJSON writes the Summary of r, with the percentile spectrum, indented.
func WriteJSON(w io.Writer, r *Result) error {
	return WriteSummary(w, r.Summarize(true))
}

// WriteSummary writes s indented.
func WriteSummary(w io.Writer, s Summary) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}
