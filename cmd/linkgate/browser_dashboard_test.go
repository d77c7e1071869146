package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/linkgate/linkgate/internal/eventually"
	"github.com/linkgate/linkgate/internal/testdep"
)

// The dashboard in real headless Chromium: anonymous create with no key
// prompt; sign-in (the key kept nowhere in the page, the session cookie
// unreadable by scripts); every link with paging, a tag filter, a
// search, both orders, a page size, the active/expired state (a link
// past its visit limit) and creation dates; edit, delete with
// confirmation, bulk tag and bulk delete; a QR
// code download; a link's statistics; API keys created (token shown once)
// and revoked; sign-out. Each flow is checked against the API, not only
// the page. In every state reached, axe-core reports no violation and
// the page does not scroll sideways at 390 px; screenshots of the main
// states, desktop (1280×800) and mobile (390×844), go to
// LINKGATE_TEST_ARTIFACTS (with LINKGATE_UPDATE_SCREENSHOTS=1, to
// docs/dashboard/).
func TestBrowserDashboard(t *testing.T) {
	axe := axeSource(t)
	s := startServe(t, nil, "--admin-key", "root", "--visits-flush-interval", "100ms")
	api := rootAPI(t, s.URL)
	// 60 links, newest last: every third tagged launch.
	for i := range 60 {
		tags := "[]"
		if i%3 == 0 {
			tags = `["launch"]`
		}
		if st, b := api("POST", "/api/v1/links", fmt.Sprintf(`{"url":"https://example.com/page/%02d","slug":"link-%02d","tags":%s}`, i, i, tags)); st != 201 {
			t.Fatalf("seed link %d: %d %s", i, st, b)
		}
	}
	// One visit of link-59, as a person.
	req, _ := http.NewRequest("GET", s.URL+"/link-59", nil)
	req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0")
	if resp, err := http.DefaultTransport.RoundTrip(req); err != nil || resp.StatusCode != 302 {
		t.Fatalf("visit: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// link-10 reaches its visit limit: expired.
	if st, b := api("PATCH", "/api/v1/links/link-10", `{"max_visits":1}`); st != 200 {
		t.Fatalf("limit link-10: %d %s", st, b)
	}
	visit10, _ := http.NewRequest("GET", s.URL+"/link-10", nil)
	if resp, err := http.DefaultTransport.RoundTrip(visit10); err != nil || resp.StatusCode != 302 {
		t.Fatalf("visit link-10: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	eventually.True(t, 10*time.Second, "link-10 expired", func() bool {
		_, b := api("GET", "/api/v1/links?state=expired", "")
		return strings.Contains(b, `"id":"link-10"`)
	})

	ctx := browser(t)
	b := &page{t: t, ctx: ctx, axe: axe}

	// Anonymous: a key an earlier version stored is removed; create needs
	// no key and asks for none.
	b.do(chromedp.Navigate(s.URL+"/"), chromedp.WaitVisible(chromedp.ID("url")))
	b.eval(`localStorage.setItem("linkgate.adminKey", "root"), true`)
	b.do(chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("signin-open")))
	b.poll(`localStorage.getItem("linkgate.adminKey") === null`, "the stored key removed")
	b.do(chromedp.SendKeys(chromedp.ID("url"), "https://example.com/anonymous"),
		chromedp.Click(chromedp.CSS(`#create button[type="submit"]`)), chromedp.WaitVisible(chromedp.ID("result")))
	b.poll(`document.getElementById("result-url").value.startsWith(location.origin + "/")`, "the anonymous short link")
	b.poll(`document.getElementById("signin").hidden && document.getElementById("form-error").textContent === ""`, "no key prompt after an anonymous create")
	b.check("anonymous")
	b.screenshots("anonymous")

	// Sign in: the list of every link, newest first, 50 a page.
	b.do(chromedp.Click(chromedp.ID("signin-open")), chromedp.WaitVisible(chromedp.ID("admin-key")),
		chromedp.SendKeys(chromedp.ID("admin-key"), "root"), chromedp.Click(chromedp.CSS(`#key-form button`)),
		chromedp.WaitVisible(chromedp.ID("all-links")))
	b.poll(`document.querySelectorAll("#all-links tbody tr").length === 50`, "the first page")
	b.poll(`[...document.querySelectorAll("#all-links tbody tr:nth-child(-n+2) a")].some((a) => a.textContent.endsWith("/link-59"))`, "newest first (the anonymous link and link-59)")
	if got := b.eval(`document.cookie.includes("linkgate_session") || JSON.stringify(localStorage).includes("root") || JSON.stringify(sessionStorage).includes("root")`); got != "false" {
		t.Errorf("the session or the key is readable by the page's scripts")
	}
	b.check("links")
	b.screenshots("links")
	b.do(chromedp.Click(chromedp.ID("page-next")))
	b.poll(`document.querySelectorAll("#all-links tbody tr").length === 11 && document.querySelector("#all-links tbody tr:last-child a").textContent.endsWith("/link-00")`, "the second page")
	b.do(chromedp.Click(chromedp.ID("page-prev")))
	b.poll(`document.querySelectorAll("#all-links tbody tr").length === 50`, "back to the first page")

	// Filters: a tag, then a search.
	b.do(chromedp.SendKeys(chromedp.ID("f-tag"), "launch"), chromedp.Click(chromedp.CSS(`#filters button[type="submit"]`)))
	b.poll(`document.querySelectorAll("#all-links tbody tr").length === 20 && [...document.querySelectorAll("#all-links tbody td:nth-child(4)")].every((c) => c.textContent === "launch")`, "the tag filter")
	b.do(setValue("f-tag", ""), chromedp.SendKeys(chromedp.ID("f-q"), "page/4"), chromedp.Click(chromedp.CSS(`#filters button[type="submit"]`)))
	b.poll(`document.querySelectorAll("#all-links tbody tr").length === 10`, "the search")
	b.do(setValue("f-q", ""), chromedp.Click(chromedp.CSS(`#filters button[type="submit"]`)))
	b.poll(`document.querySelectorAll("#all-links tbody tr").length === 50`, "no filter")

	// Sort, page size, state and creation dates.
	apply := chromedp.Click(chromedp.CSS(`#filters button[type="submit"]`))
	b.do(setValue("f-order", "oldest"), setValue("f-limit", "25"), apply)
	b.poll(`document.querySelectorAll("#all-links tbody tr").length === 25 && document.querySelector("#all-links tbody tr a").textContent.endsWith("/link-00") && document.getElementById("links-order").textContent === "oldest first"`, "oldest first, 25 a page")
	b.do(setValue("f-order", "newest"), setValue("f-limit", "50"), setValue("f-state", "expired"), apply)
	b.poll(`document.querySelectorAll("#all-links tbody tr").length === 1 && document.querySelector("#all-links tbody tr a").textContent.endsWith("/link-10")`, "the expired link only")
	b.do(setValue("f-state", "active"), apply)
	b.poll(`document.querySelectorAll("#all-links tbody tr").length === 50 && ![...document.querySelectorAll("#all-links tbody tr a")].some((a) => a.textContent.endsWith("/link-10"))`, "active links only")
	tomorrow := time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)
	b.do(setValue("f-state", ""), setValue("f-from", tomorrow), apply)
	b.poll(`document.querySelector("#all-links tbody td").textContent === "No links match."`, "nothing created from tomorrow")
	b.do(setValue("f-from", ""), setValue("f-to", tomorrow), apply)
	b.poll(`document.querySelectorAll("#all-links tbody tr").length === 50`, "everything created before tomorrow")
	b.do(setValue("f-to", ""), apply)
	b.poll(`document.querySelectorAll("#all-links tbody tr").length === 50 && document.querySelector("#all-links tbody tr:nth-child(-n+2) a") !== null && !document.getElementById("all-links").hasAttribute("aria-busy")`, "no filter again, and no listing on its way")

	// Edit link-58: a new target and a tag.
	b.do(chromedp.Click(chromedp.CSS(`#all-links button[aria-label$="/link-58"][aria-label^="Edit"]`)), chromedp.WaitVisible(chromedp.ID("e-url")))
	b.check("edit dialog")
	b.do(setValue("e-url", "https://example.com/edited"), setValue("e-tags", "edited, launch"),
		chromedp.Click(chromedp.CSS(`#edit-form button[value="save"]`)), chromedp.WaitNotVisible(chromedp.ID("edit")))
	b.poll(`document.getElementById("links-status").textContent.endsWith("/link-58.")`, "the edit saved")
	if st, body := api("GET", "/api/v1/links/link-58", ""); st != 200 || !strings.Contains(body, `"url":"https://example.com/edited"`) || !strings.Contains(body, `"tags":["edited","launch"]`) {
		t.Errorf("after the edit: %d %s", st, body)
	}

	// Delete link-57, confirmed (cancelled once first).
	del := chromedp.CSS(`#all-links button[aria-label$="/link-57"][aria-label^="Delete"]`)
	b.do(chromedp.Click(del), chromedp.WaitVisible(chromedp.ID("confirm-yes")))
	b.check("delete confirmation")
	b.do(chromedp.Click(chromedp.CSS(`#confirm button[value="no"]`)), chromedp.WaitNotVisible(chromedp.ID("confirm")))
	if st, _ := api("GET", "/api/v1/links/link-57", ""); st != 200 {
		t.Errorf("a cancelled delete deleted: %d", st)
	}
	b.do(chromedp.Click(del), chromedp.WaitVisible(chromedp.ID("confirm-yes")), chromedp.Click(chromedp.ID("confirm-yes")))
	b.poll(`document.getElementById("links-status").textContent === "Deleted 1 link."`, "the delete")
	if st, _ := api("GET", "/api/v1/links/link-57", ""); st != 404 {
		t.Errorf("link-57 after its delete: %d, want 404", st)
	}

	// Bulk: tag link-56 and link-55, then delete them.
	sel := func(id string) chromedp.Action[chromedp.Void] {
		return chromedp.Click(chromedp.CSS(`#all-links input[aria-label$="/` + id + `"]`))
	}
	b.do(sel("link-56"), sel("link-55"), chromedp.WaitVisible(chromedp.ID("bulk")),
		chromedp.SendKeys(chromedp.ID("bulk-tag"), "bulk"), chromedp.Click(chromedp.ID("bulk-tag-add")))
	b.poll(`document.getElementById("links-status").textContent === "Tagged 2 links bulk."`, "the bulk tag")
	for _, id := range []string{"link-56", "link-55"} {
		if _, body := api("GET", "/api/v1/links/"+id, ""); !strings.Contains(body, `"bulk"`) {
			t.Errorf("%s after the bulk tag: %s", id, body)
		}
	}
	b.do(sel("link-56"), sel("link-55"), chromedp.Click(chromedp.ID("bulk-delete")), chromedp.WaitVisible(chromedp.ID("confirm-yes")), chromedp.Click(chromedp.ID("confirm-yes")))
	b.poll(`document.getElementById("links-status").textContent === "Deleted 2 links."`, "the bulk delete")
	for _, id := range []string{"link-56", "link-55"} {
		if st, _ := api("GET", "/api/v1/links/"+id, ""); st != 404 {
			t.Errorf("%s after the bulk delete: %d", id, st)
		}
	}

	// QR code: PNG and SVG at the size chosen.
	b.do(chromedp.Click(chromedp.CSS(`#all-links button[aria-label$="/link-59"][aria-label^="QR"]`)), chromedp.WaitVisible(chromedp.ID("qr-png")),
		setValue("qr-size", "512"))
	b.check("QR dialog")
	qr := b.eval(`Promise.all(["qr-png", "qr-svg"].map((id) => fetch(document.getElementById(id).href).then((r) => r.headers.get("Content-Type") + " " + document.getElementById(id).download))).then((a) => a.join())`)
	if qr != "image/png link-59-512.png,image/svg+xml link-59-512.svg" {
		t.Errorf("QR downloads: %q", qr)
	}
	b.do(chromedp.KeyEvent("\x1b"), chromedp.WaitNotVisible(chromedp.ID("qr-dialog")))

	// A link's statistics: the visit of link-59.
	b.do(chromedp.Click(chromedp.CSS(`#all-links button[aria-label$="/link-59"][aria-label^="Stats"]`)), chromedp.WaitVisible(chromedp.ID("stats")))
	b.poll(`document.getElementById("stat-total").textContent === "1" && document.getElementById("stat-humans").textContent === "1"`, "link-59's visit")
	b.poll(`location.hash === "#stats/link-59" && document.querySelectorAll("#series-table tbody tr").length >= 30`, "the series as a table")
	b.do(chromedp.Click(chromedp.CSS(`[data-range="7d"]`)))
	b.poll(`document.querySelector('[data-range="7d"]').getAttribute("aria-pressed") === "true" && document.getElementById("stats-csv").href.includes("/api/v1/links/link-59/stats.csv?from=")`, "the 7-day range")
	b.check("stats")
	b.screenshots("stats")

	// API keys: create one (its token shown once), then revoke it.
	b.do(chromedp.Navigate(s.URL+"/#keys"), chromedp.WaitVisible(chromedp.ID("key-name")),
		chromedp.SendKeys(chromedp.ID("key-name"), "ci"), chromedp.Click(chromedp.CSS(`#key-create button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("key-token-box")))
	token := b.eval(`document.getElementById("key-token").value`)
	if !strings.HasPrefix(token, "lgk_") {
		t.Fatalf("key token %q", token)
	}
	b.poll(`document.querySelector("#keys-table tbody td").textContent === "ci"`, "the new key listed")
	if _, body := api("GET", "/api/v1/keys", ""); !strings.Contains(body, `"name":"ci","scopes":["links:create"]`) {
		t.Errorf("keys after the create: %s", body)
	}
	b.check("keys")
	b.screenshots("keys")
	b.do(chromedp.Click(chromedp.CSS(`#keys-table button[aria-label="Revoke ci"]`)), chromedp.WaitVisible(chromedp.ID("confirm-yes")), chromedp.Click(chromedp.ID("confirm-yes")))
	b.poll(`document.querySelector("#keys-table tbody td").textContent === "No API keys yet."`, "the key revoked")

	// A links:create key's session may create only.
	b.do(chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("signin-open")))
	b.poll(`document.getElementById("links").hidden && document.getElementById("nav").hidden`, "signed out")
	_, body := api("POST", "/api/v1/keys", `{"name":"creator","scopes":["links:create"]}`)
	var k struct{ Token string }
	json.Unmarshal([]byte(body), &k)
	b.do(chromedp.Click(chromedp.ID("signin-open")), chromedp.SendKeys(chromedp.ID("admin-key"), k.Token), chromedp.Click(chromedp.CSS(`#key-form button`)),
		chromedp.WaitVisible(chromedp.ID("signout")))
	b.poll(`[...document.querySelectorAll("#nav a")].filter((a) => !a.hidden).map((a) => a.textContent).join() === "Create" && !document.getElementById("create-box").hidden`, "create only")
	b.do(chromedp.Navigate(s.URL+"/#links"), chromedp.WaitVisible(chromedp.ID("signout")))
	b.poll(`document.getElementById("links").hidden`, "no list for a links:create key")
}

// TestBrowserKeyboard: the dashboard's flows with the keyboard alone —
// shorten a link anonymously, sign in, reach a link's buttons by Tab,
// edit in the dialog (Enter saves; focus back on the Edit button), open
// the QR code and leave it with Escape, delete after confirming (Escape
// cancels first), open a link's statistics, create an API key (focus on
// the token shown once), and sign out. Each change is checked through
// the API.
func TestBrowserKeyboard(t *testing.T) {
	s := startServe(t, nil, "--admin-key", "root")
	api := rootAPI(t, s.URL)
	if st, body := api("POST", "/api/v1/links", `{"url":"https://example.com/kbd","slug":"kbd"}`); st != 201 {
		t.Fatalf("seed: %d %s", st, body)
	}
	b := &page{t: t, ctx: browser(t)}
	b.do(chromedp.Navigate(s.URL+"/"), chromedp.WaitVisible(chromedp.ID("signin-open")))
	tabTo := b.tabTo
	focused := func(css, what string) {
		t.Helper()
		b.poll(`document.activeElement.matches(`+jsString(css)+`)`, what)
	}

	// Anonymous: type a URL, Enter shortens it; the short link is focused.
	tabTo("#url")
	b.do(chromedp.KeyEvent("https://example.com/by-keyboard\r"))
	b.poll(`!document.getElementById("result").hidden && document.getElementById("result-url").value.startsWith(location.origin + "/")`, "the link shortened")
	focused("#result-url", "focus on the short link")
	anon := strings.TrimPrefix(b.eval(`document.getElementById("result-url").value`), s.URL+"/")

	tabTo("#signin-open")
	b.do(chromedp.KeyEvent("\r"))
	focused("#admin-key", "focus in the key field")
	b.do(chromedp.KeyEvent("root\r"), chromedp.WaitVisible(chromedp.ID("all-links")))
	b.poll(`document.querySelectorAll("#all-links tbody tr").length === 2`, "the list")

	// Edit: the dialog takes the focus; End, more text, Enter saves.
	tabTo(`#all-links button[aria-label$="/kbd"][aria-label^="Edit"]`)
	b.do(chromedp.KeyEvent("\r"))
	b.poll(`document.getElementById("edit").open && document.activeElement.id === "e-url"`, "focus in the edit dialog")
	b.do(chromedp.KeyEvent("\x1b"))
	b.poll(`!document.getElementById("edit").open`, "Escape closes the dialog")
	focused(`#all-links button[aria-label$="/kbd"][aria-label^="Edit"]`, "focus back on Edit")
	b.do(chromedp.KeyEvent("\r"))
	focused("#e-url", "the edit dialog again")
	b.do(chromedp.KeyEvent(kb.End), chromedp.KeyEvent("-v2\r"))
	b.poll(`!document.getElementById("edit").open && document.getElementById("links-status").textContent.endsWith("/kbd.")`, "the edit saved by Enter")
	if st, body := api("GET", "/api/v1/links/kbd", ""); st != 200 || !strings.Contains(body, `"url":"https://example.com/kbd-v2"`) {
		t.Errorf("after the keyboard edit: %d %s", st, body)
	}
	focused(`#all-links button[aria-label$="/kbd"][aria-label^="Edit"]`, "focus on Edit after the save")

	// QR code: opened with Enter, its downloads reachable, closed with Escape.
	tabTo(`#all-links button[aria-label$="/kbd"][aria-label^="QR"]`)
	b.do(chromedp.KeyEvent("\r"))
	b.poll(`document.getElementById("qr-dialog").open && document.getElementById("qr-dialog").contains(document.activeElement)`, "focus in the QR dialog")
	tabTo("#qr-png")
	b.do(chromedp.KeyEvent("\x1b"))
	b.poll(`!document.getElementById("qr-dialog").open`, "Escape closes the QR dialog")
	focused(`#all-links button[aria-label$="/kbd"][aria-label^="QR"]`, "focus back on QR code")

	// Delete the anonymous link: Escape cancels, Enter on Delete confirms.
	del := `#all-links button[aria-label$="/` + anon + `"][aria-label^="Delete"]`
	tabTo(del)
	b.do(chromedp.KeyEvent("\r"))
	focused("#confirm-yes", "focus on the confirmation")
	b.do(chromedp.KeyEvent("\x1b"))
	b.poll(`!document.getElementById("confirm").open`, "Escape cancels")
	if st, _ := api("GET", "/api/v1/links/"+anon, ""); st != 200 {
		t.Errorf("a cancelled delete deleted: %d", st)
	}
	focused(del, "focus back on Delete")
	b.do(chromedp.KeyEvent("\r"))
	focused("#confirm-yes", "the confirmation again")
	b.do(chromedp.KeyEvent("\r"))
	b.poll(`document.getElementById("links-status").textContent === "Deleted 1 link."`, "deleted by keyboard")
	if st, _ := api("GET", "/api/v1/links/"+anon, ""); st != 404 {
		t.Errorf("after the keyboard delete: %d, want 404", st)
	}
	focused("#links-h", "focus on the list after the delete")

	// A link's statistics.
	tabTo(`#all-links button[aria-label$="/kbd"][aria-label^="Stats"]`)
	b.do(chromedp.KeyEvent("\r"))
	b.poll(`!document.getElementById("stats").hidden && document.activeElement.id === "stats"`, "focus on the statistics")

	// API keys: a name, Enter creates it; focus on the token.
	tabTo(`#nav a[data-view="keys"]`)
	b.do(chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.ID("key-name")))
	tabTo("#key-name")
	b.do(chromedp.KeyEvent("typed\r"))
	b.poll(`!document.getElementById("key-token-box").hidden && document.activeElement.id === "key-token" && document.activeElement.value.startsWith("lgk_")`, "the token focused")
	if _, body := api("GET", "/api/v1/keys", ""); !strings.Contains(body, `"name":"typed"`) {
		t.Errorf("keys after the keyboard create: %s", body)
	}

	tabTo("#signout")
	b.do(chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.ID("signin-open")))
	focused("#signin-open", "focus on Sign in")
}

