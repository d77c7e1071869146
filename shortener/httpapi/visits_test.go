package httpapi_test

import (
	"context"
	"encoding/json"
	"image/png"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	go_qr "github.com/piglig/go-qr"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/httpapi"
	"github.com/linkgate/linkgate/shortener/useragent"
	"github.com/linkgate/linkgate/shortener/visits"
)

func newAggregator(t testing.TB, store shortener.Store) *visits.Aggregator {
	t.Helper()
	a, err := visits.New(visits.Config{Store: store, Logger: slog.New(slog.DiscardHandler), Classifier: useragent.New(), FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(context.Background()) })
	return a
}

const firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0"

func create(t *testing.T, s *testServer, body string) string {
	t.Helper()
	r := s.do(t, "POST", "/api/v1/links", body)
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	var l struct{ ID string }
	json.Unmarshal([]byte(r.Body), &l)
	return l.ID
}

type statsBody struct {
	Total, Bots int64
	ByDay       []struct {
		Date  string
		Count int64
	} `json:"by_day"`
	Referrers []struct {
		Host  string
		Count int64
	}
	Browsers []struct {
		Name  string
		Count int64
	}
	BotAgents []struct {
		Name  string
		Count int64
	} `json:"bot_agents"`
}

func TestVisitsCountedAndStats(t *testing.T) {
	s := start(t, setup{visits: true, cfg: httpapi.Config{StatsPublic: true}})
	id := create(t, s, `{"url":"https://target.example/"}`)
	for range 3 {
		if r := s.do(t, "GET", "/"+id, "", "User-Agent", firefox, "Referer", "https://News.Example.com/item?id=1"); r.Status != 302 {
			t.Fatalf("redirect %d", r.Status)
		}
	}
	s.do(t, "GET", "/"+id, "", "User-Agent", "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)")
	// Not visits: HEAD, the seed's lookup, the API's link view.
	s.do(t, "HEAD", "/"+id, "", "User-Agent", firefox)
	s.do(t, "GET", "/getFullURL/"+id, "", "User-Agent", firefox)
	s.do(t, "GET", "/api/v1/links/"+id, "")

	r := s.do(t, "GET", "/api/v1/links/"+id+"/stats", "")
	if r.Status != 200 {
		t.Fatalf("stats: %d %s", r.Status, r.Body)
	}
	var st statsBody
	if err := json.Unmarshal([]byte(r.Body), &st); err != nil {
		t.Fatal(err)
	}
	today := time.Now().UTC().Format("2006-01-02")
	if st.Total != 4 || st.Bots != 1 || len(st.ByDay) != 1 || st.ByDay[0].Date != today || st.ByDay[0].Count != 4 ||
		len(st.Referrers) != 2 || st.Referrers[0].Host != "news.example.com" || st.Referrers[0].Count != 3 ||
		st.Referrers[1].Host != "(direct)" || len(st.Browsers) != 1 || st.Browsers[0].Name != "Firefox" ||
		len(st.BotAgents) != 1 || st.BotAgents[0].Name != "Slack" {
		t.Errorf("stats %s", r.Body)
	}
	wantError(t, s.do(t, "GET", "/api/v1/links/nope000000/stats", ""), 404, "not_found")
	wantError(t, s.do(t, "POST", "/api/v1/links/"+id+"/stats", ""), 405, "method_not_allowed")
	wantError(t, s.do(t, "GET", "/api/v1/links/"+id+"/other", ""), 404, "not_found")
}

func TestStatsNeedAdminKeyUnlessPublic(t *testing.T) {
	s := start(t, setup{visits: true, cfg: httpapi.Config{AdminKey: "sekret"}})
	id := create(t, s, `{"url":"https://target.example/"}`)
	wantError(t, s.do(t, "GET", "/api/v1/links/"+id+"/stats", ""), 401, "unauthorized")
	if r := s.do(t, "GET", "/api/v1/links/"+id+"/stats", "", "X-API-Key", "sekret"); r.Status != 200 {
		t.Errorf("with the key: %d %s", r.Status, r.Body)
	}
	closed := start(t, setup{visits: true, noKeys: true})
	wantError(t, closed.do(t, "GET", "/api/v1/links/"+id+"/stats", ""), 403, "forbidden")
}

func TestVisitLimitUsesLiveCount(t *testing.T) {
	s := start(t, setup{visits: true})
	id := create(t, s, `{"url":"https://target.example/","max_visits":2}`)
	for i := range 2 {
		if r := s.do(t, "GET", "/"+id, ""); r.Status != 302 {
			t.Fatalf("visit %d: %d", i+1, r.Status)
		}
	}
	// Nothing was flushed (the interval is an hour): the limit counts the
	// visits in memory.
	wantError(t, s.do(t, "GET", "/"+id, "", "Accept", "application/json"), 410, "expired")
	if r := s.do(t, "HEAD", "/"+id, ""); r.Status != 410 {
		t.Errorf("HEAD after the limit: %d", r.Status)
	}
}

