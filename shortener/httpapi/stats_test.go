package httpapi_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/dynamodb"
	"github.com/linkgate/linkgate/shortener/dynamodb/dynamodbtest"
	"github.com/linkgate/linkgate/shortener/httpapi"
	"github.com/linkgate/linkgate/shortener/visits"
)

type valueCount struct {
	Value string
	Count int64
}

type statsAnswer struct {
	ID          string
	From, To    time.Time
	Granularity string
	Note        string
	Total       int64
	People      int64
	Bots        int64
	Series      []struct {
		T                   time.Time
		Total, People, Bots int64
	}
	Top   map[string][]valueCount
	Links []struct {
		ID, Domain, URL string
		Count           int64
	}
}

func getStats(t *testing.T, s *testServer, path string) statsAnswer {
	t.Helper()
	r := s.do(t, "GET", path, "", "X-API-Key", "k")
	if r.Status != 200 {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	var a statsAnswer
	if err := json.Unmarshal([]byte(r.Body), &a); err != nil {
		t.Fatal(err)
	}
	return a
}

func wantTop(t *testing.T, a statsAnswer, dim string, want ...valueCount) {
	t.Helper()
	got := a.Top[dim]
	if len(got) != len(want) {
		t.Errorf("top %s: %v, want %v", dim, got, want)
		return
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("top %s: %v, want %v", dim, got, want)
			return
		}
	}
}

// The statistics API answers live: visits with their referrer, browser,
// OS, device and UTM parameters, per link and across links, filtered by
// bots and tag, by hour and by day, as JSON and as CSV; bad queries are
// answered 400 with the reason.
func TestStatsAPI(t *testing.T) { testStatsAPI(t, nil) }

// TestStatsAPIDynamoDB asks the same of the DynamoDB store, over DynamoDB
// Local: the answers are the same.
func TestStatsAPIDynamoDB(t *testing.T) {
	testStatsAPI(t, func(shortener.Store) shortener.Store {
		return dynamodbtest.Open(t, dynamodb.Options{ManualVisits: true})
	})
}

