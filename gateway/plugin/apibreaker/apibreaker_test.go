package apibreaker

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
)

func TestSchema(t *testing.T) {
	const prefix = "failed to check the configuration of plugin api-breaker err: "
	defaults := `{"break_response_code":502,"healthy":{"http_statuses":[200],"successes":3},"max_breaker_sec":300,"unhealthy":{"failures":3,"http_statuses":[500]}}`
	for _, tc := range []struct{ conf, err, stored string }{
		{`{"break_response_code":502}`, "", defaults},
		{`{"break_response_code":502,"healthy":{}}`, "", defaults},
		{`{"break_response_code":502,"unhealthy":{}}`, "", defaults},
		{`{"break_response_code":502,"unhealthy":{"http_statuses":[500],"failures":1},"healthy":{"http_statuses":[200],"successes":1}}`, "", ""},
		{`{}`, `property "break_response_code" is required`, ""},
		{`{"break_response_code":199}`, `property "break_response_code" validation failed: expected 199 to be at least 200`, ""},
		{`{"break_response_code":502,"max_breaker_sec":2}`, `property "max_breaker_sec" validation failed: expected 2 to be at least 3`, ""},
		{`{"break_response_code":502,"unhealthy":{"http_statuses":[499]}}`, `property "unhealthy" validation failed: property "http_statuses" validation failed: failed to validate item 1: expected 499 to be at least 500`, ""},
		{`{"break_response_code":502,"healthy":{"http_statuses":[200,200]}}`, `property "healthy" validation failed: property "http_statuses" validation failed: expected unique items but items 1 and 2 are equal`, ""},
		{`{"break_response_code":200,"break_response_headers":[{"content-type":"application/json"}]}`, `property "break_response_headers" validation failed: failed to validate item 1: property "key" is required`, ""},
	} {
		got := plugintest.Check(t, New(nil), tc.conf, false)
		want := tc.err
		if want != "" {
			want = prefix + want
		}
		if got != want {
			t.Errorf("%s: %q, want %q", tc.conf, got, want)
		}
		if tc.stored != "" {
			v, _ := gateway.DecodeJSON([]byte(tc.conf))
			plugins := map[string]any{Name: v}
			if err := gateway.NewRegistry(New(nil)).Check(plugins, false); err != nil {
				t.Fatal(err)
			}
			if b, _ := json.Marshal(plugins[Name]); string(b) != tc.stored {
				t.Errorf("%s: stored %s, want %s", tc.conf, b, tc.stored)
			}
		}
	}
}

// TestBreaker replays sequences of requests on a clock the test moves:
// each step is "U<status>" (the upstream answers status), "S<n>" (n
// seconds pass), and the status the client gets for a U step is checked
// ("599" when the breaker answered).
func TestBreaker(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		steps      string // space-separated: U500=500 (upstream 500, client gets 500), S3
	}{
		{"opens after failures", `{"break_response_code":599,"unhealthy":{"http_statuses":[500,503],"failures":3},"healthy":{"http_statuses":[200,206]}}`,
			"U200=200 U500=500 U503=503 U500=500 U500=599 U500=599"},
		{"healthy successes reset", `{"break_response_code":599}`,
			"U500=500 U500=500 U200=200 U200=200 U200=200 U500=500 U500=500"},
		{"window of 2 s, then reset by successes", `{"break_response_code":599}`,
			"U500=500 U500=500 U500=500 U500=599 S2 U200=599 S1 U200=200 U200=200 U200=200 U200=200 U500=500 U500=500 U500=500 U500=599"},
		{"second opening: 4 s", `{"break_response_code":502}`,
			"U500=500 U500=500 U500=500 U200=502 S3 U500=500 U500=500 U500=500 U500=502 S3 U500=502 S1 U500=502 S1 U500=500"},
		// failures 1: windows 2, 4, 8, then max_breaker_sec (10): APISIX's
		// TEST 19 counts {"500":4,"502":16} over 20 requests a second apart.
		{"windows grow to max_breaker_sec", `{"break_response_code":502,"max_breaker_sec":10,"unhealthy":{"http_statuses":[500,503],"failures":1}}`,
			"U500=500 S1 U500=502 S1 U500=502 S1 U500=500 S1 U500=502 S1 U500=502 S1 U500=502 S1 U500=502 S1 U500=500 " +
				"S1 U500=502 S1 U500=502 S1 U500=502 S1 U500=502 S1 U500=502 S1 U500=502 S1 U500=502 S1 U500=502 S1 U500=500 S1 U500=502 S1 U500=502"},
		{"statuses in neither list change nothing", `{"break_response_code":599,"unhealthy":{"failures":1}}`,
			"U404=404 U502=502 U500=500 U404=599"},
	} {
		now := time.Unix(1_800_000_000, 0)
		f := New(func() time.Time { return now })
		in := plugintest.New(t, f, tc.conf)
		for i, step := range strings.Fields(tc.steps) {
			if secs, ok := strings.CutPrefix(step, "S"); ok {
				n, _ := strconv.Atoi(secs)
				now = now.Add(time.Duration(n) * time.Second)
				continue
			}
			up, want, _ := strings.Cut(strings.TrimPrefix(step, "U"), "=")
			c := plugintest.NewCtx(map[string]string{"host": "localhost", "uri": "/api_breaker"})
			got := in.(gateway.Accessor).Access(c).Status
			e := &gateway.LogEntry{}
			if got == 0 {
				got, _ = strconv.Atoi(up)
				e.UpstreamStatus = got
			}
			in.(gateway.Logger).Log(c, e)
			if strconv.Itoa(got) != want {
				t.Errorf("%s: step %d (%s): client got %d", tc.name, i+1, step, got)
				break
			}
		}
	}
}

