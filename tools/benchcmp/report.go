package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"text/template"
)

// results are the records of one or more runs, by target name in the
// order they were measured.
type results map[string][]Record

func group(recs []Record) results {
	r := results{}
	for _, rec := range recs {
		r[rec.Name] = append(r[rec.Name], rec)
	}
	return r
}

// values is one figure of every round of a target, in round order. A name
// or figure that is not there is an error, so that a typo in a table
// fails the script instead of printing NaN.
func (r results) values(name, field string) ([]float64, error) {
	recs, ok := r[name]
	if !ok {
		return nil, fmt.Errorf("no results for target %q (have %v)", name, sortedStrings(keys(r)))
	}
	out := make([]float64, 0, len(recs))
	for _, rec := range recs {
		v, ok := rec.Values[field]
		if !ok {
			return nil, fmt.Errorf("target %q has no figure %q (have %v)", name, field, sortedStrings(keys(rec.Values)))
		}
		out = append(out, v)
	}
	return out, nil
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func sortedStrings(s []string) []string { slices.Sort(s); return s }

// names lists the targets whose first record has field, ordered by that
// record's "order" figure (0 when absent), then by name.
func (r results) names(field string) []string {
	var out []string
	for name, recs := range r {
		if _, ok := recs[0].Values[field]; ok {
			out = append(out, name)
		}
	}
	order := func(name string) float64 { return r[name][0].Values["order"] }
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(cmp.Compare(order(a), order(b)), cmp.Compare(a, b)) })
	return out
}

// funcs are the template functions of benchcmp report. Figures of a
// target: vals NAME FIELD (every round), med NAME FIELD (their median),
// per A B FIELD (per-round ratios A/B). On lists: median, min, max,
// mr FORMAT (median (min–max)), rng FORMAT (min–max), each FORMAT (every
// value), sorted FORMAT, scale K (K/x each). On numbers: div, mul, sub; inc on a range index. Also
// has NAME (measured at all), list A B… (a list of strings, for range or
// template arguments), names FIELD (the targets with FIELD, by their
// "order" figure, then name), total FIELD (the sum over every record) and
// failed NAME (the share of NAME's requests, all rounds, that got a socket
// error or a status ≥ 400).
// Lines in the scripts' classic layout: report LABEL NAME (req/s) and
// reportms LABEL NAME FIELD (ms).
func (r results) funcs() template.FuncMap {
	return template.FuncMap{
		"vals": r.values,
		"med": func(name, field string) (float64, error) {
			v, err := r.values(name, field)
			return median(v), err
		},
		"per": func(a, b, field string) ([]float64, error) {
			x, err := r.values(a, field)
			if err != nil {
				return nil, err
			}
			y, err := r.values(b, field)
			return pairRatios(x, y), err
		},
		"has":   func(name string) bool { _, ok := r[name]; return ok },
		"names": r.names,
		"list":  func(s ...string) []string { return s },
		"total": func(field string) float64 {
			var n float64
			for _, recs := range r {
				for _, rec := range recs {
					n += rec.Values[field]
				}
			}
			return n
		},
		"failed": func(name string) (float64, error) {
			var bad, all float64
			for _, f := range []string{"errors", "non2xx", "requests"} {
				v, err := r.values(name, f)
				if err != nil {
					return 0, err
				}
				for _, x := range v {
					if f == "requests" {
						all += x
					} else {
						bad += x
					}
				}
			}
			return ratio(bad, all), nil
		},
		"median": median,
		"min":    minOf,
		"max":    maxOf,
		"mr":     formatMedianRange,
		"rng":    formatRange,
		"each":   formatEach,
		"sorted": formatSorted,
		"scale":  scaleEach,
		"div":    ratio,
		"mul":    func(a, b float64) float64 { return a * b },
		"sub":    func(a, b float64) float64 { return a - b },
		"inc":    func(i int) int { return i + 1 },
		"report": func(label, name string) (string, error) {
			v, err := r.values(name, "rps")
			return reportLine(label, v), err
		},
		"reportms": func(label, name, field string) (string, error) {
			v, err := r.values(name, field)
			return reportLineMs(label, v), err
		},
	}
}

// report executes the table template text over the records.
func report(w io.Writer, text string, recs []Record) error {
	r := group(recs)
	t, err := template.New("table").Funcs(r.funcs()).Option("missingkey=error").Parse(text)
	if err != nil {
		return err
	}
	return t.Execute(w, nil)
}
