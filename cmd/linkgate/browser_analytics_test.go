package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/shortener/geoip/geoiptest"
)

// TestBrowserAnalytics drives the statistics of all links in Chromium:
// visits of three links by people on three systems and by a bot, with
// referrers and UTM parameters, from three countries (a GeoIP database
// written for the test, the client's address from X-Forwarded-For); the
// totals, the countries by name, the top links and every top
// list the page shows, against the API's answer for the same query; the
// people/bots choice, the tag filter, the range presets by hour and by
// day, a custom range, the granularity, the CSV of what is shown, a top
// link's own statistics; the colour scheme toggle; a preset chosen by
// keyboard. axe-core and the 390 px layout are checked in both schemes.
func TestBrowserAnalytics(t *testing.T) {
	axe := axeSource(t)
	geo := geoiptest.WriteDB(t, "GeoLite2-Country", map[string]string{"89.160.20.0/24": "SE", "81.2.69.0/24": "GB", "2a02:ff00::/32": "IT"})
	s := startServe(t, nil, "--admin-key", "root", "--visits-flush-interval", "100ms", "--geoip", geo, "--trusted-proxies", "127.0.0.1")
	api := rootAPI(t, s.URL)
	for _, l := range []string{
		`{"url":"https://example.com/a","slug":"launch-a","tags":["launch"]}`,
		`{"url":"https://example.com/b","slug":"launch-b","tags":["launch"]}`,
		`{"url":"https://example.com/c","slug":"other"}`,
	} {
		if st, b := api("POST", "/api/v1/links", l); st != 201 {
			t.Fatalf("seed %s: %d %s", l, st, b)
		}
	}
	const (
		firefoxLinux  = "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0"
		safariIPhone  = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1"
		chromeAndroid = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36"
		googlebot     = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
	)
	for _, v := range []struct {
		path, ua, referer, client string
		n                         int
	}{
		{"/launch-a?utm_source=newsletter&utm_medium=email&utm_campaign=december", firefoxLinux, "https://news.example/post", "89.160.20.5", 3},
		{"/launch-a", safariIPhone, "", "2a02:ff00::1", 1},
		{"/launch-b", chromeAndroid, "https://social.example/x", "81.2.69.7", 2},
		{"/other", googlebot, "", "", 1}, // 127.0.0.1: no country
	} {
		for range v.n {
			req, _ := http.NewRequest("GET", s.URL+v.path, nil)
			req.Header.Set("User-Agent", v.ua)
			if v.referer != "" {
				req.Header.Set("Referer", v.referer)
			}
			if v.client != "" {
				req.Header.Set("X-Forwarded-For", v.client)
			}
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil || resp.StatusCode != 302 {
				t.Fatalf("visit %s: %v %v", v.path, resp, err)
			}
			resp.Body.Close()
		}
	}
	eventually.True(t, 10*time.Second, "the 7 visits counted", func() bool {
		_, b := api("GET", "/api/v1/stats", "")
		return strings.Contains(b, `"total":7,`)
	})

	b := &page{t: t, ctx: browser(t), axe: axe}
	b.do(chromedp.Navigate(s.URL+"/"), chromedp.WaitVisible(chromedp.ID("signin-open")),
		chromedp.Click(chromedp.ID("signin-open")), chromedp.SendKeys(chromedp.ID("admin-key"), "root"),
		chromedp.Click(chromedp.CSS(`#key-form button`)), chromedp.WaitVisible(chromedp.ID("all-links")),
		chromedp.Click(chromedp.CSS(`#nav a[data-view="analytics"]`)), chromedp.WaitVisible(chromedp.ID("stats")))

	// tops gives each top list the page shows, caption: value=count;….
	const tops = `Object.fromEntries([...document.querySelectorAll("#tops table")].map((t) => [t.caption.textContent,
		[...t.tBodies[0].rows].filter((r) => r.cells.length === 2).map((r) => r.cells[0].textContent + "=" + r.cells[1].textContent).join(";")]))`
	totals := func(total, people, bots string) string {
		return `document.getElementById("stat-total").textContent === "` + total + `" && document.getElementById("stat-humans").textContent === "` + people +
			`" && document.getElementById("stat-bots").textContent === "` + bots + `"`
	}
	b.poll(`document.getElementById("stats-h").textContent === "Statistics of all links" && `+totals("7", "6", "1"), "all links' totals")
	b.poll(`document.querySelector('#nav a[data-view="analytics"]').getAttribute("aria-current") === "page"`, "Analytics the current section")
	for _, c := range []struct{ caption, want string }{
		{"Top links", "launch-a=4;launch-b=2;other=1"},
		{"Referrers", "news.example=3;social.example=2"},
		{"Countries", "Sweden (SE)=3;United Kingdom (GB)=2;Italy (IT)=1"},
		{"Browsers", "Firefox=3;Chrome=2;Safari=1"},
		{"Operating systems", "Linux=3;Android=2;iOS=1"},
		{"Devices", "desktop=3;mobile=3;bot=1"},
		{"UTM source", "newsletter=3"},
		{"UTM medium", "email=3"},
		{"UTM campaign", "december=3"},
		{"Bots", "Google=1"},
	} {
		// Each row wanted is in the list (whose other rows are checked
		// against the API below); the top links are exactly these.
		b.poll(`((t) => { const got = (t[`+jsString(c.caption)+`] || "").split(";"); return `+jsString(c.want)+`.split(";").every((r) => got.includes(r)) && (`+jsString(c.caption)+` !== "Top links" || got.join(";") === `+jsString(c.want)+`); })(`+tops+`)`,
			c.caption+" "+c.want)
	}
	// Every list the page shows is the API's answer for the query the CSV
	// link names (what is shown is what is downloaded).
	same := `(async () => {
		const q = document.getElementById("stats-csv").href.replace("/stats.csv?", "/stats?");
		const s = await (await fetch(q)).json();
		const names = { referrer: "Referrers", country: "Countries", browser: "Browsers", os: "Operating systems", device: "Devices",
			utm_source: "UTM source", utm_medium: "UTM medium", utm_campaign: "UTM campaign", bot: "Bots" };
		const shown = ` + tops + `;
		// Countries are shown by name, "Sweden (SE)": the API answers codes.
		if (shown.Countries) shown.Countries = shown.Countries.replace(/[^;=]* \((\w+)\)=/g, "$1=");
		const bad = [];
		for (const [dim, rows] of Object.entries(s.top)) {
			const want = rows.map((r) => r.value + "=" + r.count).join(";");
			if ((rows.length || shown[names[dim]] !== undefined) && (shown[names[dim]] || "") !== want) bad.push(dim + ": page " + shown[names[dim]] + ", API " + want);
		}
		const links = s.links.map((l) => l.id + "=" + l.count).join(";");
		if (shown["Top links"] !== links) bad.push("links: page " + shown["Top links"] + ", API " + links);
		const rows = document.querySelectorAll("#series-table tbody tr").length;
		if (rows !== s.series.length) bad.push("series: " + rows + " rows, API " + s.series.length);
		if (String(s.total) !== document.getElementById("stat-total").textContent) bad.push("total " + s.total);
		return bad.join("\n");
	})()`
	if d := b.eval(same); d != "" {
		t.Errorf("the page differs from the API:\n%s", d)
	}
	// The CSV: the series adds up to the total shown; the lists and the
	// top links are in it.
	csv := b.eval(`fetch(document.getElementById("stats-csv").href).then((r) => r.text())`)
	sum := 0
	for line := range strings.SplitSeq(strings.SplitN(csv, "\n\n", 2)[0], "\n") {
		var ts string
		var total, people, bots int
		if n, _ := fmt.Sscanf(strings.ReplaceAll(line, ",", " "), "%s %d %d %d", &ts, &total, &people, &bots); n == 4 {
			sum += total
		}
	}
	for _, want := range []string{"referrer,news.example,3", "utm_source,newsletter,3", "link,launch-a,4"} {
		if !strings.Contains(csv, want+"\n") {
			t.Errorf("the CSV lacks %q:\n%s", want, csv)
		}
	}
	if sum != 7 {
		t.Errorf("the CSV's series adds up to %d visits, want 7:\n%s", sum, csv)
	}
	b.check("analytics")
	b.screenshots("analytics")
	// The chart follows the page's width: its own units are 720 wide on a
	// desktop and about as many as its pixels on a phone (300–360), so its
	// labels stay readable on both.
	viewBox := `document.querySelector("#chart svg").getAttribute("viewBox").split(" ")[2]`
	b.poll(viewBox+` === "720"`, "the chart at 1280 px")
	b.do(chromedp.EmulateViewport(390, 844))
	b.poll(`((w) => w >= 300 && w <= 360)(Number(`+viewBox+`))`, "the chart drawn again at 390 px")
	b.do(chromedp.EmulateViewport(1280, 800))
	b.poll(viewBox+` === "720"`, "the chart drawn again at 1280 px")

	// People only: the bot leaves the count of visits, the lists and the
	// CSV (people and bots stay apart below it).
	b.do(setValue("s-bots", "exclude"))
	b.poll(totals("6", "6", "1")+` && !(`+tops+`)["Bots"] && document.getElementById("stats-csv").href.includes("bots=exclude")`, "people only")
	b.poll(`(`+tops+`)["Top links"] === "launch-a=4;launch-b=2"`, "people only: top links")
	b.do(setValue("s-bots", "only"))
	b.poll(totals("1", "6", "1")+` && (`+tops+`)["Top links"] === "other=1"`, "bots only")
	b.do(setValue("s-bots", "include"))
	b.poll(totals("7", "6", "1"), "people and bots again")

	// By tag: the links tagged launch.
	b.do(chromedp.SendKeys(chromedp.ID("s-tag"), "launch"), chromedp.Click(chromedp.CSS(`#stats-form button[type="submit"]`)))
	b.poll(totals("6", "6", "0")+` && (`+tops+`)["Top links"] === "launch-a=4;launch-b=2" && document.getElementById("stats-csv").href.includes("tag=launch")`, "the tag launch")
	b.do(setValue("s-tag", ""), chromedp.Click(chromedp.CSS(`#stats-form button[type="submit"]`)))
	b.poll(totals("7", "6", "1"), "no tag")

	// Presets: 24 hours by hour (24 rows), 12 months by day; the
	// granularity chosen; a custom range with no visit.
	b.do(chromedp.Click(chromedp.CSS(`[data-range="24h"]`)))
	b.poll(`document.querySelector('[data-range="24h"]').getAttribute("aria-pressed") === "true" && document.getElementById("chart-h").textContent === "Visits per hour (UTC)" && document.querySelectorAll("#series-table tbody tr").length === 24 && `+totals("7", "6", "1"), "24 hours by hour")
	if d := b.eval(same); d != "" {
		t.Errorf("24 hours: the page differs from the API:\n%s", d)
	}
	b.do(setValue("s-gran", "day"))
	b.poll(`document.getElementById("chart-h").textContent === "Visits per day (UTC)" && document.querySelectorAll("#series-table tbody tr").length <= 2 && document.getElementById("stats-csv").href.includes("granularity=day")`, "24 hours by day")
	b.do(setValue("s-gran", ""), chromedp.Click(chromedp.CSS(`[data-range="12m"]`)))
	b.poll(`document.querySelector('[data-range="12m"]').getAttribute("aria-pressed") === "true" && document.getElementById("chart-h").textContent === "Visits per day (UTC)" && document.querySelectorAll("#series-table tbody tr").length >= 365 && `+totals("7", "6", "1"), "12 months by day")
	now := time.Now().UTC()
	b.do(setValue("s-from", now.AddDate(0, 0, -60).Format(time.DateOnly)), setValue("s-to", now.AddDate(0, 0, -40).Format(time.DateOnly)),
		chromedp.Click(chromedp.CSS(`#stats-form button[type="submit"]`)))
	b.poll(`document.querySelectorAll('[data-range][aria-pressed="true"]').length === 0 && document.querySelectorAll("#series-table tbody tr").length === 21 && `+totals("0", "0", "0"), "a custom range of 21 days with no visit")
	b.do(chromedp.Click(chromedp.CSS(`[data-range="30d"]`)))
	b.poll(totals("7", "6", "1"), "30 days")

	// A top link opens its own statistics.
	b.do(chromedp.Click(chromedp.CSS(`#tops a[href="#stats/launch-a"]`)))
	b.poll(`document.getElementById("stats-h").textContent === "Statistics of launch-a" && `+totals("4", "4", "0")+` && document.querySelector("[data-all]").hidden`, "launch-a's statistics")
	b.check("a link's statistics")

	// The colour scheme toggle: pressed, remembered, and the page's
	// colours change.
	bg := `getComputedStyle(document.body).backgroundColor`
	light := b.eval(bg)
	b.do(chromedp.Click(chromedp.ID("theme")))
	b.poll(`document.getElementById("theme").getAttribute("aria-pressed") === "true" && localStorage.getItem("linkgate.theme") === "dark" && `+bg+` !== `+jsString(light), "the dark scheme")
	b.do(chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("stats")))
	b.poll(`document.documentElement.dataset.theme === "dark" && document.getElementById("theme").getAttribute("aria-pressed") === "true"`, "the dark scheme kept")
	b.check("dark scheme")
	b.screenshots("analytics-dark")
	b.do(chromedp.Click(chromedp.ID("theme")))
	b.poll(`document.getElementById("theme").getAttribute("aria-pressed") === "false" && `+bg+` === `+jsString(light), "the light scheme")

	// By keyboard: back to all links, a preset chosen with Tab and Enter.
	b.do(chromedp.Navigate(s.URL+"/#analytics"), chromedp.WaitVisible(chromedp.ID("stats")))
	b.poll(totals("7", "6", "1"), "all links again")
	b.eval(`document.activeElement.blur(), true`)
	for i := 0; b.eval(`document.activeElement.matches('[data-range="7d"]')`) != "true"; i++ {
		if i == 60 {
			t.Fatalf("Tab never reached the 7-day preset (at %s)", b.eval(`document.activeElement.outerHTML.slice(0, 120)`))
		}
		b.do(chromedp.KeyEvent("\t"))
	}
	b.do(chromedp.KeyEvent("\r"))
	b.poll(`document.querySelector('[data-range="7d"]').getAttribute("aria-pressed") === "true" && document.getElementById("stats-csv").href.includes("from=")`, "the 7-day preset by keyboard")
}