// testStatsAPI checks the statistics API over a pebble store, or the store
// that wrap returns instead.
func testStatsAPI(t *testing.T, wrap func(shortener.Store) shortener.Store) {
	var agg *visits.Aggregator
	s := start(t, setup{visits: true, cfg: httpapi.Config{AdminKey: "k"}, agg: func(a *visits.Aggregator) { agg = a }, wrap: wrap})
	a := create(t, s, `{"url":"https://a.example/","tags":["launch"]}`)
	b := create(t, s, `{"url":"https://b.example/"}`)
	const (
		iphone  = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1"
		android = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36"
	)
	visit := func(path, ua, ref string) {
		t.Helper()
		hdr := []string{"User-Agent", ua}
		if ref != "" {
			hdr = append(hdr, "Referer", ref)
		}
		if r := s.do(t, "GET", path, "", hdr...); r.Status != 302 {
			t.Fatalf("GET %s: %d", path, r.Status)
		}
	}
	for range 3 {
		visit("/"+a+"?utm_source=newsletter&utm_medium=email&utm_campaign=%3Dlaunch+day", firefox, "https://news.example.com/x")
	}
	visit("/"+a+"?utm_source=twitter", iphone, "")
	visit("/"+a, "Twitterbot/1.0", "")
	visit("/"+b, android, "")
	visit("/"+b, android, "")

	// One link, live (nothing flushed yet), the default range: 30 days
	// by day.
	st := getStats(t, s, "/api/v1/links/"+a+"/stats")
	if st.ID != a || st.Granularity != "day" || st.Total != 5 || st.People != 4 || st.Bots != 1 || st.Note != "" {
		t.Errorf("totals: %+v", st)
	}
	if n := len(st.Series); n != 31 || st.Series[n-1].Total != 5 || st.Series[n-1].Bots != 1 || !st.Series[0].T.Equal(st.From) || st.Series[0].Total != 0 {
		t.Errorf("series: %+v", st.Series)
	}
	wantTop(t, st, "referrer", valueCount{"news.example.com", 3}, valueCount{"(direct)", 2})
	wantTop(t, st, "browser", valueCount{"Firefox", 3}, valueCount{"Safari", 1})
	wantTop(t, st, "bot", valueCount{"Twitter", 1})
	wantTop(t, st, "os", valueCount{"Linux", 3}, valueCount{"(unknown)", 1}, valueCount{"iOS", 1})
	wantTop(t, st, "device", valueCount{"desktop", 3}, valueCount{"bot", 1}, valueCount{"mobile", 1})
	wantTop(t, st, "utm_source", valueCount{"newsletter", 3}, valueCount{"(none)", 1}, valueCount{"twitter", 1})
	wantTop(t, st, "utm_medium", valueCount{"email", 3}, valueCount{"(none)", 2})
	wantTop(t, st, "utm_campaign", valueCount{"=launch day", 3}, valueCount{"(none)", 2})
	wantTop(t, st, "country")

	// People only, the top one of each, by hour.
	st = getStats(t, s, "/api/v1/links/"+a+"/stats?bots=exclude&top=1&from="+time.Now().Add(-2*time.Hour).UTC().Format(time.RFC3339))
	if st.Granularity != "hour" || st.Total != 4 || st.People != 4 || st.Bots != 1 || len(st.Series) != 3 || st.Series[2].Total != 4 {
		t.Errorf("by hour, people only: %+v", st)
	}
	wantTop(t, st, "referrer", valueCount{"news.example.com", 3}, valueCount{"(other)", 1})
	wantTop(t, st, "bot")
	wantTop(t, st, "device", valueCount{"desktop", 3}, valueCount{"(other)", 1})

	// Hourly counts are kept 7 days: asked for 30, answered by day.
	st = getStats(t, s, "/api/v1/links/"+a+"/stats?granularity=hour&dimensions=referrer&from="+time.Now().AddDate(0, 0, -30).UTC().Format("2006-01-02"))
	if st.Granularity != "day" || !strings.Contains(st.Note, "7 days") || len(st.Top) != 1 || st.Total != 5 {
		t.Errorf("hourly beyond 7 days: %+v", st)
	}

	// CSV: the series, a blank line, the dimensions.
	r := s.do(t, "GET", "/api/v1/links/"+a+"/stats.csv?dimensions=utm_campaign,bot", "", "X-API-Key", "k")
	if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/csv") {
		t.Fatalf("csv: %d %s", r.Status, r.Header.Get("Content-Type"))
	}
	parts := strings.SplitN(r.Body, "\n\n", 2)
	if len(parts) != 2 {
		t.Fatalf("csv without a blank line: %q", r.Body)
	}
	series, err := csv.NewReader(strings.NewReader(parts[0])).ReadAll()
	if err != nil || len(series) != 32 || strings.Join(series[0], ",") != "t,total,people,bots" || strings.Join(series[31][1:], ",") != "5,4,1" {
		t.Errorf("csv series (%v): %q", err, parts[0])
	}
	dims, err := csv.NewReader(strings.NewReader(parts[1])).ReadAll()
	want := "dimension,value,count|bot,Twitter,1|utm_campaign,'=launch day,3|utm_campaign,(none),2"
	var got []string
	for _, row := range dims {
		got = append(got, strings.Join(row, ","))
	}
	if err != nil || strings.Join(got, "|") != want {
		t.Errorf("csv dimensions (%v): %q, want %q", err, strings.Join(got, "|"), want)
	}

	// Across links: what is stored.
	if err := agg.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	st = getStats(t, s, "/api/v1/stats")
	if st.Total != 7 || st.Bots != 1 || len(st.Links) != 2 || st.Links[0].ID != a || st.Links[0].Count != 5 ||
		st.Links[0].URL != "https://a.example/" || st.Links[1].ID != b || st.Links[1].Count != 2 {
		t.Errorf("all links: %+v", st)
	}
	wantTop(t, st, "os", valueCount{"Linux", 3}, valueCount{"Android", 2}, valueCount{"(unknown)", 1}, valueCount{"iOS", 1})
	st = getStats(t, s, "/api/v1/stats?tag=launch&bots=only")
	if st.Total != 1 || st.People != 4 || len(st.Links) != 1 || st.Links[0].ID != a || st.Links[0].Count != 1 {
		t.Errorf("tag launch, bots only: %+v", st)
	}
	st = getStats(t, s, "/api/v1/stats?tag=nothing")
	if st.Total != 0 || len(st.Links) != 0 {
		t.Errorf("an unused tag: %+v", st)
	}

	// Bad queries: 400 invalid_parameter, the message saying why.
	for _, c := range []struct{ query, reason string }{
		{"?from=2026-01-02&to=2026-01-01", "must be before to"},
		{"?from=2026-01-01&to=2026-01-01", "must be before to"},
		{"?from=yesterday", "from must be an RFC 3339 time or a date"},
		{"?to=2026-13-01", "to must be an RFC 3339 time or a date"},
		{"?granularity=minute", `unknown granularity "minute": hour or day`},
		{"?bots=some", `unknown bots "some"`},
		{"?top=0", "top must be a whole number from 1 to 100"},
		{"?top=101", "top must be a whole number from 1 to 100"},
		{"?dimensions=referrer,shoe", `unknown dimension "shoe"`},
		{"?from=2000-01-01", "daily data is kept for 400 days: from must be on or after"},
		{"?from=" + time.Now().UTC().AddDate(0, 0, -402).Format("2006-01-02"), "daily data is kept for 400 days"},
		{"?from=2999-01-01", "must be before to"},
		{"?from=2999-01-01&to=2999-02-01", "is in the future"},
		{"?from=2026-01-01&to=2999-01-01", "more than a query may ask for"},
	} {
		for _, path := range []string{"/api/v1/links/" + a + "/stats", "/api/v1/stats", "/api/v1/stats.csv"} {
			r := s.do(t, "GET", path+c.query, "", "X-API-Key", "k")
			wantError(t, r, 400, "invalid_parameter")
			if _, msg := apiError(t, r); !strings.Contains(msg, c.reason) {
				t.Errorf("%s%s: message %q, want it to say %q", path, c.query, msg, c.reason)
			}
		}
	}
	wantError(t, s.do(t, "GET", "/api/v1/stats?tag=bad%20tag", "", "X-API-Key", "k"), 400, "invalid_parameter")
	wantError(t, s.do(t, "GET", "/api/v1/stats", ""), 401, "unauthorized")
	wantError(t, s.do(t, "GET", "/api/v1/links/"+a+"/stats", ""), 401, "unauthorized")
	wantError(t, s.do(t, "POST", "/api/v1/stats", "", "X-API-Key", "k"), 405, "method_not_allowed")
	wantError(t, s.do(t, "GET", "/api/v1/links/nope000000/stats.csv", "", "X-API-Key", "k"), 404, "not_found")
}
