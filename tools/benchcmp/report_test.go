package main

import (
	"bytes"
	"strings"
	"testing"
)

func records() []Record {
	rec := func(name string, round int, rps, cpu float64) Record {
		return Record{Name: name, Round: round, Values: map[string]float64{"rps": rps, "cpu": cpu, "p99": rps / 1e5}}
	}
	return []Record{
		rec("nginx", 1, 100000, 5), rec("lg", 1, 90000, 6),
		rec("nginx", 2, 120000, 5.5), rec("lg", 2, 96000, 6),
		rec("nginx", 3, 80000, 4.5), rec("lg", 3, 60000, 5),
	}
}

func TestReportTemplate(t *testing.T) {
	const tmpl = `{{report "nginx" "nginx"}}
ratio {{printf "%.3f" (div (med "lg" "rps") (med "nginx" "rps"))}}
per-round {{mr "%.2f" (per "lg" "nginx" "rps")}}
per core {{printf "%.0f" (median (scale 1e6 (vals "lg" "cpu")))}}
{{reportms "p99" "lg" "p99"}}
{{if has "absent"}}never{{else}}no absent{{end}}
`
	var out bytes.Buffer
	if err := report(&out, tmpl, records()); err != nil {
		t.Fatal(err)
	}
	want := `nginx                              median     100000 req/s  range 80000–120000  rounds: 100000 120000 80000
ratio 0.900
per-round 0.80 (0.75–0.90)
per core 166667
p99                                median       0.90 ms     range 0.60–0.96  rounds: 0.90 0.96 0.60
no absent
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestReportFailedShare(t *testing.T) {
	recs := []Record{
		{Name: "a", Round: 1, Values: map[string]float64{"requests": 1000, "errors": 1, "non2xx": 2}},
		{Name: "a", Round: 2, Values: map[string]float64{"requests": 3000, "errors": 0, "non2xx": 1}},
	}
	var out bytes.Buffer
	if err := report(&out, `{{printf "%.4f" (failed "a")}}`, recs); err != nil || out.String() != "0.0010" {
		t.Errorf("failed share %q, %v; want 4/4000", out.String(), err)
	}
	if err := report(&out, `{{failed "b"}}`, recs); err == nil {
		t.Error("failed share of an unknown target")
	}
}

func TestReportTyposFail(t *testing.T) {
	for _, tmpl := range []string{`{{med "ngninx" "rps"}}`, `{{med "nginx" "rsp"}}`, `{{report "x" "nope"}}`, `{{per "lg" "nope" "rps"}}`, `{{nosuchfunc}}`} {
		err := report(&bytes.Buffer{}, tmpl, records())
		if err == nil {
			t.Errorf("%s: no error", tmpl)
		} else if !strings.Contains(err.Error(), "no") && !strings.Contains(err.Error(), "not defined") {
			t.Errorf("%s: unclear error %v", tmpl, err)
		}
	}
}

func TestReportNames(t *testing.T) {
	recs := []Record{
		{Name: "b | x", Values: map[string]float64{"order": 0, "wru": 1}},
		{Name: "a | y", Values: map[string]float64{"order": 1, "wru": 2}},
		{Name: "c", Values: map[string]float64{"order": 2, "kb": 9}},
		{Name: "a | z", Values: map[string]float64{"order": 1, "wru": 3}},
	}
	var out bytes.Buffer
	if err := report(&out, `{{range names "wru"}}| {{.}} | {{med . "wru"}} |
{{end}}{{names "kb"}} {{names "none"}}`, recs); err != nil {
		t.Fatal(err)
	}
	const want = "| b | x | 1 |\n| a | y | 2 |\n| a | z | 3 |\n[c] []"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}
