package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserDomains drives the web page of a server with two domains in
// headless Chromium (which resolves *.test to 127.0.0.1): the form offers
// the domains, the Host's chosen; the same slug is created on both; the
// list of this browser's links reads each one's statistics on its own
// domain (?domain=), and its stats view names the domain.
func TestBrowserDomains(t *testing.T) {
	s := startServe(t, nil, "--stats-public", "--domain", "http://sho.test,http://go.test")
	port := s.URL[strings.LastIndexByte(s.URL, ':'):]
	ctx := browser(t, chromedp.Flag("host-resolver-rules", "MAP *.test 127.0.0.1"))

	page := "http://go.test" + port + "/"
	if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.ID("domain"))); err != nil {
		t.Fatalf("open %s: %v", page, err)
	}
	if v, err := chromedp.Run(ctx, chromedp.Value(chromedp.ID("domain"))); err != nil || v != "go.test" {
		t.Errorf("domain chosen on go.test: %q %v", v, err)
	}
	for _, d := range []string{"go.test", "sho.test"} {
		err := chromedp.Do(ctx,
			chromedp.SetValue(chromedp.ID("domain"), d),
			chromedp.SetValue(chromedp.ID("url"), "https://"+d+".target.example/"),
			chromedp.SetValue(chromedp.ID("slug"), "promo"),
			chromedp.Click(chromedp.CSS(`#create button[type="submit"]`)),
		)
		if err == nil {
			_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("result-url").value === "http://`+d+`/promo"`, chromedp.WithPollingTimeout(10*time.Second)))
		}
		if err != nil {
			v, _ := chromedp.Run(ctx, chromedp.Value(chromedp.ID("result-url")))
			msg, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("form-error")))
			t.Fatalf("create promo on %s: %v (result %q, error %q)", d, err, v, msg)
		}
	}
	// One visit of go.test/promo; both links are listed (newest first),
	// each with its own visit count.
	req, _ := http.NewRequest("GET", s.URL+"/promo", nil)
	req.Host = "go.test"
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || resp.StatusCode != 302 {
		t.Fatalf("visit go.test/promo: %v %v", resp, err)
	}
	resp.Body.Close()
	if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.ID("mine-links"))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`[...document.querySelectorAll("#mine-links td.num")].map((c) => c.textContent).join() === "0,1"`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		cells, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("mine-links")))
		t.Fatalf("list of this browser's links: %v\n%s", err, cells)
	}
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#mine-links tbody tr:last-child button.link`)),
		chromedp.WaitVisible(chromedp.ID("stats")),
	)
	if err == nil {
		_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("stats-h").textContent === "Statistics of go.test/promo" && location.hash === "#stats/promo@go.test"`,
			chromedp.WithPollingTimeout(10*time.Second)))
	}
	if err != nil {
		h, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("stats-h")))
		t.Fatalf("stats view of go.test/promo: %v (heading %q)", err, h)
	}
	if e, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("stats-error"))); e != "" {
		t.Errorf("stats view error: %q", e)
	}
}
