package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/linkgate/linkgate/shortener"
	"github.com/linkgate/linkgate/shortener/pebble"
)

// A search that few links match, in a store of more links than a page
// reads (pebble.FindReads): the page stops with no match and says so,
// "Search further" (by keyboard) goes on from where it stopped and finds
// the one link, the oldest; axe and the 390 px layout in both states.
func TestBrowserSearchFurther(t *testing.T) {
	axe := axeSource(t)
	dir := filepath.Join(t.TempDir(), "links")
	store, err := pebble.Open(dir, pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := make([]shortener.LinkRecord, pebble.FindReads+50)
	for i := range recs {
		recs[i].Link = shortener.Link{ID: fmt.Sprintf("s%05d", i), URL: fmt.Sprintf("https://example.com/p/%d", i), CreatedAt: base.Add(time.Duration(i) * time.Minute)}
	}
	recs[0].Link.URL = "https://example.com/ZQ" // the oldest: past the first page's reads
	if _, err := store.ImportRecords(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, nil, "--admin-key", "root", "--store", "pebble:"+dir)

	b := &page{t: t, ctx: browser(t), axe: axe}
	b.do(chromedp.Navigate(s.URL+"/"), chromedp.WaitVisible(chromedp.ID("signin-open")))
	b.tabTo("#signin-open")
	b.do(chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.ID("admin-key")), chromedp.KeyEvent("root\r"), chromedp.WaitVisible(chromedp.ID("all-links")))
	b.poll(`document.querySelectorAll("#all-links tbody tr").length === 50`, "the list")

	b.tabTo("#f-q")
	b.do(chromedp.KeyEvent("zq\r"))
	b.poll(`document.querySelector("#all-links tbody").textContent === "No match among these 5,000 links."`, "an empty page cut short")
	b.poll(`document.getElementById("page-next").textContent === "Search further" && !document.getElementById("page-next").disabled`, "Search further offered")
	b.poll(`document.getElementById("links-scanned").textContent.startsWith("This page searched 5,000 links and stopped")`, "the page says why")
	b.check("search cut short")

	b.tabTo("#page-next")
	b.do(chromedp.KeyEvent("\r"))
	b.poll(`[...document.querySelectorAll("#all-links tbody a")].map((a) => a.textContent.split("/").pop()).join() === "s00000"`, "the match found further")
	b.poll(`document.getElementById("page-next").disabled && document.getElementById("page-next").textContent === "Next page" && document.getElementById("links-scanned").textContent === ""`, "the last page")
	b.check("search further")
}
