package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/linkgate/linkgate/internal/testdep"
)

// TestBrowser drives the web page in real headless Chromium (Debian's
// chromium, LINKGATE_TEST_CHROMIUM): shorten a URL, read the short link,
// follow it, and see the visit on the stats view. A screenshot of the
// page is saved in LINKGATE_TEST_ARTIFACTS (webpage.png).
func TestBrowser(t *testing.T) {
	landed := make(chan string, 4)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		landed <- r.URL.Path
		fmt.Fprint(w, "<!doctype html><title>landed</title><p>target page</p>")
	}))
	defer target.Close()
	// localhost, not 127.0.0.1: the service refuses links to itself (the
	// page's Host); loopback targets need --allow-loopback-targets.
	targetURL := strings.Replace(target.URL, "127.0.0.1", "localhost", 1) + "/landing/page?x=1"

	s := startServe(t, nil, "--stats-public", "--visits-flush-interval", "100ms", "--allow-loopback-targets")

	ctx := browser(t)

	// 1. Open the page and shorten a URL through the form.
	err := chromedp.Do(ctx,
		chromedp.EmulateViewport(900, 1400),
		chromedp.Navigate(s.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("url")),
		chromedp.SendKeys(chromedp.ID("url"), targetURL),
		chromedp.Click(chromedp.CSS(`#create button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("result")),
	)
	if err != nil {
		t.Fatalf("shorten in the page: %v", err)
	}
	short, err := chromedp.Run(ctx, chromedp.Value(chromedp.ID("result-url")))
	if err != nil || !strings.HasPrefix(short, s.URL+"/") {
		t.Fatalf("short link %q (%v) is not under %s", short, err, s.URL)
	}
	id := strings.TrimPrefix(short, s.URL+"/")

	// 2. Follow it, as a person's browser would (the headless user agent
	// counts as a bot).
	if _, err := chromedp.Call(ctx, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{
		UserAgent: "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0"}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(short)); err != nil {
		t.Fatalf("following %s: %v", short, err)
	}
	if title, err := chromedp.Run(ctx, chromedp.Title()); err != nil || title != "landed" {
		t.Fatalf("after following %s: title %q, %v", short, title, err)
	}
	select {
	case p := <-landed:
		if p != "/landing/page" {
			t.Errorf("target got path %q", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the redirect did not reach the target")
	}

	// 3. Back on the page, the stats view and the list show the visit.
	poll := func(js string) chromedp.Action[bool] {
		return chromedp.Poll[bool](js, chromedp.WithPollingTimeout(15*time.Second))
	}
	err = chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/#stats/"+id),
		chromedp.WaitVisible(chromedp.ID("stats")),
	)
	if err != nil {
		t.Fatalf("stats view: %v", err)
	}
	if _, err := chromedp.Run(ctx, poll(`document.getElementById("stat-total").textContent === "1"`)); err != nil {
		total, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("stat-total")))
		t.Fatalf("visit count on the stats view: %q (%v), want 1", total, err)
	}
	if people, _ := chromedp.Run(ctx, chromedp.Text(chromedp.ID("stat-humans"))); people != "1" {
		t.Errorf("people %q, want 1 (the visit had a browser's user agent)", people)
	}
	if _, err := chromedp.Run(ctx, poll(`document.querySelector("#mine-links td.num").textContent === "1"`)); err != nil {
		t.Errorf("visit count in the list of this browser's links: %v", err)
	}

	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("LINKGATE_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, "webpage.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// browser returns a context for driving one tab of headless Chromium
// (Debian's chromium, LINKGATE_TEST_CHROMIUM) at 1280×800, at most 120 s
// long and closed when the test ends. Without extra options the tab is
// in a browser context of its own (its own cookies and storage) in the
// one browser the test binary shares (sharedBrowser); options for the
// browser's command line (extra) start a browser for this test alone.
func browser(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	chromium := testdep.Binary(t, testdep.Chromium, "chromium")
	var ctx context.Context
	var cancel context.CancelFunc
	if len(extra) == 0 {
		parent, err := sharedBrowser(chromium)
		if err != nil {
			t.Fatalf("chromium: %v", err)
		}
		ctx, cancel = chromedp.NewContext(parent, chromedp.WithNewBrowserContext())
	} else {
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromiumOptions(chromium, t.TempDir()), extra...)...)
		t.Cleanup(cancelAlloc)
		ctx, cancel = chromedp.NewContext(actx)
	}
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 120*time.Second)
	t.Cleanup(cancelT)
	return ctx
}

func chromiumOptions(chromium, profile string) []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.WindowSize(1280, 800),
		chromedp.UserDataDir(profile),
	}
}

// shared is the browser the test binary's browser tests share: started
// by the first, stopped by TestMain (and, should the binary die, by the
// kernel: chromedp starts it with Pdeathsig).
var shared struct {
	once    sync.Once
	ctx     context.Context
	stop    func()
	profile string
	err     error
}

func sharedBrowser(chromium string) (context.Context, error) {
	shared.once.Do(func() {
		shared.profile, shared.err = os.MkdirTemp("", "linkgate-chromium-")
		if shared.err != nil {
			return
		}
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), chromiumOptions(chromium, shared.profile)...)
		ctx, cancel := chromedp.NewContext(actx)
		shared.ctx, shared.stop = ctx, func() { cancel(); cancelAlloc(); os.RemoveAll(shared.profile) }
		shared.err = chromedp.Do(ctx) // starts the browser
	})
	return shared.ctx, shared.err
}

// TestMain stops the shared browser once the tests are done.
func TestMain(m *testing.M) {
	code := m.Run()
	stopSharedBrowser()
	os.Exit(code)
}

// stopSharedBrowser stops the shared browser, if a test started it.
func stopSharedBrowser() {
	if shared.stop != nil {
		shared.stop()
	}
}
