package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/plugin/keyauth"
)

// APISIX 3.x's credentials identify their consumer: the credential's
// key-auth key finds the consumer, with the consumer's name, custom_id
// and plugins, and the credential's id. A credential without its
// consumer, or with a plugin that is not an auth plugin, is not served.
func TestCredentials(t *testing.T) {
	var conf json.RawMessage
	reg := gateway.NewRegistry(keyauth.New(), recorder{&conf})
	tests := []struct {
		name    string
		entries []gateway.Entry
		key     string // key-auth key looked up
		want    string // "username/credential/custom_id", "" for no consumer
		skipped string // a skipped entry, "" for none
	}{
		{"credential", []gateway.Entry{
			entry(gateway.KindConsumer, "jack", `{"username":"jack","labels":{"custom_id":"c-1"},"plugins":{"rec":{}}}`),
			entry(gateway.KindConsumer, "jack/credentials/a", `{"plugins":{"key-auth":{"key":"k-a"}}}`),
		}, "k-a", "jack/a/c-1", ""},
		{"consumer's own key", []gateway.Entry{
			entry(gateway.KindConsumer, "jack", `{"username":"jack","plugins":{"key-auth":{"key":"k-own"}}}`),
			entry(gateway.KindConsumer, "jack/credentials/a", `{"plugins":{"key-auth":{"key":"k-a"}}}`),
		}, "k-own", "jack//", ""},
		{"no consumer", []gateway.Entry{
			entry(gateway.KindConsumer, "ghost/credentials/a", `{"plugins":{"key-auth":{"key":"k-a"}}}`),
		}, "k-a", "", "consumers/ghost/credentials/a"},
		{"not an auth plugin", []gateway.Entry{
			entry(gateway.KindConsumer, "jack", `{"username":"jack"}`),
			entry(gateway.KindConsumer, "jack/credentials/a", `{"plugins":{"rec":{}}}`),
		}, "k-a", "", "consumers/jack/credentials/a"},
		{"two plugins", []gateway.Entry{
			entry(gateway.KindConsumer, "jack", `{"username":"jack"}`),
			entry(gateway.KindConsumer, "jack/credentials/a", `{"plugins":{"key-auth":{"key":"k-a"},"rec":{}}}`),
		}, "k-a", "", "consumers/jack/credentials/a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := gateway.NewConfig()
			errs := cfg.Apply(gateway.Update{Reset: true, Entries: tt.entries}, reg)
			c, cerrs := gateway.Compile(cfg, reg)
			errs = append(errs, cerrs...)
			var skipped []string
			for _, err := range errs {
				skipped = append(skipped, err.Error())
			}
			if tt.skipped == "" && len(skipped) > 0 || tt.skipped != "" && (len(skipped) != 1 || !strings.HasPrefix(skipped[0], tt.skipped+":")) {
				t.Fatalf("skipped %q, want %q", skipped, tt.skipped)
			}
			got := ""
			if ce := c.LookupConsumer("key-auth", tt.key); ce != nil {
				got = ce.Username + "/" + ce.CredentialID + "/" + ce.CustomID
				if len(ce.Chain) != len(cfg.Consumers[ce.Username].Plugins)-strings.Count(string(tt.entries[0].Value), "key-auth") {
					t.Errorf("chain %d plugins, want the consumer's non-auth plugins", len(ce.Chain))
				}
			}
			if got != tt.want {
				t.Errorf("key %s finds %q, want %q", tt.key, got, tt.want)
			}
		})
	}
}
