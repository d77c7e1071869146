package lambda_test

import (
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkgate/linkgate/lambda"
	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/httpapi"
	"github.com/linkgate/linkgate/shortener/pebble"
)

// In Lambda mode the domain of a request is the event's
// requestContext.domainName, set by AWS, as the Host is for serve: a
// link created through one domain answers there and not on the other,
// and an event for a domain the function does not serve is 421.
func TestEventDomainPicksTheLinksDomain(t *testing.T) {
	store, err := pebble.Open(filepath.Join(t.TempDir(), "links"), pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	reg := prometheus.NewRegistry()
	h, err := httpapi.NewHandler(slog.New(slog.DiscardHandler), shortener.NewService(store, shortener.Options{}), httpapi.NewMetrics(reg), reg,
		httpapi.Config{Domains: []string{"sho.rt", "go.example.com"}, TrustHost: true})
	if err != nil {
		t.Fatal(err)
	}
	fn := lambda.NewHandler(h.ServeFastHTTP, lambda.Options{MaxBodyBytes: httpapi.MaxBodyBytes, MaxHeaderBytes: 8 << 10})
	event := func(method, path, domain, body string) reply {
		ev := v2Event(method, path, "")
		ev.RequestContext.DomainName = domain
		ev.Headers["content-type"] = "application/json"
		ev.Body = body
		r, _ := invoke(t, fn, ev)
		return r
	}
	for _, d := range []string{"sho.rt", "go.example.com"} {
		r := event("POST", "/api/v1/links", d, `{"url":"https://`+d+`.target.example/","slug":"promo"}`)
		var l struct {
			ShortURL string `json:"short_url"`
		}
		json.Unmarshal([]byte(r.Body), &l)
		if r.StatusCode != 201 || l.ShortURL != "https://"+d+"/promo" {
			t.Fatalf("create on %s: %d %s", d, r.StatusCode, r.Body)
		}
	}
	for _, d := range []string{"sho.rt", "go.example.com"} {
		if r := event("GET", "/promo", d, ""); r.StatusCode != 302 || r.Headers["Location"] != "https://"+d+".target.example/" {
			t.Errorf("redirect on %s: %d %v", d, r.StatusCode, r.Headers)
		}
	}
	if r := event("GET", "/promo", "abc123.execute-api.eu-west-1.amazonaws.com", ""); r.StatusCode != 421 {
		t.Errorf("an event for another domain: %d %s", r.StatusCode, r.Body)
	}
}
