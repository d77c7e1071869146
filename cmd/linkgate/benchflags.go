//go:build !functiononly

package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/linkgate/linkgate/bench"
	"github.com/linkgate/linkgate/bench/capacity"
)

// countFlag is a positive whole number with an optional SI suffix (wrk's
// -c 1k).
type countFlag int

func (f *countFlag) String() string { return strconv.Itoa(int(*f)) }
func (f *countFlag) Set(s string) error {
	v, err := bench.ParseMetric(s)
	if err != nil {
		return err
	}
	if v < 1 || v != math.Trunc(v) || v > 1<<20 {
		return fmt.Errorf("want a whole number from 1 to %d, got %q", 1<<20, s)
	}
	*f = countFlag(v)
	return nil
}

// rateFlag is a positive request rate with an optional SI suffix (-R 5k).
type rateFlag float64

func (f *rateFlag) String() string {
	if *f == 0 {
		return ""
	}
	return strconv.FormatFloat(float64(*f), 'f', -1, 64)
}
func (f *rateFlag) Set(s string) error {
	v, err := bench.ParseMetric(s)
	if err != nil {
		return err
	}
	if v <= 0 || v > 1e9 {
		return fmt.Errorf("want a positive rate in requests/second, got %q", s)
	}
	*f = rateFlag(v)
	return nil
}

// durationFlag reads wrk's durations ("30", "30s", "5m", "1h") and Go's.
type durationFlag time.Duration

func (f *durationFlag) String() string { return time.Duration(*f).String() }
func (f *durationFlag) Set(s string) error {
	d, err := bench.ParseDuration(s)
	if err != nil {
		return err
	}
	*f = durationFlag(d)
	return nil
}

// headerFlag collects -H "Name: value", repeatable.
type headerFlag bench.Fields

func (f *headerFlag) String() string {
	var parts []string
	for _, h := range *f {
		parts = append(parts, h.Name+": "+h.Value)
	}
	return strings.Join(parts, ", ")
}
func (f *headerFlag) Set(s string) error {
	h, err := bench.ParseHeader(s)
	if err != nil {
		return err
	}
	*f = append(*f, h)
	return nil
}

// sloFlag collects --slo pXX=DURATION, repeatable.
type sloFlag []capacity.SLO

func (f *sloFlag) String() string {
	var parts []string
	for _, s := range *f {
		parts = append(parts, s.String())
	}
	return strings.Join(parts, ",")
}
func (f *sloFlag) Set(s string) error {
	for _, part := range strings.Split(s, ",") {
		slo, err := capacity.ParseSLO(part)
		if err != nil {
			return err
		}
		*f = append(*f, slo)
	}
	return nil
}

// percentFlag is a share given as "0.1%" or as a fraction "0.001".
type percentFlag float64

func (f *percentFlag) String() string {
	return strconv.FormatFloat(float64(*f)*100, 'f', -1, 64) + "%"
}
func (f *percentFlag) Set(s string) error {
	v, err := capacity.ParseShare(s)
	if err != nil {
		return err
	}
	*f = percentFlag(v)
	return nil
}

// thresholdFlag collects --threshold METRIC<VALUE, repeatable.
type thresholdFlag []bench.Threshold

func (f *thresholdFlag) String() string {
	var parts []string
	for _, t := range *f {
		parts = append(parts, t.String())
	}
	return strings.Join(parts, ",")
}
func (f *thresholdFlag) Set(s string) error {
	t, err := bench.ParseThreshold(s)
	if err != nil {
		return err
	}
	*f = append(*f, t)
	return nil
}
