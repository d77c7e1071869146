package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserStatsRetry: the web page asks again for a link's statistics
// that a busy server shed (503 with Retry-After), instead of showing "—".
// A proxy in front of linkgate serve sheds one statistics request itself.
func TestBrowserStatsRetry(t *testing.T) {
	s := startServe(t, nil, "--stats-public")
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	var shedNext atomic.Bool
	var stats atomic.Int32
	rp := httputil.NewSingleHostReverseProxy(u)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/stats") {
			stats.Add(1)
			if shedNext.Swap(false) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(http.StatusServiceUnavailable)
				w.Write([]byte(`{"error":{"code":"overloaded","message":"too many requests in flight, retry later"}}`))
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()

	ctx := browser(t)

	err = chromedp.Do(ctx,
		chromedp.Navigate(proxy.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("url")),
		chromedp.SendKeys(chromedp.ID("url"), "https://example.com/retried"),
		chromedp.Click(chromedp.CSS(`#create button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("result")),
	)
	if err != nil {
		t.Fatalf("shorten in the page: %v", err)
	}
	before := stats.Load()
	shedNext.Store(true)
	if err := chromedp.Do(ctx, chromedp.Navigate(proxy.URL+"/"), chromedp.WaitVisible(chromedp.ID("mine-links"))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector("#mine-links td.num").textContent === "0"`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		cells, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("mine-links")))
		t.Fatalf("visit count after a shed statistics request: %v\n%s", err, cells)
	}
	if n := stats.Load() - before; shedNext.Load() || n < 2 {
		t.Errorf("statistics requests after the reload: %d, shed one: %v; want the shed one and its retry", n, !shedNext.Load())
	}
}
