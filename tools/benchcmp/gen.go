package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/linkgate/linkgate/bench"
)

// A generator is one load generator this tool can drive: how to run it for
// a target and how to read what it printed into the figures of a Record.
// To add one (an anchor such as h2load), write its args and parse, add it to
// generators, and test parse against a saved output of the real tool.
type generator struct {
	// args is the command line, without the taskset prefix; json is a
	// file the generator may write its report to.
	args func(t *Target, json string) []string
	// parse reads stdout (and the json file) into figures.
	parse func(stdout []byte, json string) (map[string]float64, error)
}

var generators = map[string]generator{
	"wrk":      {args: wrkArgs, parse: func(out []byte, _ string) (map[string]float64, error) { return parseWrk(out) }},
	"linkgate": {args: linkgateArgs, parse: func(_ []byte, json string) (map[string]float64, error) { return parseLinkgateJSON(json) }},
	"vegeta":   {args: vegetaArgs, parse: func(out []byte, _ string) (map[string]float64, error) { return parseVegeta(out) }},
	"h2load":   {args: h2loadArgs, parse: parseH2loadRun},
}

// h2loadArgs runs nghttp2's h2load for the duration: c connections, the
// streams per connection from m= (default 1), each request's time written
// to log (--log-file) when it is named.
func h2loadArgs(t *Target, log string) []string {
	a := []string{t.Bin, "-t" + strconv.Itoa(t.Threads), "-c" + strconv.Itoa(t.Conns), "-m" + strconv.Itoa(max(t.Streams, 1)),
		"-D", seconds(t.Duration)}
	if log != "" {
		a = append(a, "--log-file="+log)
	}
	a = append(a, t.Args...)
	return append(a, t.URL)
}

// parseH2loadRun reads h2load's summary and, from its log file, the
// latency percentiles it does not print.
func parseH2loadRun(out []byte, log string) (map[string]float64, error) {
	v, err := parseH2load(out)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(log)
	if err != nil {
		return nil, fmt.Errorf("h2load --log-file: %w", err)
	}
	p, err := parseH2loadLog(b)
	if err != nil {
		return nil, err
	}
	maps.Copy(v, p)
	return v, nil
}

// parseH2loadLog reads h2load's --log-file (per request: start in µs since
// the epoch, status, µs to the end of the response, tab-separated) into
// the nearest-rank latency percentiles p50, p90, p99 and p99.9 and the
// max, in ms.
func parseH2loadLog(b []byte) (map[string]float64, error) {
	var us []float64
	for line := range strings.Lines(string(b)) {
		f := strings.Split(strings.TrimRight(line, "\n"), "\t")
		if len(f) != 3 {
			return nil, fmt.Errorf("h2load log: line %q: want 3 tab-separated fields", line)
		}
		d, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return nil, fmt.Errorf("h2load log: line %q: %w", line, err)
		}
		us = append(us, d)
	}
	if len(us) == 0 {
		return nil, errors.New("h2load log: no request")
	}
	slices.Sort(us)
	rank := func(q float64) float64 { return us[max(int(math.Ceil(q*float64(len(us))))-1, 0)] / 1e3 }
	return map[string]float64{"p50": rank(0.50), "p90": rank(0.90), "p99": rank(0.99), "p99.9": rank(0.999), "max": us[len(us)-1] / 1e3}, nil
}