func TestQR(t *testing.T) {
	s := start(t, setup{cfg: httpapi.Config{PublicURL: "https://sho.rt"}})
	id := create(t, s, `{"url":"https://target.example/"}`)
	r := s.do(t, "GET", "/api/v1/links/"+id+"/qr?size=300", "")
	if r.Status != 200 || r.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("png: %d %s", r.Status, r.Header.Get("Content-Type"))
	}
	img, err := png.Decode(strings.NewReader(r.Body))
	if err != nil {
		t.Fatal(err)
	}
	if w := img.Bounds().Dx(); w > 300 || w < 150 {
		t.Errorf("image %d px wide for size=300", w)
	}
	text, err := go_qr.Decode(img)
	if err != nil || text != "https://sho.rt/"+id {
		t.Errorf("QR code says %q (%v), want the short link", text, err)
	}
	r = s.do(t, "GET", "/api/v1/links/"+id+"/qr?format=svg", "")
	if r.Status != 200 || r.Header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(r.Body, "<svg") {
		t.Errorf("svg: %d %s %.80q", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	for _, q := range []string{"format=gif", "size=10", "size=99999", "size=abc"} {
		wantError(t, s.do(t, "GET", "/api/v1/links/"+id+"/qr?"+q, ""), 400, "invalid_parameter")
	}
	wantError(t, s.do(t, "GET", "/api/v1/links/missing001/qr", ""), 404, "not_found")
}

func TestWebPage(t *testing.T) {
	s := start(t, setup{cfg: httpapi.Config{UI: true}})
	r := s.do(t, "GET", "/", "")
	if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(r.Body, `<label for="url">`) || !strings.Contains(r.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("page: %d %v %.200s", r.Status, r.Header, r.Body)
	}
	for _, f := range []string{"/static/app.js", "/static/app.css"} {
		if r := s.do(t, "GET", f, ""); r.Status != 200 || len(r.Body) < 100 {
			t.Errorf("%s: %d", f, r.Status)
		}
	}
	wantError(t, s.do(t, "GET", "/static/nope.js", ""), 404, "not_found")

	// The form without JavaScript: POST → 303 → the result page.
	form := url.Values{"url": {"https://target.example/a?b=<c>"}, "expires": {"24h"}, "max_visits": {"5"}}.Encode()
	r = s.do(t, "POST", "/", form, "Content-Type", "application/x-www-form-urlencoded", "Accept", "text/html")
	if r.Status != 303 || !strings.HasPrefix(r.Header.Get("Location"), "/?created=") {
		t.Fatalf("form post: %d %v %s", r.Status, r.Header, r.Body)
	}
	id := strings.TrimPrefix(r.Header.Get("Location"), "/?created=")
	r = s.do(t, "GET", r.Header.Get("Location"), "")
	if r.Status != 200 || !strings.Contains(r.Body, "/"+id+`"`) || !strings.Contains(r.Body, "https://target.example/a?b=&lt;c&gt;") ||
		!strings.Contains(r.Body, "/api/v1/links/"+id+"/qr?format=svg") {
		t.Errorf("result page: %d %s", r.Status, r.Body)
	}
	l, err := s.Store.Get(context.Background(), id)
	if err != nil || l.MaxVisits != 5 || l.ExpiresAt.IsZero() {
		t.Errorf("created link %+v, %v", l, err)
	}

	// Errors: the form again with the message, or JSON for API clients.
	r = s.do(t, "POST", "/", "url=javascript%3Aalert(1)", "Content-Type", "application/x-www-form-urlencoded", "Accept", "text/html")
	if r.Status != 400 || !strings.Contains(r.Body, `role="alert">`) || !strings.Contains(r.Body, "javascript:alert(1)") {
		t.Errorf("form error: %d %s", r.Status, r.Body)
	}
	wantError(t, s.do(t, "POST", "/", "url=ftp%3A%2F%2Fx", "Content-Type", "application/x-www-form-urlencoded"), 400, "scheme_not_allowed")
	wantError(t, s.do(t, "POST", "/", "url=https%3A%2F%2Fx.example&expires=1000h", "Content-Type", "application/x-www-form-urlencoded"), 400, "invalid_parameter")
	wantError(t, s.do(t, "POST", "/", "url=https%3A%2F%2Fx.example&max_visits=-1", "Content-Type", "application/x-www-form-urlencoded"), 400, "invalid_parameter")
	wantError(t, s.do(t, "POST", "/", `{"url":"https://x.example"}`, "Content-Type", "application/json"), 415, "unsupported_media_type")
	wantError(t, s.do(t, "POST", "/", "url="+strings.Repeat("a", 9<<10), "Content-Type", "application/x-www-form-urlencoded"), 413, "payload_too_large")
	wantError(t, s.do(t, "PUT", "/", ""), 405, "method_not_allowed")
}

func TestWebPageDisabled(t *testing.T) {
	s := start(t, setup{})
	wantError(t, s.do(t, "GET", "/", ""), 404, "not_found")
	wantError(t, s.do(t, "GET", "/static/app.js", ""), 404, "not_found")
	wantError(t, s.do(t, "POST", "/", "url=https%3A%2F%2Fx.example", "Content-Type", "application/x-www-form-urlencoded"), 404, "not_found")
}
