package keyauth

import (
	"testing"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/plugintest"
)

// TestMissing: a request without a key, in 2.14's and 3.x's words
// (3.x t/plugin/key-auth.t TEST 7, cors.t TEST 16).
func TestMissing(t *testing.T) {
	for _, tc := range []struct {
		f    *Factory
		want string
	}{
		{New(), `{"message":"Missing API key found in request"}` + "\n"},
		{NewWithOptions(Options{V3: true}), `{"message":"Missing API key in request"}` + "\n"},
	} {
		rep := plugintest.New(t, tc.f, `{}`).(gateway.Rewriter).Rewrite(plugintest.NewCtx(nil))
		if rep.Status != 401 || string(rep.Body) != tc.want {
			t.Errorf("v3 %v: %d %q, want 401 %q", tc.f.v3, rep.Status, rep.Body, tc.want)
		}
	}
}
