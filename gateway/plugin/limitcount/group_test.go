package limitcount

import (
	"testing"
	"time"
)

// A group's configurations must agree, as APISIX's check_schema wants
// (limit-count2.t:TEST 19, limit-count-redis2.t:TEST 10): the first one
// checked is remembered for five minutes.
func TestCheckConfGroup(t *testing.T) {
	f := New(nil, nil)
	now := time.Unix(1000, 0)
	f.now = func() time.Time { return now }
	a := map[string]any{"count": 2.0, "time_window": 60.0, "group": "g", "key": "remote_addr"}
	b := map[string]any{"count": 3.0, "time_window": 60.0, "group": "g", "key": "remote_addr"}
	if err := f.CheckConf(a); err != nil {
		t.Fatal(err)
	}
	if err := f.CheckConf(map[string]any{"count": 2.0, "time_window": 60.0, "group": "g", "key": "remote_addr"}); err != nil {
		t.Fatalf("same configuration: %v", err)
	}
	if err := f.CheckConf(b); err == nil || err.Error() != "group conf mismatched" {
		t.Fatalf("other count: %v, want group conf mismatched", err)
	}
	if err := f.CheckConf(map[string]any{"count": 3.0, "time_window": 60.0, "group": "h"}); err != nil {
		t.Fatalf("other group: %v", err)
	}
	now = now.Add(groupTTL)
	if err := f.CheckConf(b); err != nil {
		t.Fatalf("after five minutes: %v", err)
	}
}
