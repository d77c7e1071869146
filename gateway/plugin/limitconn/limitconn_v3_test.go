package limitconn

import (
	"testing"

	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
)

// TestSchemaV3: 3.x's wording (t/plugin/limit-conn.t TEST 9-12).
func TestSchemaV3(t *testing.T) {
	pre := "failed to check the configuration of plugin limit-conn err: "
	none := "value should match only one schema, but matches none"
	for conf, want := range map[string]string{
		`{"conn":1,"burst":0,"default_conn_delay":0.1,"key":"remote_addr"}`:  "",
		`{"burst":1,"default_conn_delay":0.1,"key":"remote_addr"}`:           pre + none,
		`{"conn":-1,"burst":1,"default_conn_delay":0.1,"key":"remote_addr"}`: pre + `property "conn" validation failed: ` + none,
	} {
		if got := plugintest.Check(t, NewWithOptions(nil, nil, Options{V3: true}), conf, false); got != want {
			t.Errorf("%s:\n got %q\nwant %q", conf, got, want)
		}
	}
}