func TestKeys(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	f := New(func() time.Time { return now })
	in := plugintest.New(t, f, `{"break_response_code":502,"unhealthy":{"failures":1},"break_response_body":"open","break_response_headers":[{"key":"X-Breaker","value":"$host$uri"}]}`)
	req := func(host, uri string, upstream int) *plugintest.Ctx {
		c := plugintest.NewCtx(map[string]string{"host": host, "uri": uri})
		rep := in.(gateway.Accessor).Access(c)
		e := &gateway.LogEntry{}
		if rep.Status == 0 {
			e.UpstreamStatus = upstream
		} else {
			c.StatusCode = rep.Status
		}
		in.(gateway.Logger).Log(c, e)
		return c
	}
	req("a.com", "/x", 500)
	if c := req("a.com", "/x", 200); c.StatusCode != 502 || c.ResponseHeader("X-Breaker") != "a.com/x" {
		t.Errorf("a.com/x: %d %q, want the breaker's 502 with its header", c.StatusCode, c.ResponseHeader("X-Breaker"))
	}
	for _, k := range [][2]string{{"b.com", "/x"}, {"a.com", "/y"}} {
		if c := req(k[0], k[1], 200); c.StatusCode != 200 {
			t.Errorf("%s%s shares a.com/x's breaker", k[0], k[1])
		}
	}
	// A plugin changing the URI after access does not move the count.
	c := plugintest.NewCtx(map[string]string{"host": "c.com", "uri": "/z"})
	in.(gateway.Accessor).Access(c)
	c.Vars["uri"] = "/rewritten"
	in.(gateway.Logger).Log(c, &gateway.LogEntry{UpstreamStatus: 500})
	if c := req("c.com", "/z", 200); c.StatusCode != 502 {
		t.Errorf("c.com/z: %d, want 502 (counted under the URI the request arrived with)", c.StatusCode)
	}
	// Idle keys with a closed breaker go.
	if n := f.state.Len(); n != 2 { // a.com/x, c.com/z: a healthy answer alone keeps nothing
		t.Fatalf("%d keys, want 2", n)
	}
	// Two hours on, new keys sweep their shards (1,000 of them reach all
	// 64 shards but with a chance of 1e-5): the idle keys are gone.
	now = now.Add(2 * time.Hour)
	for i := range 1000 {
		req("e.com", "/"+strconv.Itoa(i), 500)
	}
	if n := f.state.Len(); n != 1000 {
		t.Errorf("%d keys, want the 1000 new ones: idle keys not swept", n)
	}
}

func FuzzConf(f *testing.F) {
	plugintest.FuzzConf(f, New(nil), `{"break_response_code":502,"break_response_body":"x","break_response_headers":[{"key":"a","value":"b"}]}`)
}

func BenchmarkAccessLog(b *testing.B) {
	for _, bc := range []struct{ name, status string }{{"healthy", "200"}, {"counting", "500"}} {
		b.Run(bc.name, func(b *testing.B) {
			in := plugintest.New(b, New(nil), `{"break_response_code":502,"unhealthy":{"failures":1000000000}}`)
			c := plugintest.NewCtx(map[string]string{"host": "localhost", "uri": "/api/v1/items"})
			st, _ := strconv.Atoi(bc.status)
			e := &gateway.LogEntry{UpstreamStatus: st}
			b.ReportAllocs()
			for b.Loop() {
				c.Reset()
				if in.(gateway.Accessor).Access(c).Status != 0 {
					b.Fatal("broken")
				}
				in.(gateway.Logger).Log(c, e)
			}
		})
	}
}