// rootAPI returns a function that calls the API at base with the admin
// key root and returns the status and the body.
func rootAPI(t *testing.T, base string) func(method, path, body string) (int, string) {
	return func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer root")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
}

func jsString(s string) string { b, _ := json.Marshal(s); return string(b) }

// setValue sets a field's value and tells the page (input and change).
func setValue(id, v string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](`(() => { const e = document.getElementById(` + jsString(id) + `); e.value = ` + jsString(v) +
		`; e.dispatchEvent(new Event("input", { bubbles: true })); e.dispatchEvent(new Event("change", { bubbles: true })); })()`)
}

// page drives one tab for a test.
type page struct {
	t   *testing.T
	ctx context.Context
	axe string // axe-core's source; "" checks only the layout
}

func (p *page) do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("browser: %v\n%s", err, p.state())
	}
}

// eval returns what a JavaScript expression (a promise is awaited) gives,
// as text.
func (p *page) eval(js string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[any](js, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", js, err)
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// poll waits (15 s at most) for a JavaScript condition.
// tabTo presses Tab until the focused element matches css (at most 80 times).
func (p *page) tabTo(css string) {
	p.t.Helper()
	for range 80 {
		if p.eval(`document.activeElement.matches(`+jsString(css)+`)`) == "true" {
			return
		}
		p.do(chromedp.KeyEvent("\t"))
	}
	p.t.Fatalf("Tab never reached %s (at %s)", css, p.eval(`document.activeElement.outerHTML.slice(0, 120)`))
}

func (p *page) poll(cond, what string) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		p.t.Fatalf("%s: %v\n%s", what, err, p.state())
	}
}