// parseH2load reads h2load's summary: the rate, the request counts, the
// status classes and the mean time for request (h2load prints no
// percentiles).
func parseH2load(out []byte) (map[string]float64, error) {
	v := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	num := func(s string) float64 {
		x, _ := strconv.ParseFloat(strings.TrimRight(s, ","), 64)
		return x
	}
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 5 && f[0] == "finished" && f[1] == "in":
			r, err := strconv.ParseFloat(f[3], 64)
			if err != nil {
				return nil, fmt.Errorf("h2load: %q: %w", sc.Text(), err)
			}
			v["rps"] = r
		case len(f) >= 15 && f[0] == "requests:":
			v["requests"] = num(f[5])
			v["errors"] = num(f[11]) + num(f[13])
		case len(f) >= 10 && f[0] == "status" && f[1] == "codes:":
			v["non2xx"] = num(f[6]) + num(f[8])
		case len(f) >= 6 && f[0] == "time" && f[2] == "request:":
			ms, err := wrkMillis(f[5]) // the same units: 28us, 74.17ms, 1.2s
			if err != nil {
				return nil, err
			}
			v["avg"] = ms
		}
	}
	if _, ok := v["rps"]; !ok {
		return nil, fmt.Errorf("h2load printed no \"finished in\" line:\n%s", out)
	}
	if _, ok := v["requests"]; !ok {
		return nil, fmt.Errorf("h2load printed no request counts:\n%s", out)
	}
	return v, nil
}

// vegetaArgs runs vegeta attack at maximum throughput (-rate=0) with c
// workers, piped into vegeta report -type=json; both pinned alike.
func vegetaArgs(t *Target, _ string) []string {
	script := `printf 'GET %s\n' "$2" | "$1" attack -rate=0 -workers=$3 -max-workers=$3 -duration=$4 -keepalive=true "${@:5}" | "$1" report -type=json`
	a := []string{"bash", "-c", script, "vegeta", t.Bin, t.URL, strconv.Itoa(t.Conns), seconds(t.Duration)}
	return append(a, t.Args...)
}

