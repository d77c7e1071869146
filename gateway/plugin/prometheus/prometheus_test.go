package prometheus

import (
	"maps"
	"testing"
	"time"
	"unsafe"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
)

// TestLogCountsPerLabelSet: requests whose label sets alternate are each
// counted under their own (the instance's last-series shortcut compares
// every label), and a label that is a view of a reused request buffer is
// kept as it was when recorded.
func TestLogCountsPerLabelSet(t *testing.T) {
	f := New()
	in := plugintest.New(t, f, `{}`).(gateway.Logger)
	host := []byte("a.example.com")
	view := unsafe.String(unsafe.SliceData(host), len(host)) // as the engine's matched host
	for _, status := range []int{200, 503, 200, 200, 503, 404} {
		in.Log(plugintest.NewCtx(nil), &gateway.LogEntry{Status: status, RouteID: "1", MatchedURI: "/hello",
			MatchedHost: view, Node: "127.0.0.1"})
		copy(host, "b.example.com") // the next request reuses the buffer
		in.Log(plugintest.NewCtx(nil), &gateway.LogEntry{Status: status, RouteID: "1", MatchedURI: "/hello",
			MatchedHost: view, Node: "127.0.0.1"})
		copy(host, "a.example.com")
	}
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "apisix_http_status" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var code, h string
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "code":
					code = lp.GetValue()
				case "matched_host":
					h = lp.GetValue()
				}
			}
			got[code+" "+h] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"200 a.example.com": 3, "200 b.example.com": 3, "503 a.example.com": 2,
		"503 b.example.com": 2, "404 a.example.com": 1, "404 b.example.com": 1}
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}

// TestV3Labels: with Options.V3 the series carry 3.x's labels, and
// response_source tells who answered.
func TestV3Labels(t *testing.T) {
	f := NewWithOptions(Options{V3: true})
	in := plugintest.New(t, f, `{}`).(gateway.Logger)
	for _, e := range []gateway.LogEntry{
		{Status: 200, RouteID: "1", Node: "127.0.0.1", UpstreamStatus: 200, UpstreamTime: time.Millisecond}, // upstream
		{Status: 502, RouteID: "1", Node: "127.0.0.1", UpstreamStatus: 502},                                 // nginx: no answer
		{Status: 401, RouteID: "1"}, // apisix: a plugin
	} {
		in.Log(plugintest.NewCtx(nil), &e)
	}
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["request_type"] != "traditional_http" || l["request_llm_model"] != "" || l["llm_model"] != "" {
				t.Errorf("%s %v: no 3.x labels", mf.GetName(), l)
			}
			if mf.GetName() == "apisix_http_status" {
				got[l["code"]] = l["response_source"]
			}
		}
	}
	want := map[string]string{"200": "upstream", "502": "nginx", "401": "apisix"}
	if !maps.Equal(got, want) {
		t.Errorf("response_source %v, want %v", got, want)
	}
}