// state describes the page for a failure message.
func (p *page) state() string {
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
	defer cancel()
	v, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + [...document.querySelectorAll("main > section:not([hidden]), dialog[open]")].map((s) => s.id + ": " + s.innerText.slice(0, 600)).join("\n")`))
	return v
}

// check runs axe-core on the page (WCAG 2.1 A and AA, and best
// practices) in both colour schemes, and checks that the page does not
// scroll sideways at 390 px.
func (p *page) check(state string) {
	p.t.Helper()
	prev := p.eval(`localStorage.getItem("linkgate.theme") || ""`)
	for _, vp := range []struct {
		w, h  int64
		theme string
	}{{390, 844, "dark"}, {1280, 800, "light"}} {
		p.do(chromedp.EmulateViewport(vp.w, vp.h))
		p.eval(`localStorage.setItem("linkgate.theme", "` + vp.theme + `"), document.documentElement.dataset.theme = "` + vp.theme + `", true`)
		if vp.w == 390 {
			if w := p.eval(`((d) => d.scrollWidth > d.clientWidth ? d.scrollWidth + " px in a viewport of " + d.clientWidth : "")(document.documentElement)`); w != "" {
				p.t.Errorf("%s: the page scrolls sideways at 390 px: %s", state, w)
			}
		}
		if p.axe == "" {
			continue
		}
		out := p.eval(`(async () => { if (!window.axe) { ` + p.axe + ` }
			const r = await axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"] } });
			return JSON.stringify(r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(" ")).slice(0, 5) })));
		})()`)
		if out != "[]" {
			p.t.Errorf("%s (%s, %d px): axe-core violations: %s", state, vp.theme, vp.w, out)
		}
	}
	// The scheme the page had, back.
	p.eval(`((t) => { if (t) { localStorage.setItem("linkgate.theme", t); document.documentElement.dataset.theme = t; } else { localStorage.removeItem("linkgate.theme"); delete document.documentElement.dataset.theme; } return true; })(` + jsString(prev) + `)`)
}

var shotsMu sync.Mutex

// screenshots saves what the page shows at 1280×800 and at 390×844.
func (p *page) screenshots(name string) {
	p.t.Helper()
	dir := os.Getenv("LINKGATE_TEST_ARTIFACTS")
	if os.Getenv("LINKGATE_UPDATE_SCREENSHOTS") == "1" {
		dir = filepath.Join("..", "..", "docs", "dashboard")
	}
	if dir == "" {
		return
	}
	shotsMu.Lock()
	defer shotsMu.Unlock()
	for _, vp := range []struct {
		w, h int64
		tag  string
	}{{1280, 800, "desktop"}, {390, 844, "mobile"}} {
		p.do(chromedp.EmulateViewport(vp.w, vp.h))
		shot, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			p.t.Fatalf("screenshot: %v", err)
		}
		path := filepath.Join(dir, name+"-"+vp.tag+".png")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			p.t.Fatal(err)
		}
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			p.t.Fatal(err)
		}
	}
	p.do(chromedp.EmulateViewport(1280, 800))
}

// axeSource reads axe-core (tools/webcheck, LINKGATE_TEST_WEBCHECK).
func axeSource(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(testdep.WebCheck)
	if dir == "" {
		dir = filepath.Join("..", "..", "tools", "webcheck")
	}
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		if testdep.InCI() {
			t.Fatalf("axe-core: %v (scripts/install-deps.sh installs it)", err)
		}
		t.Skipf("axe-core: %v (scripts/install-deps.sh installs it)", err)
	}
	return string(b)
}