// parseVegeta reads vegeta report -type=json: latencies in ns, the request
// count, the status codes (code 0 is a connection error).
func parseVegeta(out []byte) (map[string]float64, error) {
	var r struct {
		Latencies struct {
			Mean float64 `json:"mean"`
			P50  float64 `json:"50th"`
			P90  float64 `json:"90th"`
			P99  float64 `json:"99th"`
			Max  float64 `json:"max"`
		} `json:"latencies"`
		Duration float64            `json:"duration"`
		Wait     float64            `json:"wait"`
		Requests float64            `json:"requests"`
		Status   map[string]float64 `json:"status_codes"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("vegeta report: %w:\n%s", err, out)
	}
	if r.Requests == 0 || r.Duration+r.Wait <= 0 {
		return nil, fmt.Errorf("vegeta sent no request:\n%s", out)
	}
	const ms = 1e6 // ns
	v := map[string]float64{
		"rps": r.Requests / ((r.Duration + r.Wait) / 1e9), "requests": r.Requests,
		"avg": r.Latencies.Mean / ms, "p50": r.Latencies.P50 / ms, "p90": r.Latencies.P90 / ms,
		"p99": r.Latencies.P99 / ms, "max": r.Latencies.Max / ms, "errors": 0, "non2xx": 0,
	}
	for code, n := range r.Status {
		switch c, _ := strconv.Atoi(code); {
		case c == 0:
			v["errors"] += n
		case c >= 400 || c < 200:
			v["non2xx"] += n
		}
	}
	return v, nil
}

func wrkArgs(t *Target, _ string) []string {
	a := []string{t.Bin, "-t" + strconv.Itoa(t.Threads), "-c" + strconv.Itoa(t.Conns), "-d" + seconds(t.Duration), "--latency"}
	if t.Lua != "" {
		a = append(a, "-s", t.Lua)
	}
	a = append(a, t.Args...)
	return append(a, t.URL)
}

func linkgateArgs(t *Target, json string) []string {
	a := []string{t.Bin, "bench", "-t" + strconv.Itoa(t.Threads), "-c" + strconv.Itoa(t.Conns), "-d" + seconds(t.Duration), "--json", json}
	if t.Rate > 0 {
		a = append(a, "-R"+strconv.FormatFloat(t.Rate, 'f', -1, 64))
	}
	if t.Warmup > 0 {
		a = append(a, "--warmup", t.Warmup.String())
	}
	if t.Lua != "" {
		a = append(a, "-s", t.Lua)
	}
	a = append(a, t.Args...)
	return append(a, t.URL)
}

// seconds is a duration as wrk reads it: whole seconds, at least one.
func seconds(d time.Duration) string {
	return strconv.FormatInt(max(int64(d.Round(time.Second)/time.Second), 1), 10) + "s"
}

// parseWrk reads wrk's text report (with --latency): Requests/sec, the
// request count, mean and percentile latencies, socket errors and non-2xx
// responses. Latencies come out in milliseconds.
func parseWrk(out []byte) (map[string]float64, error) {
	v := map[string]float64{"errors": 0, "non2xx": 0}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 2 && f[0] == "Requests/sec:":
			r, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return nil, fmt.Errorf("wrk: Requests/sec %q: %w", f[1], err)
			}
			v["rps"] = r
		case len(f) >= 3 && f[1] == "requests" && f[2] == "in":
			n, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return nil, fmt.Errorf("wrk: request count %q: %w", f[0], err)
			}
			v["requests"] = n
		case len(f) >= 2 && f[0] == "Latency" && !strings.HasPrefix(f[1], "Distribution"):
			ms, err := wrkMillis(f[1])
			if err != nil {
				return nil, err
			}
			v["avg"] = ms
		case len(f) == 2 && strings.HasSuffix(f[0], "%"):
			p, err := strconv.ParseFloat(strings.TrimSuffix(f[0], "%"), 64)
			if err != nil {
				continue
			}
			ms, err := wrkMillis(f[1])
			if err != nil {
				return nil, err
			}
			v["p"+strconv.FormatFloat(p, 'f', -1, 64)] = ms
		case len(f) >= 5 && f[0] == "Non-2xx":
			n, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				return nil, fmt.Errorf("wrk: %q: %w", sc.Text(), err)
			}
			v["non2xx"] = n
		case len(f) >= 10 && f[0] == "Socket" && f[1] == "errors:":
			// Socket errors: connect 0, read 0, write 0, timeout 0
			for i := 3; i < len(f); i += 2 {
				n, err := strconv.ParseFloat(strings.TrimSuffix(f[i], ","), 64)
				if err != nil {
					return nil, fmt.Errorf("wrk: %q: %w", sc.Text(), err)
				}
				v["errors"] += n
			}
		}
	}
	if _, ok := v["rps"]; !ok {
		return nil, fmt.Errorf("wrk printed no Requests/sec line:\n%s", out)
	}
	if _, ok := v["requests"]; !ok {
		return nil, fmt.Errorf("wrk printed no request count:\n%s", out)
	}
	return v, nil
}

// wrkMillis reads one of wrk's durations ("812.00us", "1.25ms", "4.41s",
// "1.50m") in milliseconds.
func wrkMillis(s string) (float64, error) {
	for _, u := range []struct {
		suffix string
		ms     float64
	}{{"us", 1e-3}, {"ms", 1}, {"s", 1e3}, {"m", 6e4}, {"h", 3.6e6}} {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			x, err := strconv.ParseFloat(num, 64)
			if err != nil {
				break
			}
			return x * u.ms, nil
		}
	}
	return 0, fmt.Errorf("wrk: unreadable duration %q", s)
}

// parseLinkgateJSON reads linkgate bench --json.
func parseLinkgateJSON(path string) (map[string]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s bench.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	v := map[string]float64{
		"rps": s.RequestsPerSec, "requests": float64(s.Requests), "avg": s.Latency.MeanMs,
		"errors": float64(s.Errors.Socket()), "non2xx": float64(s.Errors.StatusTotal()),
		"max": s.Latency.MaxMs, "up50": s.Uncorrected.Percentiles["50"], "up99": s.Uncorrected.Percentiles["99"],
		"lag99": s.Generator.SendLag.Percentiles["99"],
	}
	for k, ms := range s.Latency.Percentiles {
		v["p"+k] = ms
	}
	return v, nil
}
