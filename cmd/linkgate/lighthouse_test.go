package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/linkgate/linkgate/internal/testdep"
)

// lighthouseMin is the least score each Lighthouse category must reach.
const lighthouseMin = 0.95

// lighthouseRuns bounds the runs of an audit whose performance falls
// short (see TestLighthouse).
const lighthouseRuns = 4

// TestLighthouse runs Lighthouse 12 (tools/webcheck, npm, pinned) in
// Debian's Chromium on the signed-in list of 100 links and on a link's
// statistics, as a phone and as a desktop: performance, accessibility,
// best practices and SEO must each score at least 0.95. One Node process
// and one Chromium run the four audits (tools/webcheck/lighthouse.mjs);
// this test starts the server, signs in, judges the scores, and runs an
// audit whose performance falls short again, up to lighthouseRuns runs,
// its best counting (below).
func TestLighthouse(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	chromium := testdep.Binary(t, testdep.Chromium, "chromium")
	dir := os.Getenv(testdep.WebCheck)
	if dir == "" {
		dir = filepath.Join("..", "..", "tools", "webcheck")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "lighthouse")); err != nil {
		if testdep.InCI() {
			t.Fatalf("lighthouse: %v (scripts/install-deps.sh installs it)", err)
		}
		t.Skipf("lighthouse: %v (scripts/install-deps.sh installs it)", err)
	}
	node := testdep.Binary(t, "LINKGATE_TEST_NODE", "node")

	s := startServe(t, nil, "--admin-key", "root")
	call := func(method, path, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, s.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer root")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for i := range 100 {
		body := fmt.Sprintf(`{"url":"https://example.com/campaign/%03d?ref=newsletter","slug":"promo-%03d","tags":["t%d"]}`, i, i, i%5)
		if r := call("POST", "/api/v1/links", body); r.StatusCode != 201 {
			t.Fatalf("create: %d", r.StatusCode)
		}
	}
	for range 3 {
		req, _ := http.NewRequest("GET", s.URL+"/promo-007", nil)
		req.Header.Set("Referer", "https://news.example/")
		if r, err := http.DefaultTransport.RoundTrip(req); err == nil {
			r.Body.Close()
		}
	}
	r := call("POST", "/api/v1/session", `{"key":"root"}`)
	var cookie string
	for _, c := range r.Cookies() {
		if c.Name == "linkgate_session" {
			cookie = c.Name + "=" + c.Value
		}
	}
	if cookie == "" {
		t.Fatalf("sign in: %d, no cookie", r.StatusCode)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var audits []string
	for _, page := range []string{"/#links", "/#stats/promo-007"} {
		for _, ff := range []string{"mobile", "desktop"} {
			audits = append(audits, ff+"="+s.URL+page)
		}
	}
	// Performance depends on the CPU the page gets, which other work on
	// a shared machine takes (a long task there inflates total blocking
	// time fourfold in Lighthouse's mobile simulation). Contention only
	// ever adds time, so the best of several runs is the page's own
	// figure: an audit whose best performance is still short is run
	// again, up to lighthouseRuns runs in all. The other categories do
	// not depend on the CPU: their first run counts.
	//
	// Scaling the simulation's CPU slowdown by the run's benchmark index
	// (Lighthouse's measure of the host, taken before the page loads)
	// was tried and does not help here: at 17:00 UTC a run measured
	// 1024, about an idle host, and then spent 2.4 s in blocking tasks.
	best := map[string]lighthouseScore{} // audit, category → best
	for attempt := 1; len(audits) > 0 && attempt <= lighthouseRuns; attempt++ {
		scores := runLighthouse(ctx, t, node, dir, chromium, cookie, audits)
		audits = audits[:0]
		for _, sc := range scores {
			key := sc.FormFactor + "=" + sc.Page + " " + sc.Category
			t.Logf("run %d: %-8s %-28s %-15s %.2f %v %v (benchmark index %.0f)", attempt, sc.FormFactor, strings.TrimPrefix(sc.Page, s.URL), sc.Category, sc.Score, sc.Metrics, sc.Below, sc.BenchmarkIndex)
			if old, ok := best[key]; !ok || sc.Score > old.Score {
				best[key] = sc
			}
			if sc.Category == "performance" && best[key].Score < lighthouseMin {
				audits = append(audits, sc.FormFactor+"="+sc.Page)
			}
		}
	}
	if len(best) != 16 {
		t.Errorf("%d scores, want 16 (2 pages × 2 form factors × 4 categories)", len(best))
	}
	for _, sc := range best {
		if sc.Score < lighthouseMin {
			t.Errorf("%s, %s: %s scores %.2f, below %.2f (audits below 1: %v; %v)", strings.TrimPrefix(sc.Page, s.URL), sc.FormFactor, sc.Category, sc.Score, lighthouseMin, sc.Below, sc.Metrics)
		}
	}
}

type lighthouseScore struct {
	Page           string
	FormFactor     string `json:"form_factor"`
	Category       string
	Score          float64
	Below          []string
	Metrics        map[string]float64
	BenchmarkIndex float64 `json:"benchmark_index"`
}

// runLighthouse runs tools/webcheck/lighthouse.mjs on audits
// ("mobile=URL", "desktop=URL") in one Chromium and returns its scores.
func runLighthouse(ctx context.Context, t *testing.T, node, dir, chromium, cookie string, audits []string) []lighthouseScore {
	t.Helper()
	cmd := exec.CommandContext(ctx, node, append([]string{"lighthouse.mjs", cookie}, audits...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CHROME_PATH="+chromium)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Chromium with it
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever is left of the group
	}
	if err != nil {
		t.Fatalf("lighthouse: %v\n%s\n%s", err, out, stderr.String())
	}
	var scores []lighthouseScore
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var s lighthouseScore
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("lighthouse output %q: %v", sc.Text(), err)
		}
		scores = append(scores, s)
	}
	return scores
}
