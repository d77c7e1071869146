package limitcount

import (
	"testing"

	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
)

// TestSchemaV3: 3.x's wording (t/plugin/limit-count.t TEST 8-13); its
// variable counts and rules are refused.
func TestSchemaV3(t *testing.T) {
	pre := "failed to check the configuration of plugin limit-count err: "
	none := "value should match only one schema, but matches none"
	for conf, want := range map[string]string{
		`{"count":2,"time_window":60}`:                      "",
		`{"time_window":60,"rejected_code":503}`:            pre + none,
		`{"count":-100,"time_window":60}`:                   pre + `property "count" validation failed: ` + none,
		`{"count":"$http_count","time_window":60}`:          pre + `property "count" validation failed: ` + none,
		`{"rules":[{"count":1,"time_window":1,"key":"a"}]}`: pre + none,
	} {
		if got := plugintest.Check(t, NewWithOptions(nil, nil, Options{V3: true}), conf, false); got != want {
			t.Errorf("%s:\n got %q\nwant %q", conf, got, want)
		}
	}
	if got := plugintest.Check(t, New(nil, nil), `{"time_window":60}`, false); got != pre+`property "count" is required` {
		t.Errorf("v2: %q", got)
	}
}
