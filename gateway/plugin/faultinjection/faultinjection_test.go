package faultinjection

import (
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
)

// fake records sleeps and draws the given numbers in turn.
func fake(draws ...int) (*Factory, *[]time.Duration) {
	var slept []time.Duration
	f := New()
	f.sleep = func(d time.Duration) { slept = append(slept, d) }
	f.random = func() int {
		if len(draws) == 0 {
			return 100
		}
		d := draws[0]
		draws = draws[1:]
		return d
	}
	return f, &slept
}

func TestRewrite(t *testing.T) {
	vars := `[[["arg_name","==","jack"],["arg_age","!","<",18]],[["http_apikey","==","api-key"]]]`
	for _, tc := range []struct {
		name, conf string
		draws      []int
		vars       map[string]string
		status     int
		body       string
		slept      time.Duration
	}{
		{"TEST 11 delay", `{"delay":{"duration":1}}`, nil, nil, 0, "", time.Second},
		{"TEST 13 abort 200", `{"abort":{"http_status":200,"body":"Fault Injection!\n"}}`, nil, nil, 200, "Fault Injection!\n", 0},
		{"TEST 15 abort 405", `{"abort":{"http_status":405,"body":"Fault Injection!\n"}}`, nil, nil, 405, "Fault Injection!\n", 0},
		{"TEST 19 zero percentage", `{"abort":{"http_status":200,"body":"x","percentage":0}}`, []int{1}, nil, 0, "", 0},
		{"TEST 21 delay zero percentage", `{"delay":{"duration":1,"percentage":0}}`, []int{1}, nil, 0, "", 0},
		{"percentage hit", `{"abort":{"http_status":500,"percentage":50}}`, []int{50}, nil, 500, "", 0},
		{"percentage miss", `{"abort":{"http_status":500,"percentage":50}}`, []int{51}, nil, 0, "", 0},
		{"TEST 23 body with var", `{"abort":{"http_status":200,"body":"client addr: $remote_addr\n"}}`, nil, nil, 200, "client addr: 127.0.0.1\n", 0},
		{"TEST 25 without body", `{"abort":{"http_status":200}}`, nil, nil, 200, "", 0},
		{"TEST 29 vars hold", `{"abort":{"http_status":403,"body":"Fault Injection!\n","vars":` + vars + `}}`, nil, map[string]string{"arg_name": "jack", "arg_age": "18"}, 403, "Fault Injection!\n", 0},
		{"vars: second expression", `{"abort":{"http_status":403,"vars":` + vars + `}}`, nil, map[string]string{"http_apikey": "api-key"}, 403, "", 0},
		{"vars miss", `{"abort":{"http_status":403,"vars":` + vars + `}}`, nil, map[string]string{"arg_name": "jack", "arg_age": "17"}, 0, "", 0},
		{"delay vars and abort", `{"delay":{"duration":0.5,"vars":` + vars + `},"abort":{"http_status":403}}`, nil, map[string]string{"http_apikey": "api-key"}, 403, "", 500 * time.Millisecond},
		{"delay vars miss", `{"delay":{"duration":0.5,"vars":` + vars + `}}`, nil, nil, 0, "", 0},
	} {
		f, slept := fake(tc.draws...)
		in := plugintest.New(t, f, tc.conf).(gateway.Rewriter)
		rep := in.Rewrite(plugintest.NewCtx(tc.vars))
		var total time.Duration
		for _, d := range *slept {
			total += d
		}
		if rep.Status != tc.status || string(rep.Body) != tc.body || total != tc.slept {
			t.Errorf("%s: %d %q slept %v, want %d %q %v", tc.name, rep.Status, rep.Body, total, tc.status, tc.body, tc.slept)
		}
	}
}

func TestSchema(t *testing.T) {
	pre := "failed to check the configuration of plugin fault-injection err: "
	for conf, want := range map[string]string{
		`{"abort":{"http_status":100}}`: pre + `property "abort" validation failed: property "http_status" validation failed: expected 100 to be at least 200`,
		`{"abort":{"body":"x"}}`:        pre + `property "abort" validation failed: property "http_status" is required`,
		`{}`:                            pre + "expect object to have at least 1 properties",
		`{"delay":{}}`:                  pre + `property "delay" validation failed: property "duration" is required`,
		`{"delay":{"duration":"test"}}`: pre + `property "delay" validation failed: property "duration" validation failed: wrong type: expected number, got string`,
		`{"delay":{"duration":0.1,"vars":{"a":1}}}`:                          pre + `property "delay" validation failed: property "vars" validation failed: wrong type: expected array, got table`, // an empty {} is also an array in Lua
		`{"abort":{"http_status":403,"vars":[[["arg_name","bad","jack"]]]}}`: "*",
	} {
		got := plugintest.Check(t, New(), conf, false)
		if got != want && !(want == "*" && strings.HasPrefix(got, pre)) {
			t.Errorf("%s:\n got %q\nwant %q", conf, got, want)
		}
	}
}

func BenchmarkRewrite(b *testing.B) {
	f, _ := fake()
	f.sleep = func(time.Duration) {}
	in := plugintest.New(b, f, `{"abort":{"http_status":403,"body":"no","vars":[[["arg_name","==","jack"]]]}}`).(gateway.Rewriter)
	c := plugintest.NewCtx(map[string]string{"arg_name": "jack"})
	b.ReportAllocs()
	for b.Loop() {
		in.Rewrite(c)
	}
}

// TestAbortHeaders: 3.x's abort.headers, a string's $variables resolved
// (t/plugin/fault-injection2.t TEST 4, 5); 2.14 ignores them.
func TestAbortHeaders(t *testing.T) {
	const conf = `{"abort":{"http_status":200,"headers":{"h1":"v1","h2":2,"h3":"$uri"}}}`
	for _, v3 := range []bool{false, true} {
		f := NewWithOptions(Options{V3: v3})
		c := plugintest.NewCtx(map[string]string{"uri": "/hello"})
		rep := plugintest.New(t, f, conf).(gateway.Rewriter).Rewrite(c)
		got := c.ResponseHeader("h1") + " " + c.ResponseHeader("h2") + " " + c.ResponseHeader("h3")
		want := "  "
		if v3 {
			want = "v1 2 /hello"
		}
		if rep.Status != 200 || got != want {
			t.Errorf("v3 %v: %d %q, want 200 %q", v3, rep.Status, got, want)
		}
	}
	pre := "failed to check the configuration of plugin fault-injection err: "
	v3 := NewWithOptions(Options{V3: true})
	for conf, want := range map[string]string{
		`{"abort":{"http_status":200,"headers":{}}}`:         pre + `property "abort" validation failed: property "headers" validation failed: expect object to have at least 1 properties`,
		`{"abort":{"http_status":200,"headers":{"h":true}}}`: "*",
		`{"abort":{"http_status":200,"headers":{"h":"v"}}}`:  "",
		`{"abort":{"http_status":200,"headers":{"h":1.5}}}`:  "",
	} {
		got := plugintest.Check(t, v3, conf, false)
		if got != want && !(want == "*" && strings.HasPrefix(got, pre)) {
			t.Errorf("%s:\n got %q\nwant %q", conf, got, want)
		}
	}
}

func BenchmarkAbortHeaders(b *testing.B) {
	f := NewWithOptions(Options{V3: true})
	in := plugintest.New(b, f, `{"abort":{"http_status":200,"headers":{"h1":"v1","h2":2}}}`).(gateway.Rewriter)
	c := plugintest.NewCtx(nil)
	b.ReportAllocs()
	for b.Loop() {
		c.Reset()
		in.Rewrite(c)
	}
}
